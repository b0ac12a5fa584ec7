"""The browser rig's CDP bridge telling its own calls and sessions from Playwright's
(orchestrator/surfaces/browser/cdp.py). The rig's pipe here is a pair of memory streams
standing for the attach stream; the client is a real WebSocket on the bridge's real
unix socket. The same path against a real rig: tests/integration/test_browser_probe.py
(every probe goes through these calls) and tests/faults/test_browser_gone.py (a hung
relay or browser ends the calls in flight)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from websockets.asyncio.client import ClientConnection, unix_connect

from orchestrator.errors import CdpCallFailed
from orchestrator.surfaces.browser.cdp import OWN_BASE, PING_BASE, CdpBridge, answer_id

pytestmark = [pytest.mark.anyio]


class Pipe:
    """The rig's side: what the bridge writes, and what the test makes the rig say."""

    def __init__(self) -> None:
        self.to_rig: tuple[MemoryObjectSendStream[bytes], MemoryObjectReceiveStream[bytes]]
        self.to_rig = anyio.create_memory_object_stream[bytes](100)
        self.from_rig = anyio.create_memory_object_stream[bytes | None](100)
        self.id = "fake"

    async def send(self, data: bytes) -> None:
        await self.to_rig[0].send(data)

    def close(self) -> None:
        for stream in (*self.to_rig, *self.from_rig):
            stream.close()

    async def receive(self) -> bytes | None:
        return await self.from_rig[1].receive()

    async def say(self, message: dict[str, Any]) -> None:
        """A CDP message from the rig, written as Chromium writes it (id first, a flat
        session's sessionId last)."""
        await self.from_rig[0].send(json.dumps(message, separators=(",", ":")).encode() + b"\0")

    async def sent(self) -> dict[str, Any]:
        data = await self.to_rig[1].receive()
        assert data.endswith(b"\0")
        message: dict[str, Any] = json.loads(data[:-1])
        return message


@pytest.fixture
async def wired() -> AsyncIterator[tuple[CdpBridge, Pipe, ClientConnection]]:
    pipe = Pipe()
    bridge = CdpBridge(pipe)  # type: ignore[arg-type]  # the memory pipe, as above
    await bridge.start()
    try:
        async with unix_connect(str(bridge.socket_path), uri="ws://corral/") as ws:
            with anyio.fail_after(10):
                while not bridge._relaying:  # the bridge is reading once it serves us
                    await anyio.wait_all_tasks_blocked()
            yield bridge, pipe, ws
    finally:
        await bridge.close()
        pipe.close()


async def _answered(bridge: CdpBridge, pipe: Pipe, *args: Any, **kwargs: Any) -> Any:
    """`bridge.call(*args)` while the rig answers it with the result {"ok": n}."""
    got: list[Any] = []
    async with anyio.create_task_group() as tg:

        async def calling() -> None:
            got.append(await bridge.call(*args, **kwargs))

        tg.start_soon(calling)
        asked = await pipe.sent()
        await pipe.say({"id": asked["id"], "result": {"ok": asked["id"]}})
    return got[0], asked


async def test_an_own_answer_goes_to_its_call_and_playwrights_answers_to_playwright(
    wired: tuple[CdpBridge, Pipe, ClientConnection],
) -> None:
    bridge, pipe, ws = wired
    await ws.send(json.dumps({"id": 7, "method": "Page.enable"}))
    assert (await pipe.sent())["id"] == 7  # Playwright's call on the pipe, unchanged
    result, asked = await _answered(bridge, pipe, "DOM.enable", session="S1")
    assert asked == {"id": OWN_BASE + 1, "method": "DOM.enable", "params": {}, "sessionId": "S1"}
    assert result == {"ok": OWN_BASE + 1}
    await pipe.say({"id": PING_BASE + 1, "result": {}})  # the heartbeat's: nobody's
    await pipe.say({"id": 7, "result": {}, "sessionId": "PW"})
    assert json.loads(await ws.recv()) == {"id": 7, "result": {}, "sessionId": "PW"}


async def test_events_of_an_own_session_go_to_its_listener_and_no_other_event_does(
    wired: tuple[CdpBridge, Pipe, ClientConnection],
) -> None:
    bridge, pipe, ws = wired
    heard: list[tuple[str, dict[str, Any]]] = []
    bridge.listen("S1", lambda method, params: heard.append((method, params)))
    bridge.listen("S2", lambda method, params: 1 / 0)  # a listener that fails
    await pipe.say({"method": "DOM.documentUpdated", "params": {}, "sessionId": "S2"})
    await pipe.say({"method": "DOM.attributeModified", "params": {"n": 1}, "sessionId": "S1"})
    # A page's own text naming our session is inside params, never the message's end.
    tricky = {"method": "Runtime.consoleAPICalled", "params": {"x": '"sessionId":"S1"}'}}
    await pipe.say({**tricky, "sessionId": "PW"})
    await pipe.say({"method": "Target.targetInfoChanged", "params": {"u": '"sessionId":"S1"}'}})
    assert json.loads(await ws.recv()) == {**tricky, "sessionId": "PW"}
    assert json.loads(await ws.recv())["method"] == "Target.targetInfoChanged"
    assert heard == [("DOM.attributeModified", {"n": 1})]


