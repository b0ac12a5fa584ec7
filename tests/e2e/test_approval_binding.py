"""Issue 22 item 1 on a real kiosk: an approval is for one exact action. Judged by the
test site's own request log (what the page did), not by corral's answers:

(a) while a click on "Delete draft" waits for an operator, the agent's other click, type
    and key on the same kiosk are refused ("an approval is pending") and the page sees
    none of them; the approved click lands once;
(c) the approval is used once: deciding it again is refused, and the same click again
    waits for an approval of its own;
(b) the page swaps the held button while the approval waits (when the test answers the
    page's long poll), for "Delete everything" or for a clone that looks the same but
    does something else; the operator approves; the click is refused ("the target
    changed since it was approved"), the swapped button is never pressed, and the audit
    log has the refusal with both digests. (The clone is told apart by its DOM node, which
    the kiosk's `target` op reads: it needs the kiosk image of this commit or later.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import docker
import pytest

from orchestrator.audit import AuditLog
from orchestrator.home import CorralHome
from sandboxes.approval_binding import PENDING, TARGET_CHANGED
from tests.e2e.conftest import connect
from tests.e2e.held import while_held as shared_while_held
from tests.e2e.test_activation_rules import arrives, count, open_page
from tests.e2e.test_computer_use import SITE, World, call, text_of, write_agent
from tests.e2e.test_computer_use import sites as sites
from tests.e2e.test_operators import corral, kiosk_gateway
from tests.sites import release, requests_seen

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

APPROVALS_TIMEOUT = 60  # seconds: long enough for the CLI calls made while one waits
DELETE_DRAFT = {"x": 200, "y": 140}  # the held button's middle, on /bound and /swap
CONTINUE = {"x": 500, "y": 140}


@pytest.fixture
async def world(corral_home: CorralHome, sites: tuple[str, str, str]) -> AsyncIterator[World]:
    async with kiosk_gateway(corral_home, sites, APPROVALS_TIMEOUT) as running:
        yield running


async def while_held(home: CorralHome, act: Any, during: Any) -> Any:
    """`tests.e2e.held.while_held` for kai's approvals."""
    return await shared_while_held(home, act, during, agent="kai")


def decide(home: CorralHome, what: str, approval_id: str) -> None:
    done = corral(home, "approvals", what, approval_id)
    assert done.returncode == 0, done.stderr


async def test_other_input_waits_out_a_pending_approval_which_is_used_once(
    world: World, docker_client: docker.DockerClient, sites: tuple[str, str, str]
) -> None:
    home, site_ip = world.home, sites[1]
    write_agent(home, "kai", allowed_domains=[SITE], confirm_words=["delete"], confirm_urls=[])
    ids: list[str] = []
    async with connect(home, "stdio", agent="kai") as mcp:
        assert not (await call(mcp, "computer_session_start")).is_error
        await open_page(mcp, "/bound")

        async def others(approval: dict[str, Any]) -> None:
            ids.append(approval["id"])
            # What the operator sees: the bound action, the target as read, its digest.
            action = approval["action"]
            assert action["tool"] == "computer_click" and action["params"]["x"] == 200
            assert action["target"]["name"] == "Delete draft", action
            assert len(approval["digest"]) == 64
            shown = corral(home, "approvals", "show", approval["id"])
            assert shown.returncode == 0 and approval["digest"] in shown.stdout, shown.stderr
            for tool, args in (
                ("computer_click", CONTINUE),
                ("computer_type", {"text": "x"}),
                ("computer_key", {"key": "Tab"}),
            ):
                refused = await call(mcp, tool, **args)
                assert refused.is_error and PENDING in text_of(refused), text_of(refused)
            assert not (await call(mcp, "computer_screenshot")).is_error
            decide(home, "approve", approval["id"])

        def delete_draft() -> Any:
            return call(mcp, "computer_click", **DELETE_DRAFT)

        clicked = await while_held(home, delete_draft, others)
        assert not clicked.is_error, text_of(clicked)
        await arrives(docker_client, site_ip, "/bound-deleted")
        # The page hears keys: a Tab now (no approval pending) is its positive control.
        assert not (await call(mcp, "computer_key", key="Tab")).is_error
        await arrives(docker_client, site_ip, "/bound-key?Tab")

        # (c) used once: the decision cannot be made again, the same click waits anew.
        again = corral(home, "approvals", "approve", ids[0])
        assert again.returncode != 0 and "already approved" in again.stderr + again.stdout

        async def deny(approval: dict[str, Any]) -> None:
            ids.append(approval["id"])
            decide(home, "deny", approval["id"])

        denied = await while_held(home, delete_draft, deny)
        assert denied.is_error and "denied this action" in text_of(denied)
        assert ids[0] != ids[1]
        await open_page(mcp, "/?after-bound")  # a later request, as a fence
        await arrives(docker_client, site_ip, "/?after-bound")
        seen = requests_seen(docker_client, site_ip)
        assert count(docker_client, site_ip, "/bound-deleted") == 1, seen
        assert count(docker_client, site_ip, "/bound-continued") == 0, seen
        assert [p for p in seen if p.startswith("/bound-key")] == ["/bound-key?Tab"], seen
        await call(mcp, "computer_session_stop")


@pytest.mark.parametrize(
    ("page", "swapped"),
    [
        ("swap", "/swapped"),  # another button: "Delete everything"
        ("clone", "/swapped-clone"),  # a clone that looks the same, with another action
    ],
)
async def test_a_target_the_page_swapped_while_pending_is_refused_after_approval(
    world: World,
    docker_client: docker.DockerClient,
    sites: tuple[str, str, str],
    page: str,
    swapped: str,
) -> None:
    home, site_ip = world.home, sites[1]
    write_agent(home, "kai", allowed_domains=[SITE], confirm_words=["delete"], confirm_urls=[])
    async with connect(home, "stdio", agent="kai") as mcp:
        assert not (await call(mcp, "computer_session_start")).is_error
        await open_page(mcp, f"/{page}")
        await arrives(docker_client, site_ip, f"/hold/{page}")  # the page's long poll is open

        async def swap_then_approve(approval: dict[str, Any]) -> None:
            assert approval["action"]["target"]["name"] == "Delete draft", approval
            release(docker_client, site_ip, page)
            await arrives(docker_client, site_ip, swapped)  # the page swapped the button
            decide(home, "approve", approval["id"])

        clicked = await while_held(
            home, lambda: call(mcp, "computer_click", **DELETE_DRAFT), swap_then_approve
        )
        assert clicked.is_error and TARGET_CHANGED in text_of(clicked), text_of(clicked)
        await open_page(mcp, f"/?after-{page}")
        await arrives(docker_client, site_ip, f"/?after-{page}")
        assert count(docker_client, site_ip, f"/{page}-everything") == 0  # never pressed
        assert count(docker_client, site_ip, f"/{page}-draft") == 0
        await call(mcp, "computer_session_stop")
    refused = [
        e["details"]
        for e in AuditLog(home.audit_file).read()
        if e["event"] == "computer_action_refused" and e["details"].get("why") == TARGET_CHANGED
    ]
    assert len(refused) == 1 and refused[0]["approved"] != refused[0]["now"], refused
