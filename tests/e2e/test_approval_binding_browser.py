"""Issue 22 item 1 on a real browser rig (the same pipeline stages as the kiosk's,
tests/e2e/test_approval_binding.py). Judged by the test site's own request log:

(a) while a browser_use click on "Delete draft" waits for an operator, the agent's other
    click, fill, press and navigate on the rig are refused at once ("an approval is
    pending"), not queued behind it, and the page sees none of them;
(c) the approval is used once: deciding it again is refused, the same click again waits
    for an approval of its own;
(b) the page changes the held link's URL while the approval waits; the operator approves;
    the click is refused ("the target changed since it was approved") and the changed URL
    is never opened."""

from __future__ import annotations

from typing import Any

import docker
import pytest

from orchestrator.audit import AuditLog
from orchestrator.home import CorralHome
from sandboxes.approval_binding import PENDING, TARGET_CHANGED
from tests.e2e.conftest import connect
from tests.e2e.test_activation_rules import arrives, count
from tests.e2e.test_approval_binding import decide, while_held
from tests.e2e.test_browser_use import SITE, use, write_rig_agent
from tests.e2e.test_browser_use import gateway as gateway
from tests.e2e.test_browser_use import rig_sites as rig_sites
from tests.e2e.test_computer_use import text_of
from tests.e2e.test_operators import corral
from tests.sites import release, requests_seen

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_other_verbs_are_refused_while_a_browser_approval_is_pending_and_it_is_used_once(
    gateway: CorralHome, docker_client: docker.DockerClient, rig_sites: tuple[str, str, str]
) -> None:
    home, site_ip = gateway, rig_sites[1]
    write_rig_agent(home, "kai", allowed_domains=[SITE], confirm_words=["delete"])
    ids: list[str] = []
    async with connect(home, "stdio", agent="kai") as mcp:
        assert not (await use(mcp, "navigate", url=f"https://{SITE}/bound")).is_error

        def delete_draft() -> Any:
            return use(mcp, "click", role="button", name="Delete draft")

        async def others(approval: dict[str, Any]) -> None:
            ids.append(approval["id"])
            action = approval["action"]
            assert action["tool"] == "browser_use" and action["params"]["verb"] == "click"
            assert action["target"]["name"] == "Delete draft", action
            assert action["target"]["page"] == f"https://{SITE}/bound", action
            for verb, args in (
                ("click", {"role": "button", "name": "Continue"}),
                ("fill", {"role": "textbox", "name": "Note", "text": "x"}),
                ("press", {"key": "Tab"}),
                ("navigate", {"url": f"https://{SITE}/two?while-pending"}),
            ):
                refused = await use(mcp, verb, **args)
                assert refused.is_error and PENDING in text_of(refused), text_of(refused)
            assert not (await use(mcp, "screenshot")).is_error
            decide(home, "approve", approval["id"])

        clicked = await while_held(home, delete_draft, others)
        assert not clicked.is_error, text_of(clicked)
        await arrives(docker_client, site_ip, "/bound-deleted")
        assert not (await use(mcp, "press", key="Tab")).is_error  # the page hears keys
        await arrives(docker_client, site_ip, "/bound-key?Tab")

        again = corral(home, "approvals", "approve", ids[0])
        assert again.returncode != 0 and "already approved" in again.stderr + again.stdout

        async def deny(approval: dict[str, Any]) -> None:
            ids.append(approval["id"])
            decide(home, "deny", approval["id"])

        denied = await while_held(home, delete_draft, deny)
        assert denied.is_error and "denied this action" in text_of(denied)
        assert ids[0] != ids[1]
        assert not (await use(mcp, "navigate", url=f"https://{SITE}/two?after-bound")).is_error
        await arrives(docker_client, site_ip, "/two?after-bound")
        seen = requests_seen(docker_client, site_ip)
        assert count(docker_client, site_ip, "/bound-deleted") == 1, seen
        assert count(docker_client, site_ip, "/bound-continued") == 0, seen
        assert count(docker_client, site_ip, "/two?while-pending") == 0, seen
        assert [p for p in seen if p.startswith("/bound-key")] == ["/bound-key?Tab"], seen
        await mcp.client.call_tool("rig_close", {})


async def test_a_link_the_page_repointed_while_pending_is_not_opened_after_approval(
    gateway: CorralHome, docker_client: docker.DockerClient, rig_sites: tuple[str, str, str]
) -> None:
    home, site_ip = gateway, rig_sites[1]
    write_rig_agent(home, "kai", allowed_domains=[SITE], confirm_words=["delete"])
    async with connect(home, "stdio", agent="kai") as mcp:
        assert not (await use(mcp, "navigate", url=f"https://{SITE}/swaplink")).is_error
        await arrives(docker_client, site_ip, "/hold/swaplink")

        async def repoint_then_approve(approval: dict[str, Any]) -> None:
            assert approval["action"]["target"]["href"] == "/swap-draft", approval
            release(docker_client, site_ip, "swaplink")
            await arrives(docker_client, site_ip, "/swapped-link")
            decide(home, "approve", approval["id"])

        clicked = await while_held(
            home, lambda: use(mcp, "click", role="link", name="Delete draft"), repoint_then_approve
        )
        assert clicked.is_error and TARGET_CHANGED in text_of(clicked), text_of(clicked)
        assert not (await use(mcp, "navigate", url=f"https://{SITE}/two?after-swap")).is_error
        await arrives(docker_client, site_ip, "/two?after-swap")
        assert count(docker_client, site_ip, "/swap-everything") == 0
        assert count(docker_client, site_ip, "/swap-draft") == 0
        await mcp.client.call_tool("rig_close", {})
    refused = [
        e["details"]
        for e in AuditLog(home.audit_file).read()
        if e["event"] == "rig_action_refused" and e["details"].get("why") == TARGET_CHANGED
    ]
    assert len(refused) == 1 and refused[0]["approved"] != refused[0]["now"], refused