async def test_an_error_answer_fails_the_call_with_chromiums_words(
    wired: tuple[CdpBridge, Pipe, ClientConnection],
) -> None:
    bridge, pipe, _ = wired
    error = {"code": -32000, "message": "DOM agent hasn't been enabled"}

    async def answer(asked: dict[str, Any]) -> None:
        await pipe.say({"id": asked["id"], "error": error})

    failed = await _failed_when(bridge, pipe, "DOM.disable", answer)
    assert failed == ["DOM.disable: DOM agent hasn't been enabled"]


async def _failed_when(
    bridge: CdpBridge, pipe: Pipe, method: str, then: Callable[[dict[str, Any]], Awaitable[None]]
) -> list[str]:
    """Why `bridge.call(method)` failed once the rig, having read it, did `then`."""
    failed: list[str] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_failing, bridge, failed, method)
        await then(await pipe.sent())
    return failed


async def _failing(
    bridge: CdpBridge, failed: list[str], method: str, session: str | None = None
) -> None:
    """`bridge.call(method)`, which must fail: why, in `failed`."""
    try:
        await bridge.call(method, session=session)
    except CdpCallFailed as exc:
        failed.append(str(exc))
    else:
        failed.append("answered")


async def test_a_session_that_ends_fails_its_calls_in_flight_and_no_others(
    wired: tuple[CdpBridge, Pipe, ClientConnection],
) -> None:
    bridge, pipe, _ = wired
    failed: list[str] = []

    async def calling(session: str) -> None:
        try:
            await bridge.call("Runtime.evaluate", session=session)
        except CdpCallFailed as exc:
            failed.append(f"{session}: {exc}")

    async with anyio.create_task_group() as tg:
        tg.start_soon(calling, "S1")
        tg.start_soon(calling, "S2")
        asked = [await pipe.sent(), await pipe.sent()]
        bridge.ended("S1", "the page is gone")
        await anyio.wait_all_tasks_blocked()
        assert failed == ["S1: Runtime.evaluate: the page is gone"]
        (s2,) = [a for a in asked if a["sessionId"] == "S2"]
        await pipe.say({"id": s2["id"], "result": {}, "sessionId": "S2"})
    assert len(failed) == 1


async def test_when_the_rigs_pipe_closes_calls_in_flight_fail_and_later_ones_at_once(
    wired: tuple[CdpBridge, Pipe, ClientConnection],
) -> None:
    bridge, pipe, _ = wired

    async def end(_: dict[str, Any]) -> None:
        await pipe.from_rig[0].send(None)  # the end of the rig's stdout

    failed = await _failed_when(bridge, pipe, "Page.captureScreenshot", end)
    assert failed == ["Page.captureScreenshot: the rig's CDP pipe closed"]
    with anyio.fail_after(5), pytest.raises(CdpCallFailed, match="pipe closed"):
        await bridge.call("Runtime.evaluate")


async def test_a_cancelled_calls_late_answer_is_dropped_not_passed_on(
    wired: tuple[CdpBridge, Pipe, ClientConnection],
) -> None:
    bridge, pipe, ws = wired
    async with anyio.create_task_group() as tg:
        tg.start_soon(bridge.call, "Runtime.evaluate")
        asked = await pipe.sent()
        tg.cancel_scope.cancel()  # the caller gives up (its deadline) before the answer
    assert not bridge._waiting  # nothing kept of the cancelled call
    await pipe.say({"id": asked["id"], "result": {"late": True}})
    await pipe.say({"id": 3, "result": {}})
    assert json.loads(await ws.recv()) == {"id": 3, "result": {}}  # the late one never came


def test_an_answers_id_is_read_from_its_start_and_an_event_has_none() -> None:
    assert answer_id(b'{"id":12,"result":{}}') == 12
    assert answer_id(b'{"id":2000000001,"result":{}}') == PING_BASE + 1
    assert answer_id(b'{"method":"Page.loadEventFired","params":{}}') is None
    assert answer_id(b'{"id":x,"result":{}}') is None
    assert answer_id(b'{"id":5}') is None  # no answer is so short; not taken for one
