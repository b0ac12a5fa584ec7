"""What every module of the agent shares: the error a caller sees, logging, a bound."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

PROBE_STEP_S = 1.5  # bound on each probe sub-step


def log(*parts: Any) -> None:
    with contextlib.suppress(Exception):
        print("[kiosk-agent]", *parts, file=sys.stderr, flush=True)


class OpError(Exception):
    """An error reported to the caller as {"ok": false, "error": message}."""
