"""The people's clock: wall-clock seconds that never step.

Approvals expire and console logins end after a number of seconds, and show when they
were made and when they end. `time.time` would let a step of the machine's clock (an NTP
correction, an operator's `date -s`) stretch or cut those: an hour back and a pending
approval would wait an hour more. A `SteadyWall` reads the wall clock once, then moves
only with the monotonic clock, so a step moves neither an expiry nor a timeout (the
shown times are off by the step until the gateway restarts, which is only display).
The signed loopback channel compares two processes' wall clocks and keeps `time.time`
(orchestrator.gateway.signing: a request outside its 30 s window is refused).
"""

from __future__ import annotations

import time
from collections.abc import Callable


class SteadyWall:
    """Seconds since the epoch as of the first reading, then monotonic."""

    def __init__(
        self,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._monotonic = monotonic
        self._offset = wall() - monotonic()

    def __call__(self) -> float:
        return self._offset + self._monotonic()


steady_wall = SteadyWall()
