"""SPEC S2 end to end: a real MCP client -> corral mcp -> signed loopback -> corral gateway ->
kiosk and proxy containers -> local HTTPS sites (containers this module starts, with names
we map ourselves). Effects are read back by polling screenshots, never by sleeping."""

from __future__ import annotations

import base64
import io
import shutil
import signal
import subprocess
import tempfile
import warnings
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPDeprecationWarning
from PIL import Image

from orchestrator.audit import AuditLog
from orchestrator.config import render_new_agent
from orchestrator.home import CorralHome
from tests.e2e.conftest import McpHarness, connect, wait_until
from tests.e2e.gateways import running_gateway
from tests.helpers import corral_bin, env_with_home
from tests.sites import EGRESS_NETWORK, make_certs, start_site

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SITE = "site.corral.test"  # allowed
OTHER = "other.corral.test"  # resolvable (mapped) but not allowed
XSITE = "pay.elsewhere.test"  # another site (its frames run in a renderer of their own)
WHITE, GREEN, BLUE, RED = (255, 255, 255), (0, 255, 0), (0, 0, 255), (255, 0, 0)

PAGE = """<!doctype html><html><head><title>{title}</title></head>
<body style="margin:0;background:{bg}">{body}</body></html>"""

ROUTES: dict[str, tuple[int, dict[str, str], str]] = {
    "/": (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(
            title="home",
            bg="#fff",
            body='<button style="position:absolute;left:100px;top:100px;width:200px;'
            'height:80px" onclick="document.body.style.background=\'#0f0\'">Go</button>'
            '<input style="position:absolute;left:100px;top:300px;width:300px;height:40px">'
            '<div style="height:3000px"></div>',
        ),
    ),
    "/login": (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(
            title="login",
            bg="#f00",
            body='<input type="password" value="hunter2" style="position:absolute;'
            'left:100px;top:100px;width:200px;height:40px;background:#fff;border:0">',
        ),
    ),
    # A login page whose password field is the last of 6001 on-screen elements of one
    # container (the desktop rig's mask reads at most 5000 elements of an application).
    "/crowded": (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(
            title="crowded",
            bg="#f00",
            body='<div id="pad" style="position:absolute;left:0;top:0;width:800px;'
            'display:flex;flex-wrap:wrap"></div><script>const pad=document.getElementById'
            '("pad");for(let i=0;i<6000;i++){const b=document.createElement("button");'
            'b.style.cssText="width:8px;height:8px;padding:0;border:0;background:#f00";'
            'pad.appendChild(b)}const f=document.createElement("input");f.type="password";'
            'f.value="hunter2";f.style.cssText="position:absolute;left:100px;top:100px;'
            'width:200px;height:40px;background:#fff;border:0";pad.appendChild(f)</script>',
        ),
    ),
    "/sub": (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(
            title="sub",
            bg="#ff0",
            body="<script>fetch('https://other.corral.test/',{mode:'no-cors'})"
            ".then(()=>{document.body.style.background='#0f0'})"
            ".catch(()=>{document.body.style.background='#00f'})</script>",
        ),
    ),
    "/redirect": (302, {"Location": f"https://{OTHER}/"}, ""),
    "/popup": (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(
            title="popup",
            bg="#fff",
            body='<button style="position:absolute;left:0;top:0;width:400px;height:200px" '
            "onclick=\"window.open('/', 'w2', 'width=300,height=300')\">Open</button>",
        ),
    ),
    # The masking attacks (issue: masked screenshots neither a page nor the agent can defeat).
    "/newtab": (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(
            title="newtab",
            bg="#fff",
            body='<a target="_blank" href="/login" style="position:absolute;left:0;top:0;'
            'width:400px;height:200px;display:block;background:#00f">open</a>',
        ),
    ),
    "/opentab": (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(
            title="opentab",
            bg="#fff",
            body='<button style="position:absolute;left:0;top:0;width:400px;height:200px" '
            "onclick=\"window.open('/login')\">Open</button>",
        ),
    ),
    "/liar": (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(
            title="liar",
            bg="#f00",
            body='<input type="password" value="hunter2" style="position:absolute;'
            'left:100px;top:100px;width:200px;height:40px;background:#fff;border:0">'
            "<script>const z = () => ({x:0,y:0,width:0,height:0,left:0,top:0,right:0,"
            "bottom:0}); Element.prototype.getBoundingClientRect = z;"
            "Object.defineProperty(HTMLInputElement.prototype,'type',{get(){return 'text'}});"
            "window.getComputedStyle = () => ({visibility:'hidden',display:'none',"
            "getPropertyValue(){return ''}});</script>",
        ),
    ),
    "/shadow": (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(
            title="shadow",
            bg="#f00",
            body="<div id='h'></div><script>document.getElementById('h').attachShadow("
            "{mode:'closed'}).innerHTML='<input type=password value=hunter2 style=\"position:"
            "absolute;left:100px;top:100px;width:200px;height:40px;background:#fff;border:0\">'"
            "</script>",
        ),
    ),
    "/framed": (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(
            title="framed",
            bg="#0f0",
            body='<iframe src="/login" style="position:absolute;left:300px;top:200px;'
            'width:400px;height:300px;border:0"></iframe>',
        ),
    ),
    "/scaled": (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(
            title="scaled",
            bg="#f00",
            body='<div style="transform:scale(2);transform-origin:0 0"><input type="password" '
            'value="hunter2" style="position:absolute;left:50px;top:50px;width:100px;'
            'height:20px;background:#fff;border:0"></div>',
        ),
    ),
    "/withpay": (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(
            title="withpay",
            bg="#0f0",
            body='<iframe src="/pay" style="position:absolute;left:300px;top:200px;'
            'width:300px;height:200px;border:0"></iframe>',
        ),
    ),
    "/pay": (200, {"Content-Type": "text/html"}, PAGE.format(title="pay", bg="#00f", body="")),
    # A button an approval rule covers (its accessible name holds "Pay"), and one it does not.
    "/checkout": (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(
            title="checkout",
            bg="#fff",
            body='<button style="position:absolute;left:100px;top:100px;width:200px;'
            'height:80px" onclick="document.body.style.background=\'#00f\'"><span>Pay now'
            '</span></button><button style="position:absolute;left:400px;top:100px;'
            'width:200px;height:80px" onclick="document.body.style.background=\'#0f0\'">'
            "Continue</button>",
        ),
    ),
    # Tab then Return onto a covered button; a typed newline in a covered form's field.
    "/tabpay": (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(
            title="tabpay",
            bg="#fff",
            body='<form action="/paid-by-key"><button style="position:absolute;left:400px;'
            'top:100px;width:200px;height:80px">Pay now</button></form>',
        ),
    ),
    "/typepay": (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(
            title="typepay",
            bg="#fff",
            body='<form action="/paid-by-newline"><input name="amount" aria-label="Amount" '
            'style="position:absolute;left:100px;top:300px;width:300px;height:40px">'
            '<button style="position:absolute;left:400px;top:100px;width:200px;height:80px">'
            "Pay now</button></form>",
        ),
    ),
    # An approval is for one exact action (tests/e2e/test_approval_binding.py): a button
    # held by "delete", another beside it, and every key the page sees reported.
    "/bound": (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(
            title="bound",
            bg="#fff",
            body='<button style="position:absolute;left:100px;top:100px;width:200px;'
            'height:80px" onclick="fetch(\'/bound-deleted\')">Delete draft</button>'
            '<button style="position:absolute;left:400px;top:100px;width:200px;height:80px" '
            "onclick=\"fetch('/bound-continued')\">Continue</button>"
            "<script>document.addEventListener('keydown', (e) => "
            "fetch('/bound-key?' + encodeURIComponent(e.key)));</script>",
        ),
    ),
    # The page swaps the held button for another in the same place once the site answers
    # its long poll (/hold/swap, answered when the test asks for /release/swap).
    "/swap": (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(
            title="swap",
            bg="#fff",
            body='<button id="b" style="position:absolute;left:100px;top:100px;width:200px;'
            'height:80px" onclick="fetch(\'/swap-draft\')">Delete draft</button>'
            "<script>fetch('/hold/swap').then(() => { const old = document.getElementById('b');"
            "const n = document.createElement('button'); n.style.cssText = old.style.cssText;"
            "n.textContent = 'Delete everything'; n.onclick = () => fetch('/swap-everything');"
            "old.replaceWith(n); fetch('/swapped'); });</script>",
        ),
    ),
    # The same, but the button put in its place looks the same: only its action differs.
    "/clone": (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(
            title="clone",
            bg="#fff",
            body='<button id="b" style="position:absolute;left:100px;top:100px;width:200px;'
            'height:80px" onclick="fetch(\'/clone-draft\')">Delete draft</button>'
            "<script>fetch('/hold/clone').then(() => { const old = document.getElementById('b');"
            "const n = old.cloneNode(true); n.onclick = () => fetch('/clone-everything');"
            "old.replaceWith(n); fetch('/swapped-clone'); });</script>",
        ),
    ),
    # The desktop rig's Chromium (issue 22 item 2): a red "Delete everything" button and a
    # blue field in one form; a click, Return on the button and a newline in the field all
    # submit it (the site logs /deleted), so each waits for an operator.
    "/deleteform": (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(
            title="deleteform",
            bg="#fff",
            body='<form action="/deleted"><input name="amount" aria-label="Amount" '
            'style="position:absolute;left:60px;top:330px;width:300px;height:40px;'
            'background:#00f;border:0;color:#00f"><button style="position:absolute;'
            'left:60px;top:60px;width:500px;height:200px;background:#f00;border:0;color:#f00">'
            "Delete everything</button></form>",
        ),
    ),
    # /deleteform with 600 paragraphs between the field and its form's button: more
    # children of the form than the desktop's target read once looked at (500).
    "/deletelongform": (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(
            title="deletelongform",
            bg="#fff",
            body='<form action="/deleted"><input name="amount" aria-label="Amount" '
            'style="position:absolute;left:60px;top:330px;width:300px;height:40px;'
            'background:#00f;border:0;color:#00f"><button style="position:absolute;'
            'left:60px;top:60px;width:500px;height:200px;background:#f00;border:0;color:#f00">'
            "Delete everything</button></form><script>const f=document.forms[0],"
            'b=f.querySelector("button");for(let i=0;i<600;i++){const p=document.'
            'createElement("p");p.textContent="line "+i;p.style.cssText="position:absolute;'
            'left:700px;top:"+i+"px;margin:0;font-size:1px";f.insertBefore(p,b)}</script>',
        ),
    ),
    # A page whose own script blocks its main thread 4 s at a time (a frozen page).
    "/busy": (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(
            title="busy",
            bg="#f00",
            body="<script>setInterval(() => { const t = performance.now();"
            " while (performance.now() - t < 4000) {} }, 20);</script>",
        ),
    ),
    "/mutating": (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(
            title="mutating",
            bg="#f00",
            body='<input id="m" type="password" value="hunter2" style="position:absolute;'
            'left:100px;top:100px;width:200px;height:40px;background:#fff;border:0">'
            "<script>let n = 0; setInterval(() => { n++; const m = document.getElementById('m');"
            "m.style.top = (n % 2 ? 300 : 100) + 'px';"
            "if (n % 3 === 0) { m.remove(); document.body.appendChild(m); } }, 150);</script>",
        ),
    ),
}
FIELD = "position:absolute;width:100px;height:20px;background:#fff;border:0"
OTHER_ROUTES = {
    "*": (200, {"Content-Type": "text/html"}, PAGE.format(title="o", bg="#f0f", body="")),
    "/login": ROUTES["/login"],
    # Payment fields: a card number by autocomplete, a code masked by CSS only.
    "/card": (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(
            title="card",
            bg="#f00",
            body=f'<input autocomplete="cc-number" value="4111" style="{FIELD};left:20px;'
            f'top:20px"><input value="123" style="{FIELD};left:20px;top:60px;'
            '-webkit-text-security:disc">',
        ),
    ),
    # A frame of the first site inside this one.
    "/nest": (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(
            title="nest",
            bg="#00f",
            body=f'<iframe src="https://{OTHER}/login" style="position:absolute;left:50px;'
            'top:50px;width:400px;height:300px;border:0"></iframe>',
        ),
    ),
}
# Pages of SITE framing other origins, for the cross-origin masking test.
FRAMING = {
    # same site, another origin: the frame shares the page's renderer
    "/xsame": f'<iframe src="https://{OTHER}/login" style="position:absolute;left:300px;'
    'top:200px;width:400px;height:300px;border:0"></iframe>',
    # another site, under a CSS scale(2): a renderer of its own, drawn twice as big
    "/xsite": '<div style="transform:scale(2);transform-origin:0 0">'
    f'<iframe src="https://{XSITE}/card" style="position:absolute;left:150px;top:100px;'
    'width:200px;height:150px;border:0"></iframe></div>',
    # another site framing a page of this site's sibling: two levels of renderers
    "/xnest": f'<iframe src="https://{XSITE}/nest" style="position:absolute;left:300px;'
    'top:200px;width:600px;height:450px;border:0"></iframe>',
}
for _path, _body in FRAMING.items():
    ROUTES[_path] = (
        200,
        {"Content-Type": "text/html"},
        PAGE.format(title=_path[1:], bg="#0f0", body=_body),
    )


