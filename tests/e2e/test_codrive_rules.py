"""Issue 22 item 3, attacked end to end: a real MCP client -> corral mcp -> the gateway ->
the agent's desktop rig, whose Chromium (started by codrive) shows pages of a local HTTPS
site this module starts. The agent tries to get round the rules with codrive's own
steps; each attack is judged by the site's own request log (what the page did), not by
corral's answer:

- a click the agent files under category "none" on a button the desktop reads as
  "Delete everything": held for an operator; denied, the page never saw the click;
- typing into a password field, a CSS-masked field and a CSS-masked field inside a closed
  shadow root, and pasting into each, with category "none": nothing is typed, the desktop
  is handed to a person;
- a step that opens an allowed URL which redirects to a deny-listed page (written in
  other capitals): the run stops there, and its next step never acts.

Every wait is on an event the product emits (a pending approval, the run's state, the
console's seat); the time limits are safety nets only."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import pytest

from orchestrator.config import render_new_agent
from orchestrator.home import CorralHome
from tests.e2e.conftest import McpHarness, connect, wait_until
from tests.e2e.gateways import running_gateway
from tests.e2e.held import while_held
from tests.e2e.test_codrive import GOING, SAFETY, answer_of, corral, status
from tests.e2e.test_codrive import anyio_backend as anyio_backend
from tests.e2e.test_codrive import docker_module as docker_module
from tests.images import ENV
from tests.sites import make_certs, requests_seen, start_site

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SITE = "rules.corral.test"
PAGE = """<!doctype html><html><head><title>{title}</title></head>
<body style="margin:0;font-size:24px">{body}</body></html>"""


def page(title: str, body: str) -> tuple[int, dict[str, str], str]:
    return 200, {"Content-Type": "text/html"}, PAGE.format(title=title, body=body)


ROUTES = {
    "/act": page(
        "act",
        '<button style="width:400px;height:80px" onclick="fetch(\'/deleted\')">'
        "Delete everything</button>",
    ),
    "/secret": page(
        "secret",
        '<input type=password autofocus style="width:300px;height:40px" '
        "oninput=\"fetch('/typed-secret?n='+this.value.length)\">",
    ),
    "/masked": page(
        "masked",
        '<input autofocus style="width:300px;height:40px;-webkit-text-security:disc" '
        "oninput=\"fetch('/typed-masked?n='+this.value.length)\">",
    ),
    "/closed": page(
        "closed",
        "<div id=host></div><script>"
        "const root = document.getElementById('host').attachShadow({mode: 'closed'});"
        "root.innerHTML = '<input style=\"width:300px;height:40px;"
        "-webkit-text-security:disc\">';"
        "const field = root.querySelector('input');"
        "field.oninput = () => fetch('/typed-closed?n=' + field.value.length);"
        "field.focus();</script>",
    ),
    "/redirect": (302, {"Location": "/PRIVATE/landing"}, ""),
    "/PRIVATE/landing": page(
        "landing",
        '<button style="width:300px;height:80px" onclick="fetch(\'/continued\')">Continue</button>',
    ),
}
DENIED = f"https://{SITE}/private"


@dataclass
class World:
    home: CorralHome
    site_ip: str


@pytest.fixture(scope="module")
def site(docker_module: docker.DockerClient) -> Iterator[tuple[str, str]]:
    from orchestrator.backends.docker.networks import _ensure_egress_network_sync

    _ensure_egress_network_sync(docker_module)
    certs = Path(tempfile.mkdtemp(prefix="corral-e2e-rules-"))
    started: list[Any] = []
    try:
        (certs / "ca.pem").write_text(make_certs(certs, (SITE,)))
        ip = start_site(docker_module, certs, ROUTES, 443, [], started)
        yield str(certs / "ca.pem"), ip
    finally:
        for container in started:
            container.stop()
        shutil.rmtree(certs, ignore_errors=True)


@pytest.fixture(scope="module")
async def world(
    tmp_path_factory: pytest.TempPathFactory,
    site: tuple[str, str],
    docker_module: docker.DockerClient,
) -> AsyncIterator[World]:
    home = CorralHome(root=tmp_path_factory.mktemp("codrive-rules") / "home", env=ENV)
    home.ensure()
    text = render_new_agent("alice").replace("codrive = false", "codrive = true")
    text = text.replace("desktop_use = false", "desktop_use = true")
    text = text.replace("allowed_domains = []", f'allowed_domains = ["{SITE}"]')
    text = text.replace(
        "[capabilities.computer_use_config]\n",
        f"[capabilities.computer_use_config]\ndeny_list = {json.dumps([DENIED])}\n",
        1,
    )
    path = home.agent_file("alice")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    ca_file, ip = site
    config = (
        "[approvals]\ntimeout_seconds = 120\n\n[codrive]\nhandoff_timeout_seconds = 300\n\n"
        f'[container.kiosk]\nextra_ca_file = "{ca_file}"\n'
        f'resolve_overrides = {{ "{SITE}" = "{ip}" }}\n'
    )
    async with running_gateway(home, config) as (_, pid):
        yield World(home, ip)
    owned = {"label": [f"corral.owner.pid={pid}"]}
    assert docker_module.containers.list(all=True, ignore_removed=True, filters=owned) == []


def open_url(path: str) -> dict[str, Any]:
    return {"action": "click", "api_action": "open_url", "params": {"url": f"https://{SITE}{path}"}}


def seen(world: World, docker_client: docker.DockerClient) -> list[str]:
    return requests_seen(docker_client, world.site_ip)


async def start(mcp: McpHarness, steps: list[dict[str, Any]]) -> dict[str, Any]:
    args = {"target_app": "chromium", "steps": steps, "watch_mode": True}
    return answer_of(await mcp.client.call_tool("codrive_run", args))


async def ended(mcp: McpHarness, run_id: str) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        now = await status(mcp, run_id)
        return now if now.get("state") not in GOING else None

    found: dict[str, Any] = await wait_until(done, limit=SAFETY)
    return found


async def test_a_click_filed_under_no_category_is_held_by_what_it_acts_on(
    world: World, docker_module: docker.DockerClient
) -> None:
    async with connect(world.home, "stdio", agent="alice") as mcp:

        async def go() -> dict[str, Any]:
            first = await start(
                mcp,
                [
                    open_url("/act"),
                    {
                        "action": "click",
                        "role": "button",
                        "name": "Delete",  # the model's name; the desktop reads the rest
                        "category": "none",
                        "description": "tidy up the page",
                    },
                ],
            )
            return first if first["state"] not in GOING else await ended(mcp, first["run_id"])

        async def during(approval: dict[str, Any]) -> None:
            assert approval["rule"] == "confirm_words: delete", approval
            assert "Delete everything" in approval["description"], approval
            assert "(the agent says: “tidy up the page”)" in approval["description"]
            assert "/deleted" not in seen(world, docker_module)
            await corral(world.home, "approvals", "deny", approval["id"])

        out = await while_held(world.home, go, during, agent="alice", limit=SAFETY)
        assert out["state"] == "stopped", out
        assert "/deleted" not in seen(world, docker_module)


async def handed_to_a_person(world: World, mcp: McpHarness, steps: list[dict[str, Any]]) -> Any:
    """Start a run; once it asks for a person, take the desktop over and hand it back
    with the CLI; the run's end."""
    first = await start(mcp, steps)
    run_id = first["run_id"]

    async def asked() -> bool:
        return (await status(mcp, run_id)).get("state") == "human"

    if first["state"] in GOING:
        await wait_until(asked, limit=SAFETY)
    else:
        return first
    for verb in ("takeover", "handback"):
        done = await corral(world.home, "sessions", verb, "alice.desktop")
        assert done.returncode == 0, done.stderr
    return await ended(mcp, run_id)


