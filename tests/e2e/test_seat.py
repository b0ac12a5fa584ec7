"""The seat at the moment of input (issue 22 item 4), attacked on real containers: a real
MCP client -> corral mcp -> corral gateway -> a desktop rig or a kiosk, the AI typing
1000-character runs without pause, and a person taking the seat over with what
`corral sessions takeover` calls (`admin_call`, with an operator's token) and handing it
back with the CLI itself.

What happened is judged where it happened, not by corral's answers: the kiosk's page
draws how many characters its field received; the desktop's Mousepad document is copied
after hand back; the desktop's X selections are read in the container with `xclip`."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import docker
import mcp_types as types
import pytest

from orchestrator.config import render_new_agent
from orchestrator.gateway.admin_client import admin_call
from orchestrator.gateway.wire import ADMIN_SESSION_ACT_PATH
from orchestrator.home import CorralHome
from tests.e2e.conftest import AGENT, connect
from tests.e2e.gateways import operator_env, running_gateway
from tests.e2e.test_computer_use import (
    PAGE,
    SITE,
    call,
    image_of,
    kiosk_config,
    screen_until,
    text_of,
    write_agent,
)
from tests.e2e.test_desktop_rig import fenced, use
from tests.e2e.test_operators import corral
from tests.sites import one_page_site

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SEAT = f"{AGENT}.desktop"
CHUNK = "x" * 1000  # a long type: 32 chunks, the seat checked before each
OTP = "OTP 493817"
BLUE, RED = (0, 0, 255), (255, 0, 0)
# The page's own count of what its field received: a blue bar (characters mod 1000, in
# px) and a red one (thousands, in px), drawn by the page on each input event.
COUNTER = PAGE.format(
    title="typed",
    bg="#fff",
    body='<input id="f" style="position:absolute;left:100px;top:100px;width:300px;'
    'height:40px"><div id="u" style="position:absolute;left:0;top:300px;height:10px;'
    'width:0;background:#00f"></div><div id="t" style="position:absolute;left:0;'
    'top:320px;height:10px;width:0;background:#f00"></div><script>'
    "f.oninput=()=>{const n=f.value.length;u.style.width=(n%1000)+'px';"
    "t.style.width=Math.floor(n/1000)+'px'}</script>",
)


@pytest.fixture
async def gateway(corral_home: CorralHome) -> AsyncIterator[CorralHome]:
    path = corral_home.agent_file(AGENT)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = render_new_agent(AGENT).replace("desktop_use = false", "desktop_use = true")
    path.write_text(text.replace("max_actions = 50", "max_actions = 200"))
    async with running_gateway(corral_home):
        yield corral_home


@pytest.fixture(scope="module")
def counter_site(docker_client: docker.DockerClient) -> Iterator[tuple[str, str, str]]:
    """A local HTTPS site serving the counting page as SITE (OTHER is the same site)."""
    with one_page_site(docker_client, SITE, COUNTER, "corral-e2e-seat-") as site:
        yield site


def bar(img: Any, y: int, colour: tuple[int, int, int]) -> int:
    return sum(1 for x in range(img.width) if img.getpixel((x, y)) == colour)


async def typed_until_taken(home: CorralHome, seat: str, type_once: Any) -> int:
    """The attacker types CHUNK without pause (`type_once()`: the call's result) while a
    person takes `seat` over (the CLI's call) after its first full type. The characters
    that reached the field by the answers: the full types plus what the refusal says
    was typed of the last (checked against the page or document by the caller)."""
    typed_ok = 0
    refusal: list[str] = []
    first_typed = anyio.Event()

    async def ai_types_on() -> None:
        nonlocal typed_ok
        while True:  # bounded by the fail_after below
            result = await type_once()
            if result.is_error:
                refusal.append(text_of(result))
                return
            typed_ok += len(CHUNK)
            first_typed.set()

    # What `corral sessions takeover` does, in process (the CLI's own admin_call): the
    # CLI's start-up would let the AI type on for seconds.
    token = operator_env(home, "olga")["CORRAL_OPERATOR_TOKEN"]
    act = {"agent": seat, "action": "takeover"}
    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ai_types_on)
            await first_typed.wait()
            await anyio.to_thread.run_sync(admin_call, home, token, ADMIN_SESSION_ACT_PATH, act)
    (said,) = refusal
    if "characters were typed" in said:  # cut mid-type: the answer says how far
        landed = int(said.split("after ")[1].split(" of")[0])
        assert 0 < landed < len(CHUNK), said
        return typed_ok + landed
    assert "A person has the desktop" in said, said  # taken between two calls
    return typed_ok


def in_desktop(container: Any, *argv: str, stdin: str | None = None, check: bool = False) -> str:
    """Run `argv` in the desktop container as its user, on its display; its stdout ("" when
    it failed, unless `check`)."""
    done = subprocess.run(
        ["docker", "exec", "-i", "-e", "DISPLAY=:99", container.id, *argv],
        input=(stdin or "").encode(),
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert not check or done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout.decode(errors="replace") if done.returncode == 0 else ""


def selection(container: Any, which: str) -> str:
    return in_desktop(container, "xclip", "-selection", which, "-o")


def person_copies(container: Any, text: str) -> None:
    """What a person copying `text` leaves: the clipboard and primary selection hold it."""
    for which in ("clipboard", "primary"):
        in_desktop(container, "xclip", "-selection", which, "-i", stdin=text, check=True)


async def document(mcp: Any) -> str:
    """Mousepad's whole document: ctrl+a, ctrl+c, the clipboard read until it changes
    (GTK answers asynchronously, and may still be working through the typed keys)."""
    await use(mcp, "clipboard_set", text="-")
    for _ in range(6):
        await use(mcp, "key", key="ctrl+a")
        await use(mcp, "key", key="ctrl+c")
        with anyio.move_on_after(10):
            while (text := fenced(await use(mcp, "clipboard_get"))) == "-":
                await anyio.sleep(0.1)  # polling the clipboard, bounded
            return text
    raise AssertionError("the document was never copied")


async def focused_mousepad(mcp: Any) -> None:
    """Wait for Mousepad's window (the desktop's first app), then click into its text."""
    with anyio.fail_after(45):
        while True:
            result: types.CallToolResult = await mcp.client.call_tool(
                "computer_use",
                {"verb": "resize", "window": "Mousepad", "width": 900, "height": 600},
            )
            if not result.is_error:
                break
            assert "no window" in text_of(result), text_of(result)
            await anyio.sleep(1)  # polling for the window, bounded by fail_after
    await use(mcp, "click", x=400, y=300)


async def test_a_take_over_mid_type_stops_the_ai_and_the_persons_clipboard_is_theirs(
    gateway: CorralHome, docker_client: docker.DockerClient
) -> None:
    home = gateway
    async with connect(home, "stdio") as mcp:
        await use(mcp, "screenshot")
        rows = ((await mcp.client.call_tool("rig_list", {})).structured_content or {})["rigs"]
        (container,) = docker_client.containers.list(
            ignore_removed=True, filters={"label": [f"corral.session={rows[0]['rig_id']}"]}
        )
        await focused_mousepad(mcp)
        typed = await typed_until_taken(
            home,
            SEAT,
            lambda: mcp.client.call_tool("computer_use", {"verb": "type", "text": CHUNK}),
        )

        # (b) What the person copies (an OTP) is not the AI's to read.
        person_copies(container, OTP)
        read = await mcp.client.call_tool("computer_use", {"verb": "clipboard_get"})
        assert read.is_error and "A person has the desktop" in text_of(read), text_of(read)
        assert "493817" not in text_of(read)
        assert selection(container, "clipboard") == OTP  # it was there to read

        # (c) Hand back clears the clipboard and the primary selection.
        back = await anyio.to_thread.run_sync(corral, home, "sessions", "handback", SEAT)
        assert back.returncode == 0, back.stderr
        assert selection(container, "clipboard") == "" and selection(container, "primary") == ""
        assert fenced(await use(mcp, "clipboard_get")) == ""

        # (a) The document holds what the answers said was typed, and no more: the rest
        # of the interrupted type, and anything queued after it, never reached it.
        text = await document(mcp)
        assert set(text) == {"x"} and len(text) == typed, (len(text), typed)
        await mcp.client.call_tool("rig_close", {})
    assert not docker_client.containers.list(
        ignore_removed=True, all=True, filters={"label": [f"corral.session={rows[0]['rig_id']}"]}
    )


async def test_a_take_over_mid_type_on_a_kiosk_stops_what_the_page_receives(
    corral_home: CorralHome,
    counter_site: tuple[str, str, str],
) -> None:
    """The kiosk: the page counts what its field received (two bars it draws); after the
    take over it shows exactly what the answers said was typed."""
    home = corral_home
    write_agent(home, AGENT, allowed_domains=[SITE], confirm_words=[], max_actions=200)
    async with (
        running_gateway(home, kiosk_config(counter_site)),
        connect(home, "stdio") as mcp,
    ):
        assert not (await call(mcp, "computer_session_start")).is_error
        nav = await call(mcp, "computer_navigate", url=f"https://{SITE}/")
        assert not nav.is_error, text_of(nav)
        await call(mcp, "computer_click", x=250, y=120)
        typed = await typed_until_taken(
            home, AGENT, lambda: mcp.client.call_tool("computer_type", {"text": CHUNK})
        )

        def counted(_: Any, img: Any) -> bool:
            return bar(img, 305, BLUE) == typed % 1000 and bar(img, 325, RED) == typed // 1000

        try:
            await screen_until(mcp, counted, limit=30)
        except AssertionError:
            img = image_of(await call(mcp, "computer_screenshot"))
            seen = bar(img, 305, BLUE) + 1000 * bar(img, 325, RED)
            raise AssertionError(f"the page received {seen} characters, not {typed}") from None
        await call(mcp, "computer_session_stop")