@dataclass
class World:
    home: CorralHome
    gateway_pid: int


@pytest.fixture(scope="module")
def sites(docker_client: docker.DockerClient) -> Iterator[tuple[str, str, str]]:
    from orchestrator.backends.docker.networks import _ensure_egress_network_sync

    _ensure_egress_network_sync(docker_client)
    certs = Path(tempfile.mkdtemp(prefix="corral-e2e-certs-"))
    started: list[Any] = []
    try:
        ca_pem = make_certs(certs, (SITE, OTHER, XSITE))
        site_ip = start_site(docker_client, certs, ROUTES, 443, [], started)
        other_ip = start_site(docker_client, certs, OTHER_ROUTES, 443, [], started)
        (certs / "ca.pem").write_text(ca_pem)
        yield str(certs / "ca.pem"), site_ip, other_ip
    finally:
        for container in started:
            container.stop()  # removes it (testcontainers' stop is a forced remove)
        shutil.rmtree(certs, ignore_errors=True)


def write_agent(home: CorralHome, name: str, **cu: object) -> None:
    text = render_new_agent(name).replace("computer_use = false", "computer_use = true")
    for key, value in cu.items():
        rendered = repr(value).replace("'", '"')
        text = text.replace(
            "[capabilities.computer_use_config]\n",
            f"[capabilities.computer_use_config]\n{key} = {rendered}\n",
            1,
        )
    lines, seen = [], set()
    for line in text.splitlines():  # keep the first definition of each key
        key = line.split("=")[0].strip()
        if key in cu and key in seen:
            continue
        seen.add(key)
        lines.append(line)
    path = home.agent_file(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def kiosk_config(site_info: tuple[str, str, str], approvals_timeout: int = 120) -> str:
    """config.toml below [gateway]: the kiosks reach the test sites by the mapped names."""
    ca_file, site_ip, other_ip = site_info
    return (
        f"[approvals]\ntimeout_seconds = {approvals_timeout}\n\n"
        f'[container.kiosk]\nextra_ca_file = "{ca_file}"\n'
        f'resolve_overrides = {{ "{SITE}" = "{site_ip}", "{OTHER}" = "{other_ip}", '
        f'"{XSITE}" = "{other_ip}" }}\n'
    )


@pytest.fixture
async def world(corral_home: CorralHome, sites: tuple[str, str, str]) -> AsyncIterator[World]:
    write_agent(corral_home, "alice", allowed_domains=[SITE], deny_list=["bank.corral.test"])
    async with running_gateway(corral_home, kiosk_config(sites)) as (_, pid):
        yield World(corral_home, pid)


def kiosks(client: docker.DockerClient, agent: str, owner: int | None = None) -> list[Any]:
    """`agent`'s kiosks; with `owner`, only those of that gateway (another test on the
    engine may run a kiosk for an agent of the same name, "alice" above all)."""
    labels = ["corral.kind=kiosk", f"corral.agent={agent}"]
    labels += [] if owner is None else [f"corral.owner.pid={owner}"]
    return client.containers.list(ignore_removed=True, all=True, filters={"label": labels})


async def call(mcp: McpHarness, tool: str, **arguments: Any) -> types.CallToolResult:
    return await mcp.client.call_tool(tool, arguments)


def text_of(result: types.CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, types.TextContent))


