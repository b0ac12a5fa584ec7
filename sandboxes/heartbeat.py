"""Long waits that clients survive (issue 25 item 2): a call that waits (an approval, a
script in its slot or running, a codrive run, a rig starting) tells its caller at least
every `HEARTBEAT_SECONDS` what it waits for and how long is left, whatever the waiting
code itself reports.

`heartbeat(events, what)` wraps a call's `CallEvents`: every progress the call sends goes
through as it is and re-arms the beat; when `every` seconds pass without one, the last one
is sent again, its time left brought up to date ("waiting for a script slot (still at it:
12 s so far, 48 s left)"). Before the first, it names `what` the call is. Several clients
cut a call that sends no progress for 60 s; the MCP front wraps every tool call in one.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio

from sandboxes.beside import tasks_beside
from sandboxes.events import NO_EVENTS, CallEvents, LogLevel

HEARTBEAT_SECONDS = 4.0  # under the promised 5 s, with room for a busy event loop


@dataclass(slots=True)
class _Said:
    phase: str
    message: str
    remaining: float | None
    at: float


class Heartbeat:
    """CallEvents that pass everything on and remember the last progress said."""

    def __init__(
        self, events: CallEvents, what: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.events = events
        self.clock = clock
        self.last = _Said("call", f"{what}: working", None, clock())
        self.started = self.last.at

    async def progress(
        self, phase: str, message: str, *, remaining: float | None = None, output: str = ""
    ) -> None:
        self.last = _Said(phase, message, remaining, self.clock())
        await self.events.progress(phase, message, remaining=remaining, output=output)

    async def log(
        self, level: LogLevel, event: str, details: Mapping[str, Any] | None = None
    ) -> None:
        await self.events.log(level, event, details)

    def due(self, every: float) -> float:
        """Seconds until the beat is due (0: now)."""
        return max(0.0, self.last.at + every - self.clock())

    async def beat(self) -> None:
        """Say the last progress again, its time left as it is now."""
        said, now = self.last, self.clock()
        left = None if said.remaining is None else max(0.0, said.remaining - (now - said.at))
        took = f"{int(now - self.started)} s so far" + (
            "" if left is None else f", {int(left)} s left"
        )
        await self.events.progress(
            said.phase, f"{said.message} (still at it: {took})", remaining=left
        )
        self.last = _Said(said.phase, said.message, left, now)


@asynccontextmanager
async def heartbeat(
    events: CallEvents, what: str, every: float = HEARTBEAT_SECONDS
) -> AsyncIterator[CallEvents]:
    """`events` with a heartbeat for as long as the block runs (none for NO_EVENTS)."""
    if events is NO_EVENTS:
        yield events
        return
    beating = Heartbeat(events, what)
    ended = anyio.Event()

    async def run() -> None:
        while not ended.is_set():
            with anyio.move_on_after(beating.due(every)):  # production pacing, not a test wait
                await ended.wait()
            if not ended.is_set() and beating.due(every) == 0.0:
                await beating.beat()

    async with tasks_beside(ended) as tasks:
        tasks.start_soon(run)
        yield beating