@pytest.mark.parametrize(
    ("path", "typed"),
    [("/secret", "/typed-secret"), ("/masked", "/typed-masked"), ("/closed", "/typed-closed")],
)
async def test_no_rung_types_or_pastes_into_a_secret_field(
    world: World, docker_module: docker.DockerClient, path: str, typed: str
) -> None:
    async with connect(world.home, "stdio", agent="alice") as mcp:
        out = await handed_to_a_person(
            world, mcp, [open_url(path), {"action": "type", "text": "hunter2", "category": "none"}]
        )
        assert out["state"] == "finished", out
        assert out["steps"][1]["outcome"].startswith("a person did this step"), out
        paste = [
            open_url(path),
            {"action": "click", "api_action": "clipboard_set", "params": {"text": "hunter2"}},
            {"action": "key", "key_name": "ctrl+v"},
        ]
        out = await handed_to_a_person(world, mcp, paste)
        assert out["state"] == "finished", out
        assert out["steps"][2]["outcome"].startswith("a person did this step"), out
    assert not [p for p in seen(world, docker_module) if p.startswith(typed)]


async def test_a_redirect_to_a_denied_page_stops_the_run_there(
    world: World, docker_module: docker.DockerClient
) -> None:
    async with connect(world.home, "stdio", agent="alice") as mcp:
        first = await start(
            mcp, [open_url("/redirect"), {"action": "click", "role": "button", "name": "Continue"}]
        )
        out = first if first["state"] not in GOING else await ended(mcp, first["run_id"])
    assert out["state"] == "failed", out["reason"]
    assert f"led to {DENIED!r} (deny list)" in out["reason"], out
    assert "/continued" not in seen(world, docker_module)