def image_of(result: types.CallToolResult) -> Image.Image:
    blocks = [b for b in result.content if isinstance(b, types.ImageContent)]
    assert len(blocks) == 1 and blocks[0].mime_type == "image/png", text_of(result)
    image = Image.open(io.BytesIO(base64.b64decode(blocks[0].data)))
    return image.convert("RGB")


async def screen_until(mcp: McpHarness, check: Any, limit: float = 20) -> types.CallToolResult:
    """Poll screenshots until `check(result, image)` holds."""
    last: list[types.CallToolResult] = []

    async def ok() -> bool:
        result = await call(mcp, "computer_screenshot")
        last[:] = [result]
        return not result.is_error and bool(check(result, image_of(result)))

    try:
        await wait_until(ok, limit=limit)
    except TimeoutError as exc:
        raise AssertionError(f"screen never matched; last: {text_of(last[0])}") from exc
    return last[0]


async def test_a_session_start_reports_its_phases_and_nothing_typed_reaches_a_message(
    world: World,
) -> None:
    secret = "Tr0ub4dor-typed-secret"
    async with connect(world.home, "stdio", agent="alice") as mcp:
        with warnings.catch_warnings():  # logging/setLevel: deprecated from 2026-07-28 on
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await mcp.client.set_logging_level("debug")
        phases: list[str] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            phases.append(message or "")

        started = await mcp.client.call_tool(
            "computer_session_start", {}, progress_callback=on_progress
        )
        assert not started.is_error, text_of(started)
        assert phases == [  # egress, container, display, browser
            "setting up the egress proxy for 1 allowed site(s)",
            "starting the kiosk container",
            "starting the display",
            "starting the browser",
        ]
        logs = [n.params for n in mcp.notes if isinstance(n, types.LoggingMessageNotification)]
        assert [(log.level, log.data["event"]) for log in logs] == [
            ("info", "sandbox_started"),
            ("info", "session_ready"),
        ]

        typed = await mcp.client.call_tool(
            "computer_type", {"text": secret}, progress_callback=on_progress
        )
        assert not typed.is_error, text_of(typed)
        await call(mcp, "computer_key", key="ctrl+a")
        await call(mcp, "computer_session_stop")
        everything = repr(mcp.notes) + repr(phases)
        assert secret not in everything
        assert secret not in world.home.audit_file.read_text()


