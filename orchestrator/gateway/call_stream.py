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

Line = ProgressLine | LogLine | ResultLine | ErrorLine


def encode(line: Line) -> bytes:
    return line.model_dump_json(by_alias=True).encode() + b"\n"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class StreamedEvents:
    """CallEvents that become NDJSON lines on the answer. Nothing here raises: a line the
    reader can no longer take (it hung up) is dropped."""

    def __init__(self, answer: LineWriter) -> None:
        self._answer = answer

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
            await self._answer.line(encode(line), last=False)
        except OSError:
            logger.debug("call event dropped: the reader is gone")


class LineWriter:
    """The lines as the HTTP answer, written as they come: one body of known length when
    the first line is the last (a click, a screenshot: no chunked framing, no closing
    chunk for the front to wait for; issue 23 item 9), else chunked, the last line with
    the closing chunk. Lines after the last are dropped. One writer at a time (a handler's
    tasks may report at once); a slow reader holds the writer (the server's flow control),
    never memory."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._lock = anyio.Lock(fast_acquire=True)
        self._streaming = False
        self.ended = False

    async def line(self, data: bytes, *, last: bool) -> None:
        async with self._lock:
            if self.ended:
                return
            self.ended = last
            if not self._streaming and last:
                await self._send(_start(len(data)))
                await self._send({"type": "http.response.body", "body": data, "more_body": False})
                return
            if not self._streaming:
                self._streaming = True
                await self._send(_start(None))
            await self._send({"type": "http.response.body", "body": data, "more_body": not last})


class CallEventsResponse(Response):
    """An answer that runs `run(events)` and writes its events as they come, then its
    result (a Response for Starlette's routing; it sends its own headers).

    The handler runs in the request's own task, writing straight to the answer; one task
    beside it waits for the front to hang up, which cancels the handler (whose cleanup then
    removes what it started). Once the answer is whole, the server says the connection is
    done (ASGI: `http.disconnect` to a receive after the response), and that task ends on
    its own: no cancellation, no task or stream more per call (issue 23 item 9)."""

    def __init__(
        self,
        run: Callable[[CallEvents], Awaitable[Answer]],
        on_failure: Callable[[Exception], str],
    ) -> None:
        super().__init__(status_code=200, media_type=EVENTS_MEDIA_TYPE)
        self._run = run
        self._on_failure = on_failure

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        answer = LineWriter(send)

        async def hang_up_cancels(handler: anyio.CancelScope) -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            if not answer.ended:
                handler.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(hang_up_cancels, tg.cancel_scope)
            last: Line
            try:
                done = await self._run(StreamedEvents(answer))
                last = ResultLine(kind="result", answer=ComputerUseAnswer.of(done))
            except Exception as exc:
                last = ErrorLine(kind="error", error=self._on_failure(exc))
            await answer.line(encode(last), last=True)


def _start(length: int | None) -> Message:
    headers = [(b"content-type", EVENTS_MEDIA_TYPE.encode()), (b"cache-control", b"no-store")]
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    return {"type": "http.response.start", "status": 200, "headers": headers}


__all__ = ["CallEventsResponse", "LineWriter", "StreamedEvents", "encode"]
