"""A channel request answered before its first ping is due runs no pinging task; one still
unanswered then starts it, and keeps what it had read of the answer (issue 23 item 9:
orchestrator.backends.channel reads the answer for FIRST_PING_S first, and only a slower
request gets the heartbeat task; the read it cancels must lose nothing).

The container here is a stand-in for an attached stream (the real agent's heartbeat is
tested in tests/integration/test_kiosk_channel_bounds.py): it hands out exactly the
bytes each test releases, and tells the test when a ping arrived. Every wait is on an
event: the ping's arrival proves the channel waited past FIRST_PING_S."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from orchestrator.backends.channel import KioskChannel
from sandboxes.ports import ExitInfo

pytestmark = pytest.mark.anyio


class Stream:
    """The agent's side: requests read, answer bytes given out as the test releases them."""

    def __init__(self) -> None:
        self.id = "stand-in"
        self.requests: list[dict[str, Any]] = []
        self.pinged = anyio.Event()
        self._out: list[bytes] = []
        self._more = anyio.Event()

    def give(self, data: bytes) -> None:
        self._out.append(data)
        self._more.set()

    async def send(self, data: bytes) -> None:
        for line in data.splitlines():
            request = json.loads(line)
            if request["op"] == "ping":  # not answered: an agent writes whole lines, and
                self.pinged.set()  # the test's answer is half written when it comes
            else:
                self.requests.append(request)

    async def receive(self) -> bytes | None:
        while not self._out:
            self._more = anyio.Event()
            await self._more.wait()
        return self._out.pop(0)

    async def wait(self) -> ExitInfo:
        return ExitInfo(exit_code=0, oom_killed=False)

    async def close(self) -> None:
        pass


def answer(ident: int, **fields: Any) -> bytes:
    return json.dumps({"id": ident, "ok": True, **fields}).encode() + b"\n"


async def answered_once(stream: Stream) -> KioskChannel:
    """A channel whose agent has answered a first request (its heartbeat is armed then)."""
    channel = KioskChannel(stream, heartbeat=True)
    stream.give(answer(1, ready=True))
    assert (await channel.request("start", 10.0))["ready"] is True
    return channel


async def test_an_answer_before_the_first_ping_is_due_sends_no_ping() -> None:
    stream = Stream()
    channel = await answered_once(stream)
    stream.give(answer(2, clicked=True))
    assert (await channel.request("click", 10.0))["clicked"] is True
    assert not stream.pinged.is_set()
    assert [r["op"] for r in stream.requests] == ["start", "click"]


async def test_an_answer_split_across_the_first_ping_comes_whole() -> None:
    stream = Stream()
    channel = await answered_once(stream)
    whole = answer(2, text="x" * 5000)
    got: dict[str, Any] = {}

    async def ask() -> None:
        got.update(await channel.request("read", 10.0))

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        stream.give(whole[:1234])  # half a line: read before the ping is due
        await stream.pinged.wait()  # the first read was cut short; the heartbeat runs
        stream.give(whole[1234:])
    assert got == json.loads(whole)
    assert channel.broken is None