async def test_a_kiosk_session_through_mcp(
    world: World, docker_client: docker.DockerClient
) -> None:
    async with connect(world.home, "stdio", agent="alice") as mcp:
        started = await call(mcp, "computer_session_start", width="1280", height=800)
        assert not started.is_error, text_of(started)
        text = text_of(started)
        assert "50 actions" in text and f"computer_navigate may open: {SITE}" in text
        assert "Nothing can be approved from chat or by a tool" in text
        assert "wait for an operator's approval (up to 120 s" in text
        assert started.structured_content["chromium_sandbox"] is True  # type: ignore[index]
        assert len(kiosks(docker_client, "alice", world.gateway_pid)) == 1

        first = await call(mcp, "computer_screenshot")
        assert image_of(first).size == (1280, 800)
        assert "Actions used: 0/50" in text_of(first)

        nav = await call(mcp, "computer_navigate", url=f"https://{SITE}/")
        assert not nav.is_error, text_of(nav)
        await screen_until(mcp, lambda r, img: img.getpixel((50, 50)) == WHITE)
        click = await call(mcp, "computer_click", x=200, y=140)
        assert not click.is_error and "Actions used: 2/50" in text_of(click)
        await screen_until(mcp, lambda r, img: img.getpixel((50, 50)) == GREEN)

        assert not (await call(mcp, "computer_click", x="250", y="320", double="true")).is_error
        typed = await call(mcp, "computer_type", text="hello")
        assert not typed.is_error and "Typed 5 characters" in text_of(typed)
        assert not (await call(mcp, "computer_key", key="ctrl+a")).is_error
        zoom = await call(mcp, "computer_key", key="ctrl+plus")
        assert zoom.is_error and "is not allowed" in text_of(zoom)
        keys = [
            e["details"]
            for e in AuditLog(world.home.audit_file).read()
            if e["event"] == "computer_action" and e["details"].get("tool") == "computer_key"
        ]
        assert keys and all(d == {**d, "key_class": "chord"} and "key" not in d for d in keys)
        scrolled = await call(mcp, "computer_scroll", x=640, y=400, direction="down", amount=5)
        assert not scrolled.is_error and "Actions used: 6/50" in text_of(scrolled)

        stopped = await call(mcp, "computer_session_stop")
        assert not stopped.is_error, text_of(stopped)
        assert kiosks(docker_client, "alice", world.gateway_pid) == []
        after = await call(mcp, "computer_screenshot")
        assert after.is_error and "Your session ended: stopped by the agent" in text_of(after)
    audit = world.home.audit_file.read_text()
    assert "hello" not in audit and '"chars":5' in audit  # typed text never reaches the audit


