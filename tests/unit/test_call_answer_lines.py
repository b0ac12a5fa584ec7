"""The gateway's answer writer (orchestrator.gateway.call_stream.LineWriter): lines written
straight to the ASGI answer as the handler makes them, from any of its tasks.

The ASGI `send` here keeps what it is given and yields to the loop at each message, as a
server does when it waits for its socket to drain: the writer is what is tested. (Through
the real gateway app, uvicorn-free, with the front's real reader:
tests/unit/test_call_events.py.)"""

from __future__ import annotations

import json
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from orchestrator.gateway.call_stream import LineWriter, StreamedEvents

pytestmark = pytest.mark.anyio


class Sent:
    """An ASGI send that keeps each message and yields to the loop at each, the head's
    longest (a writer that let another task's line overtake it would show here)."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def __call__(self, message: Any) -> None:
        for _ in range(3 if message["type"] == "http.response.start" else 1):
            await anyio.lowlevel.checkpoint()
        self.messages.append(dict(message))
        await anyio.lowlevel.checkpoint()

    def headers(self) -> dict[bytes, bytes]:
        assert [m["type"] for m in self.messages].count("http.response.start") == 1
        assert self.messages[0]["type"] == "http.response.start"
        return dict(self.messages[0]["headers"])

    def lines(self) -> list[dict[str, Any]]:
        body = b"".join(m.get("body", b"") for m in self.messages[1:])
        assert body.endswith(b"\n")
        return [json.loads(line) for line in body.splitlines()]


async def test_a_result_alone_is_one_body_of_known_length() -> None:
    sent = Sent()
    await LineWriter(sent).line(b'{"kind":"result"}\n', last=True)
    assert sent.headers()[b"content-length"] == b"18"
    assert [m["type"] for m in sent.messages] == ["http.response.start", "http.response.body"]
    assert sent.messages[-1]["more_body"] is False


async def test_events_from_two_tasks_at_once_come_out_as_whole_lines_then_the_last() -> None:
    sent = Sent()
    writer = LineWriter(sent)
    events = StreamedEvents(writer)

    async def report(who: str) -> None:
        for n in range(40):
            await events.progress(who, f"{who} step {n}")

    async with anyio.create_task_group() as tg:
        tg.start_soon(report, "a")
        tg.start_soon(report, "b")
    await writer.line(b'{"kind":"result"}\n', last=True)
    await events.progress("late", "after the last line")  # dropped: the answer is whole

    assert b"content-length" not in sent.headers()  # chunked: events came first
    lines = sent.lines()
    assert len(lines) == 81 and lines[-1] == {"kind": "result"}
    for who in "ab":
        mine = [line["message"] for line in lines[:-1] if line["phase"] == who]
        assert mine == [f"{who} step {n}" for n in range(40)]
    assert sent.messages[-1]["more_body"] is False
    assert all(m["more_body"] for m in sent.messages[1:-1])
