"""What every module of the agent shares: the error a caller sees, logging, a bound."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

DISPLAY = ":99"  # the X display the kiosk and the desktop rig draw on (xserver.py starts it)
PROBE_STEP_S = 1.5  # bound on each probe sub-step
# Each probe in all, and a target or focus read, well inside the gateway's deadlines for
# the op (orchestrator.surfaces: a screenshot's 5 s holds two probes, the grab and the PNG;
# a read's 3 s; tests/unit/test_kiosk_budgets.py checks they fit): a busy page gets a probe
# error (a black image) or an unknown target (held), never a missed deadline, which would
# end the session.
PROBE_BUDGET_S = 1.8
READ_BUDGET_S = 2.2
_budget = threading.local()  # the monotonic time the current op's probe must end by


def log(*parts: Any) -> None:
    with contextlib.suppress(Exception):
        print("[kiosk-agent]", *parts, file=sys.stderr, flush=True)


class OpError(Exception):
    """An error reported to the caller as {"ok": false, "error": message}."""


@contextlib.contextmanager
def within(seconds: float) -> Iterator[None]:
    """Bound everything `step_s` times on this thread to `seconds` in all: a probe's
    sub-steps are bounded one by one, and a busy page could make their sum outlast the
    gateway's deadline for the op (which would end the session)."""
    before = getattr(_budget, "end", None)
    _budget.end = time.monotonic() + seconds
    try:
        yield
    finally:
        _budget.end = before


def step_s() -> float:
    """The bound for the next probe sub-step: PROBE_STEP_S, or less when the current
    `within` budget has less left; OpError when it has none (the caller reports the
    step failed, and a failed probe masks the whole image)."""
    end: float | None = getattr(_budget, "end", None)
    if end is None:
        return PROBE_STEP_S
    left = end - time.monotonic()
    if left <= 0.01:
        raise OpError("the probe ran out of time (the page did not answer)")
    return min(PROBE_STEP_S, left)