async def test_egress_is_only_the_allowlist(world: World) -> None:
    async with connect(world.home, "stdio", agent="alice") as mcp:
        assert not (await call(mcp, "computer_session_start")).is_error
        refused = {
            f"https://{OTHER}/": "is not in this agent's allowed_domains",
            f"http://{SITE}/": "only https:// URLs",
            f"https://{SITE}:8443/": "only port 443",
            f"https://user:pw@{SITE}/": "user name or password",
            f"https://{SITE}/" + "a" * 2000: "at most 2000 bytes",
        }
        for url, reason in refused.items():
            result = await call(mcp, "computer_navigate", url=url)
            assert result.is_error and reason in text_of(result), (url, text_of(result))
        # A page's sub-request to a non-listed host fails in the network (the page turns blue).
        assert not (await call(mcp, "computer_navigate", url=f"https://{SITE}/sub")).is_error
        await screen_until(mcp, lambda r, img: img.getpixel((50, 50)) == BLUE)
        # A redirect from the allowed host to a non-listed one fails too.
        redirect = await call(mcp, "computer_navigate", url=f"https://{SITE}/redirect")
        assert redirect.is_error and "ERR_" in text_of(redirect), text_of(redirect)
        await call(mcp, "computer_session_stop")


async def test_password_fields_are_masked_and_unclear_screens_are_masked_whole(
    world: World, docker_client: docker.DockerClient
) -> None:
    async with connect(world.home, "stdio", agent="alice") as mcp:
        assert not (await call(mcp, "computer_session_start")).is_error
        await call(mcp, "computer_navigate", url=f"https://{SITE}/login")
        shot = await screen_until(mcp, lambda r, img: img.getpixel((50, 50)) == RED)
        img = image_of(shot)
        assert img.getpixel((200, 120)) == (0, 0, 0)  # inside the password field
        assert img.getpixel((150, 160)) == RED  # just below it
        assert "1 password field(s) masked" in text_of(shot)

        await call(mcp, "computer_navigate", url=f"https://{SITE}/popup")
        await screen_until(mcp, lambda r, img: img.getpixel((10, 300)) == WHITE)
        await call(mcp, "computer_click", x=200, y=100)
        popup = await screen_until(mcp, lambda r, img: "multiple windows" in text_of(r))
        assert image_of(popup).getextrema() == ((0, 0), (0, 0), (0, 0))
        assert popup.structured_content["masked"] is True  # type: ignore[index]

        # Kill the browser the probe reads: the probe fails, and the whole image is masked.
        (kiosk,) = kiosks(docker_client, "alice", world.gateway_pid)
        kiosk.exec_run(["pkill", "-KILL", "-f", "chromium"], user="1000:1000")
        dead = await screen_until(mcp, lambda r, img: "detection failed" in text_of(r))
        assert image_of(dead).getextrema() == ((0, 0), (0, 0), (0, 0))
        await call(mcp, "computer_session_stop")


