"""When the AI's calls use a surface, for what else takes its screen.

The pipeline holds `AiUse.acting` around each call's target reads and its locked input
(orchestrator.surfaces.pipeline). A capture of the gateway's own (a recorder's frame, the
console timeline's thumbnail) takes the surface's channel for tens of milliseconds, and a
call's next step arriving meanwhile waits behind it: so captures wait until no call uses
the surface and none ended within QUIET_SECONDS (measured, docs/benchmarks.md: a capture
begun between a click's target read and its input held the click for the capture's
length, hundreds of milliseconds on a busy machine).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import anyio

QUIET_SECONDS = 0.25  # a capture waits until the AI has not acted for this long


class AiUse:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.acted = 0.0  # when the AI's last call ended (clock)
        self._calls = 0  # the AI's calls using the surface now
        self._idle = anyio.Event()  # set while no call uses it
        self._idle.set()

    @contextmanager
    def acting(self) -> Iterator[None]:
        """An AI's call is using the surface: no capture begins until it is done, and
        then not before QUIET_SECONDS after it."""
        self._calls += 1
        if self._calls == 1:
            self._idle = anyio.Event()
        try:
            yield
        finally:
            self._calls -= 1
            self.acted = self.clock()
            if self._calls == 0:
                self._idle.set()

    @property
    def busy(self) -> bool:
        """A call uses the surface now."""
        return self._calls > 0

    async def idle(self) -> None:
        """Until no call uses the surface (at once when none does)."""
        await self._idle.wait()

    def quiet_in(self) -> float:
        """Seconds until a capture may begin, when no call uses the surface now (0 or
        less: it may now)."""
        return self.acted + QUIET_SECONDS - self.clock()
