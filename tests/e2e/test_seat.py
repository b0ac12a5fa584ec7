"""The seat at the moment of input (issue 22 item 4), attacked on a real desktop rig: a
real MCP client -> corral mcp -> corral gateway -> the desktop rig container, and a
person's `corral sessions takeover` / `handback` (the CLI, with an operator's token).

What happened is judged on the desktop itself, not by corral's answers: the person reads
Mousepad's document (their own ctrl+a, ctrl+c through XTest, then `xclip -o`, run in the
container as a person at the screen would), and both X selections are read there too."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from typing import Any

import anyio
import docker
import mcp_types as types
import pytest

from orchestrator.config import render_new_agent
from orchestrator.home import CorralHome
from tests.e2e.conftest import AGENT, connect
from tests.e2e.gateways import running_gateway
from tests.e2e.test_computer_use import text_of
from tests.e2e.test_desktop_rig import fenced, use
from tests.e2e.test_operators import corral

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SEAT = f"{AGENT}.desktop"
CHUNK = "x" * 1000  # a long type: 32 chunks, the seat checked before each
OTP = "OTP 493817"


@pytest.fixture
async def gateway(corral_home: CorralHome) -> AsyncIterator[CorralHome]:
    path = corral_home.agent_file(AGENT)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_new_agent(AGENT).replace("desktop_use = false", "desktop_use = true"))
    async with running_gateway(corral_home):
        yield corral_home


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
    for _ in range(12):
        await use(mcp, "key", key="ctrl+a")
        await use(mcp, "key", key="ctrl+c")
        with anyio.move_on_after(5):
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
            filters={"label": [f"corral.session={rows[0]['rig_id']}"]}
        )
        await focused_mousepad(mcp)
        typed_ok = 0
        refusal: list[str] = []
        first_typed = anyio.Event()

        async def ai_types_on() -> None:
            """The attacker: types without pause until refused."""
            nonlocal typed_ok
            for _ in range(30):
                result = await mcp.client.call_tool("computer_use", {"verb": "type", "text": CHUNK})
                if result.is_error:
                    refusal.append(text_of(result))
                    return
                typed_ok += len(CHUNK)
                first_typed.set()
            raise AssertionError("the take over never stopped the AI")

        async with anyio.create_task_group() as tg:
            tg.start_soon(ai_types_on)
            with anyio.fail_after(60):
                await first_typed.wait()
            took = await anyio.to_thread.run_sync(
                lambda: corral(home, "sessions", "takeover", SEAT)
            )
            assert took.returncode == 0, took.stderr
        (said,) = refusal
        if "characters were typed" in said:  # cut mid-type: the answer says how far
            landed = int(said.split("after ")[1].split(" of")[0])
            assert 0 < landed < len(CHUNK), said
        else:  # taken between two calls
            assert "A person has the desktop" in said, said
            landed = 0

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
        typed = await document(mcp)
        assert set(typed) == {"x"} and len(typed) == typed_ok + landed, (len(typed), said)
        await mcp.client.call_tool("rig_close", {})
    assert not docker_client.containers.list(
        all=True, filters={"label": [f"corral.session={rows[0]['rig_id']}"]}
    )
