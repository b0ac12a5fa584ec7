"""Long waits that clients survive (issue 25 item 2), through the official SDK's client:

- A tap an approval rule holds waits 150 s for an operator, over stdio (agent alice,
  Android) and Streamable HTTP (agent bob, iOS) at once; the client hears progress at
  most 5 s apart the whole time, then the operator approves and the tap is done.
- A held call the client cancels (`notifications/cancelled`) ends at once: its approval
  is withdrawn, audited, and no longer pending; the device got no input.

The phones are the protocol-level simulators (tests/simulators: a fake adbd, a fake
WebDriverAgent), no real device. The test waits on events: the progress notifications
themselves say how long the call has waited (their `progress` value is seconds since the
call began), and the approval is decided once one says 150 s."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
import pytest

from orchestrator.audit import AuditLog
from orchestrator.home import CorralHome
from orchestrator.people.approvals import WITHDRAWN
from tests.e2e.conftest import connect, wait_until
from tests.e2e.gateways import running_gateway
from tests.e2e.test_computer_use import text_of
from tests.e2e.test_operators import corral, pending
from tests.e2e.test_rules_everywhere import phones as phones
from tests.e2e.test_rules_everywhere import write
from tests.images import ENV
from tests.simulators.fake_adbd import FakeAdbd
from tests.simulators.fake_android import DELETE_BOX
from tests.simulators.fake_wda import DELETE, FakeWda

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

WAIT = 150.0  # seconds held before the operator decides
APPROVAL_TIMEOUT = 240  # [approvals] timeout_seconds: longer than the wait
MAX_GAP = 5.0  # the promise: progress at least this often


@pytest.fixture
async def home(tmp_path: Any, phones: tuple[FakeAdbd, FakeWda]) -> AsyncIterator[CorralHome]:
    adbd, wda = phones
    home = CorralHome(root=tmp_path / "corral-home", env=ENV)
    home.ensure()
    write(home, "alice", mobile_use=True)
    write(home, "bob", ios_use=True)
    config = (
        f"[approvals]\ntimeout_seconds = {APPROVAL_TIMEOUT}\n\n"
        f'[rigs.android]\ndevices = ["127.0.0.1:{adbd.port}"]\ntimeout_seconds = 5\n\n'
        f'[rigs.ios]\nwda_url = "{wda.url}"\ntimeout_seconds = 5\n'
    )
    async with running_gateway(home, config):
        yield home


def android_tap() -> tuple[str, dict[str, Any]]:
    x1, y1, x2, y2 = DELETE_BOX
    return "mobile_use", {"verb": "tap", "x": (x1 + x2) // 2, "y": (y1 + y2) // 2}


def ios_tap() -> tuple[str, dict[str, Any]]:
    x, y, w, h = DELETE
    return "ios_use", {"verb": "tap", "x": x + w // 2, "y": y + h // 2}


async def held_for(
    home: CorralHome, agent: str, transport: str, tap: tuple[str, dict[str, Any]]
) -> tuple[types.CallToolResult, list[float], float]:
    """The held tap's result once approved after WAIT seconds of progress; when each
    progress notification was sent (its `progress`: the front's seconds since the call
    began, stamped as it sends: the promise is the server's, whatever the client's own
    scheduling on a loaded machine); the last progress value heard."""
    heard: list[float] = []
    waited = anyio.Event()
    last = [0.0]

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append(progress)
        last[0] = progress
        if progress >= WAIT:
            waited.set()

    async with connect(home, transport, agent=agent) as mcp:
        results: list[types.CallToolResult] = []

        async def call() -> None:
            name, arguments = tap
            results.append(
                await mcp.client.call_tool(name, arguments, progress_callback=on_progress)
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            with anyio.fail_after(WAIT + 60):  # a bound; the progress is what is waited on
                await waited.wait()
            (approval,) = [a for a in pending(home) if a["agent"] == agent]
            decided = corral(home, "approvals", "approve", approval["id"])
            assert decided.returncode == 0, decided.stderr
        return results[0], heard, last[0]


async def test_a_150_s_approval_wait_hears_progress_throughout_on_stdio_and_http(
    home: CorralHome, phones: tuple[FakeAdbd, FakeWda]
) -> None:
    adbd, wda = phones
    outcomes: dict[str, tuple[types.CallToolResult, list[float], float]] = {}

    async def one(agent: str, transport: str, tap: tuple[str, dict[str, Any]]) -> None:
        outcomes[transport] = await held_for(home, agent, transport, tap)

    async with anyio.create_task_group() as tg:
        tg.start_soon(one, "alice", "stdio", android_tap())
        tg.start_soon(one, "bob", "http", ios_tap())

    for transport, (result, heard, last) in outcomes.items():
        assert not result.is_error, (transport, text_of(result))
        assert last >= WAIT, transport
        gaps = [b - a for a, b in itertools.pairwise(heard)]
        assert len(heard) >= WAIT / MAX_GAP and max(gaps) <= MAX_GAP, (transport, max(gaps))
    x1, y1, x2, y2 = DELETE_BOX
    assert f"input tap {(x1 + x2) // 2} {(y1 + y2) // 2}" in adbd.device.events
    assert len(wda.taps) == 1


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_held_call_the_client_cancels_withdraws_its_approval(
    home: CorralHome, phones: tuple[FakeAdbd, FakeWda], transport: str
) -> None:
    adbd, _ = phones
    async with connect(home, transport) as mcp:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                name, arguments = android_tap()
                tg.start_soon(mcp.client.call_tool, name, arguments)
                await wait_until(lambda: pending(home), limit=30)
                scope.cancel()  # the SDK sends notifications/cancelled for the request

        await wait_until(lambda: pending(home) == [], limit=30)

        def withdrawn() -> list[dict[str, Any]]:
            return [
                e
                for e in AuditLog(home.audit_file).read()
                if e["event"] == "approval_decided" and e["details"].get("reason") == WITHDRAWN
            ]

        (decided,) = await wait_until(withdrawn, limit=30)
        assert decided["details"]["operator"] is None
        assert not any(e.startswith("input tap") for e in adbd.device.events)
        # the conversation goes on: the server still answers
        listed = await mcp.client.call_tool("rig_list", {})
        assert not listed.is_error, text_of(listed)


SLOW = "import time\nprint('holding the slot', flush=True)\ntime.sleep(12)\n"


async def test_a_script_waiting_for_its_slot_hears_progress_while_nothing_else_speaks(
    home: CorralHome,
) -> None:
    """The heartbeat itself: a script queued behind another (one slot) has nothing of its
    own to report until the slot frees, and still hears progress at most 5 s apart, saying
    what it waits for."""
    home.config_file.write_text(
        home.config_file.read_text() + "\n[container.sandbox]\nmax_concurrent = 1\nwarm = 0\n"
    )
    heard: list[tuple[float, str]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append((anyio.current_time(), message or ""))

    async with connect(home, "stdio") as mcp:
        first_running = anyio.Event()

        async def first() -> None:
            async def started(progress: float, total: float | None, message: str | None) -> None:
                if (message or "").startswith("running"):
                    first_running.set()

            await mcp.client.call_tool("execute_program", {"code": SLOW}, progress_callback=started)

        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            await first_running.wait()
            second = await mcp.client.call_tool(
                "execute_program", {"code": "print('second')"}, progress_callback=on_progress
            )
    assert not second.is_error, text_of(second)
    waiting = [m for _, m in heard if m.startswith("waiting for a script slot")]
    assert any("still at it" in m for m in waiting), heard
    times = [t for t, _ in heard]
    assert max(b - a for a, b in itertools.pairwise(times)) <= MAX_GAP, heard