def all_black(result: types.CallToolResult) -> bool:
    return image_of(result).getextrema() == ((0, 0), (0, 0), (0, 0))


async def test_the_masking_attacks_are_masked(world: World) -> None:
    """Each way a page or the agent defeated the mask, through MCP, pixels checked."""
    write_agent(world.home, "gina", allowed_domains=[SITE], deny_list=[f"https://{SITE}/pay"])
    async with connect(world.home, "stdio", agent="gina") as mcp:

        async def show(path: str, ready: Any) -> types.CallToolResult:
            opened = await call(mcp, "computer_navigate", url=f"https://{SITE}{path}")
            assert not opened.is_error, text_of(opened)
            return await screen_until(mcp, ready)

        def red_at(x: int, y: int) -> Any:
            return lambda r, img: img.getpixel((x, y)) == RED

        assert not (await call(mcp, "computer_session_start")).is_error
        # A page that lies to in-page scripts about its DOM.
        liar = image_of(await show("/liar", red_at(50, 50)))
        assert liar.getpixel((200, 120)) == (0, 0, 0) and liar.getpixel((150, 160)) == RED
        # A password field in a closed shadow root.
        shadow = image_of(await show("/shadow", red_at(50, 50)))
        assert shadow.getpixel((200, 120)) == (0, 0, 0) and shadow.getpixel((150, 160)) == RED
        # In a frame, at the frame's offset.
        framed = image_of(await show("/framed", red_at(320, 220)))
        assert framed.getpixel((500, 320)) == (0, 0, 0)  # 300+200, 200+120
        assert framed.getpixel((450, 360)) == RED
        # Under a CSS transform: scale(2): the field is drawn at 100,100 and 200x40.
        scaled = image_of(await show("/scaled", red_at(20, 20)))
        assert scaled.getpixel((290, 135)) == (0, 0, 0) and scaled.getpixel((150, 160)) == RED
        # A deny-listed frame masks everything; so does the denied page by another spelling.
        pay_frame = await show("/withpay", lambda r, img: "a frame on the page" in text_of(r))
        assert all_black(pay_frame)
        odd = f"https://{SITE.upper()}:443/./pay"
        assert not (await call(mcp, "computer_navigate", url=odd)).is_error
        respelled = await screen_until(mcp, lambda r, img: "on the deny list" in text_of(r))
        assert all_black(respelled)
        # Zoom keys are refused outright (the mask would be drawn at 100 %).
        zoom = await call(mcp, "computer_key", key="ctrl+plus")
        assert zoom.is_error and "is not allowed" in text_of(zoom)
        # A target=_blank link opens a tab: kiosk mode has one X window, the probe counts
        # the browser's tabs and masks everything.
        await show("/newtab", lambda r, img: img.getpixel((10, 300)) == WHITE)
        await call(mcp, "computer_click", x=200, y=100)
        tabs = await screen_until(mcp, lambda r, img: "tabs or popups are open" in text_of(r))
        assert all_black(tabs)
        await call(mcp, "computer_session_stop")
    async with connect(world.home, "stdio", agent="gina") as mcp:
        # window.open without features: a tab, not a window.
        assert not (await call(mcp, "computer_session_start")).is_error
        await call(mcp, "computer_navigate", url=f"https://{SITE}/opentab")
        await screen_until(mcp, lambda r, img: img.getpixel((10, 300)) == WHITE)
        await call(mcp, "computer_click", x=200, y=100)
        opened = await screen_until(mcp, lambda r, img: "tabs or popups are open" in text_of(r))
        assert all_black(opened)
        await call(mcp, "computer_session_stop")


