"""How much heavy work one gateway gives the engine's host at once (issue 23 item 7).

Two kinds of work load a host far past its cores when many agents act at the same
instant, and each has a deadline inside it that a starved CPU misses although nothing is
wrong: a surface's boot (its container, egress proxy, display and Chromium; the kiosk's
own Chromium start waits 30 s) and a screen capture (Chromium paints and encodes a PNG,
the gateway decodes and masks it; a kiosk that does not answer a screenshot within 5 s
is taken for hung and its session ends). Sixty kiosks started at once on two cores, then
all taking a screenshot at once, missed both (measured: docs/benchmarks.md, scale).

So each kind takes a slot first, `PER_CORE` per core of this host: the rest wait their
turn (in order of arrival), and a deadline counts from the slot, so it measures the
work, not the queue. A caller with an agent waiting says so in its progress. The slots
are the running event loop's (one gateway, one set; a test's loop its own).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio
from anyio.lowlevel import RunVar

from sandboxes.events import CallEvents

PER_CORE = 2  # boots or captures at once, per core of this host
FEWEST = 2  # however few the cores


def slots_for(cores: int) -> int:
    """How many of one kind run at once on a host of `cores` cores (pure)."""
    return max(FEWEST, PER_CORE * max(1, cores))


def host_cores() -> int:
    """The cores this process may run on (its affinity, as the scripts' slots count them)."""
    return len(os.sched_getaffinity(0))


@dataclass(frozen=True, slots=True)
class Admission:
    boots: anyio.Semaphore
    captures: anyio.Semaphore


_current: RunVar[Admission] = RunVar("corral_admission")


def admission() -> Admission:
    """The running loop's slots (made at first use)."""
    try:
        return _current.get()
    except LookupError:
        size = slots_for(host_cores())
        made = Admission(_slots(size), _slots(size))
        _current.set(made)
        return made


def _slots(size: int) -> anyio.Semaphore:
    return anyio.Semaphore(size, max_value=size)  # FIFO: served in order of arrival


@contextlib.asynccontextmanager
async def boot_slot(events: CallEvents | None = None, what: str = "surface") -> AsyncIterator[None]:
    """Hold one boot slot for the block; `events` (an agent's call) is told when it waits."""
    slots = admission().boots
    if slots.value == 0 and events is not None:
        waiting = slots.statistics().tasks_waiting
        await events.progress(
            "queue",
            f"waiting to start the {what}: {slots.max_value} starts are under way on this "
            f"host and {waiting} more wait before this one",
        )
    async with slots:
        yield


@contextlib.asynccontextmanager
async def capture_slot() -> AsyncIterator[None]:
    """Hold one capture slot for the block (a screenshot's capture and its answer)."""
    async with admission().captures:
        yield


__all__ = ["Admission", "admission", "boot_slot", "capture_slot", "host_cores", "slots_for"]
