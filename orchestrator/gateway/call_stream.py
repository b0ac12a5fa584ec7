"""The gateway's side of call events: a `CallEvents` that writes NDJSON lines, and the
streaming answer that carries them (issue 16; orchestrator.gateway.wire describes the lines).

    front  POST /api/internal/computer-use  {"agent", "tool", "arguments", "stream": true}
           (signed exactly like every other internal request)
    gateway 200 application/x-ndjson
           {"kind":"progress","phase":"container","message":"starting the kiosk container"}
           {"kind":"log","level":"info","event":"session_ready","details":{...}}
           {"kind":"result","answer":{...ComputerUseAnswer...}}        <- always last

The handler runs while the lines are sent; a front that hangs up (its caller cancelled)
cancels the handler, whose own cleanup then removes what it started. A handler that
fails ends the stream with one `error` line instead of `result`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from orchestrator.gateway.wire import (
    EVENTS_MEDIA_TYPE,
    ComputerUseAnswer,
    ErrorLine,
    LogLine,
    ProgressLine,
    ResultLine,
)
from orchestrator.surfaces.answers import Answer
from sandboxes.events import PROGRESS_OUTPUT_BYTES, CallEvents, LogLevel

logger = logging.getLogger("corral.gateway")

MAX_MESSAGE_CHARS = 500
MAX_PHASE_CHARS = 40
BUFFERED_LINES = 64  # a slow reader holds the handler's next event, never memory

Line = ProgressLine | LogLine | ResultLine | ErrorLine
Piece = tuple[bool, bytes]  # (whether it is the last line, the line)


def encode(line: Line) -> bytes:
    return line.model_dump_json(by_alias=True).encode() + b"\n"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class StreamedEvents:
    """CallEvents that become NDJSON lines on the answer. Nothing here raises: a line the
    reader can no longer take (it hung up) is dropped."""

    def __init__(self, send: MemoryObjectSendStream[Piece]) -> None:
        self._send = send

    async def progress(
        self, phase: str, message: str, *, remaining: float | None = None, output: str = ""
    ) -> None:
        await self._emit(
            ProgressLine(
                kind="progress",
                phase=_cut(phase, MAX_PHASE_CHARS),
                message=_cut(message, MAX_MESSAGE_CHARS),
                remaining=None if remaining is None else max(0.0, remaining),
                output=output[-PROGRESS_OUTPUT_BYTES:],
            )
        )

    async def log(
        self, level: LogLevel, event: str, details: Mapping[str, Any] | None = None
    ) -> None:
        await self._emit(LogLine(kind="log", level=level, event=event, details=dict(details or {})))

    async def _emit(self, line: Line) -> None:
        try:
            await self._send.send((False, encode(line)))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            logger.debug("call event dropped: the reader is gone")


class CallEventsResponse(Response):
    """An answer that runs `run(events)` and streams its events, then its result. (A
    Response for Starlette's routing; it sends its own headers.)

    The headers wait for the first line: a call whose result comes before any event (a
    click, a screenshot) is answered as one body of known length, in one write after the
    headers' (no chunked framing, no closing chunk for the front to wait for; issue 23
    item 9); a call that reports events first streams them as they come, chunked."""

    def __init__(
        self,
        run: Callable[[CallEvents], Awaitable[Answer]],
        on_failure: Callable[[Exception], str],
    ) -> None:
        super().__init__(status_code=200, media_type=EVENTS_MEDIA_TYPE)
        self._run = run
        self._on_failure = on_failure

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        writer, reader = anyio.create_memory_object_stream[Piece](BUFFERED_LINES)

        async def produce() -> None:
            async with writer:
                last: Line
                try:
                    done = await self._run(StreamedEvents(writer))
                    last = ResultLine(kind="result", answer=ComputerUseAnswer.of(done))
                except Exception as exc:
                    last = ErrorLine(kind="error", error=self._on_failure(exc))
                await writer.send((True, encode(last)))

        async def hang_up_cancels(scope: anyio.CancelScope) -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(hang_up_cancels, tg.cancel_scope)
            tg.start_soon(produce)
            async with reader:
                await _answer(reader, send)
            tg.cancel_scope.cancel()


async def _answer(lines: MemoryObjectReceiveStream[Piece], send: Send) -> None:
    """The lines as the HTTP answer: one body when the first is the last, else chunked."""
    streaming = False
    async for last, data in lines:
        if not streaming and last:
            await send(_start(len(data)))
            await send({"type": "http.response.body", "body": data, "more_body": False})
            return
        if not streaming:
            await send(_start(None))
            streaming = True
        await send({"type": "http.response.body", "body": data, "more_body": True})
        if last:
            break
    if streaming:
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _start(length: int | None) -> Message:
    headers = [(b"content-type", EVENTS_MEDIA_TYPE.encode()), (b"cache-control", b"no-store")]
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    return {"type": "http.response.start", "status": 200, "headers": headers}


__all__ = ["CallEventsResponse", "StreamedEvents", "encode"]