async def test_secret_fields_in_cross_origin_frames_are_masked(world: World) -> None:
    """Frames of another origin on the same site (same renderer), of another site (a
    renderer of its own, under a CSS scale), and nested across sites: every secret field
    is found from outside the page and masked where it is drawn, pixels checked."""
    write_agent(world.home, "ivy", allowed_domains=[SITE, OTHER, XSITE])
    async with connect(world.home, "stdio", agent="ivy") as mcp:
        assert not (await call(mcp, "computer_session_start")).is_error

        async def show(path: str, x: int, y: int) -> Image.Image:
            opened = await call(mcp, "computer_navigate", url=f"https://{SITE}{path}")
            assert not opened.is_error, text_of(opened)
            shot = await screen_until(mcp, lambda r, img: img.getpixel((x, y)) == RED)
            assert "whole screenshot is masked" not in text_of(shot), text_of(shot)
            return image_of(shot)

        same = await show("/xsame", 320, 220)  # the frame's red page, at 300,200
        assert same.getpixel((500, 320)) == (0, 0, 0)  # its password field: 300+100+100
        assert same.getpixel((450, 360)) == RED
        # /card's fields at 20,20 and 20,60 (100x20), the frame at 150,100, all scaled 2x.
        card = await show("/xsite", 310, 210)
        assert card.getpixel((440, 260)) == (0, 0, 0)  # the card number: 2*(150+20+50)
        assert card.getpixel((440, 340)) == (0, 0, 0)  # the CSS-masked code
        assert card.getpixel((440, 300)) == RED  # between the two
        # SITE -> XSITE (at 300,200) -> OTHER's login (at 50,50) -> field at 100,100.
        nest = await show("/xnest", 360, 260)
        assert nest.getpixel((550, 370)) == (0, 0, 0)
        assert nest.getpixel((550, 410)) == RED
        await call(mcp, "computer_session_stop")


async def test_a_page_that_moves_its_password_field_never_shows_it(world: World) -> None:
    """The field jumps between two places and is re-inserted every 150 ms, so screenshots
    land while it moves: no white pixel of it may ever reach the agent (the mask of the
    probe before and after each grab covers both places when it moved in between)."""
    write_agent(world.home, "hank", allowed_domains=[SITE])
    async with connect(world.home, "stdio", agent="hank") as mcp:
        assert not (await call(mcp, "computer_session_start")).is_error
        await call(mcp, "computer_navigate", url=f"https://{SITE}/mutating")
        await screen_until(mcp, lambda r, img: img.getpixel((50, 50)) == RED)
        for _ in range(25):
            img = image_of(await call(mcp, "computer_screenshot"))
            for top in (100, 300):
                region = img.crop((100, top, 300, top + 40))
                assert WHITE not in {region.getpixel((x, 20)) for x in range(0, 200, 10)}
        await call(mcp, "computer_session_stop")


async def test_max_actions_no_network_and_parameter_ranges(world: World) -> None:
    write_agent(world.home, "bob", max_actions=2)
    async with connect(world.home, "stdio", agent="bob") as mcp:
        bad = await call(mcp, "computer_session_start", width=319)
        assert bad.is_error and "width" in text_of(bad) and "320 to 1920" in text_of(bad)
        started = await call(mcp, "computer_session_start", width=800, height=600)
        assert "no network" in text_of(started)
        nav = await call(mcp, "computer_navigate", url=f"https://{SITE}/")
        assert nav.is_error and "no network" in text_of(nav)
        assert not (await call(mcp, "computer_click", x=10, y=10)).is_error
        assert not (await call(mcp, "computer_key", key="Return")).is_error
        over = await call(mcp, "computer_click", x=10, y=10)
        assert over.is_error and "2 actions are used up" in text_of(over)
        right_double = await call(mcp, "computer_click", x=1, y=1, button="right", double=True)
        assert right_double.is_error and "double" in text_of(right_double)
        await call(mcp, "computer_session_stop")


async def test_only_names_in_resolve_overrides_may_point_at_private_addresses(world: World) -> None:
    """The world's config maps two names in resolve_overrides; `localhost` (127.0.0.1) is
    not one of them, so it gets no pin, and the start result says why."""
    write_agent(world.home, "erin", allowed_domains=["localhost", SITE])
    async with connect(world.home, "stdio", agent="erin") as mcp:
        started = await call(mcp, "computer_session_start")
        text = text_of(started)
        assert not started.is_error, text
        assert started.structured_content is not None
        assert started.structured_content["navigable_sites"] == [SITE]
        assert "localhost (it resolves only to non-public addresses: 127.0.0.1 (loopback)" in text
        nav = await call(mcp, "computer_navigate", url="https://localhost/")
        assert nav.is_error and "was not resolved when the session started" in text_of(nav)
        await call(mcp, "computer_session_stop")


async def test_revoking_computer_use_removes_the_session_within_seconds(
    world: World, docker_client: docker.DockerClient
) -> None:
    write_agent(world.home, "fred")
    async with connect(world.home, "stdio", agent="fred") as mcp:
        assert not (await call(mcp, "computer_session_start")).is_error
        assert kiosks(docker_client, "fred")
        path = world.home.agent_file("fred")
        path.write_text(path.read_text().replace("computer_use = true", "computer_use = false"))
        # The gateway's expiry pass (every second) ends it; no call from the agent needed.
        await wait_until(lambda: not kiosks(docker_client, "fred"), limit=15)
    ended = [
        e
        for e in AuditLog(world.home.audit_file).read()
        if e["event"] == "computer_session_ended" and e["agent"] == "fred"
    ]
    assert ended and ended[-1]["details"]["why"].startswith("its access was revoked")


async def test_an_idle_session_is_removed(world: World, docker_client: docker.DockerClient) -> None:
    write_agent(world.home, "carol", idle_timeout_seconds=5)
    async with connect(world.home, "stdio", agent="carol") as mcp:
        assert not (await call(mcp, "computer_session_start")).is_error
        assert kiosks(docker_client, "carol")
        await wait_until(lambda: not kiosks(docker_client, "carol"), limit=30)
        after = await call(mcp, "computer_screenshot")
        assert "it was idle for 5 s" in text_of(after)


async def test_a_session_past_its_lifetime_is_removed_even_while_busy(
    world: World, docker_client: docker.DockerClient
) -> None:
    write_agent(world.home, "dave", max_lifetime_seconds=10, max_actions=10_000)
    async with connect(world.home, "stdio", agent="dave") as mcp:
        assert not (await call(mcp, "computer_session_start")).is_error

        async def ended() -> bool:
            # Keep acting (so the idle timeout never fires) until the lifetime ends it.
            result = await call(mcp, "computer_key", key="Escape")
            return result.is_error and "it reached its 10 s lifetime" in text_of(result)

        await wait_until(ended, limit=30)
        # Refused at once; the container's removal then completes.
        await wait_until(lambda: not kiosks(docker_client, "dave"), limit=30)


async def test_killing_the_gateway_leaves_no_session_container(
    world: World, docker_client: docker.DockerClient
) -> None:
    async with connect(world.home, "stdio", agent="alice") as mcp:
        assert not (await call(mcp, "computer_session_start")).is_error
        owned = {"label": [f"corral.owner.pid={world.gateway_pid}"]}
        assert (
            len(docker_client.containers.list(ignore_removed=True, all=True, filters=owned)) == 2
        )  # kiosk, proxy
        import os

        os.kill(world.gateway_pid, signal.SIGKILL)
        await wait_until(
            lambda: not docker_client.containers.list(ignore_removed=True, all=True, filters=owned)
        )
        down = await call(mcp, "computer_screenshot")
        assert down.is_error and "corral gateway is not running" in text_of(down)
    # The session network outlives the killed gateway; the next gateway (or `corral reap`)
    # removes it, and its INPUT rule, because its owner is dead. (Not asserted present
    # here: under `make test` another test's gateway may start meanwhile and reap it.)
    owned_nets = {"label": f"corral.owner.pid={world.gateway_pid}"}
    reap = subprocess.run(
        [corral_bin(), "reap"], env=env_with_home(world.home), capture_output=True, timeout=60
    )
    assert reap.returncode == 0, reap.stderr
    assert docker_client.networks.list(filters=owned_nets) == []
    # The shared egress network stays: other sessions and corral processes use it.
    assert [n.name for n in docker_client.networks.list(names=[EGRESS_NETWORK])] == [EGRESS_NETWORK]
