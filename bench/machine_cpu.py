"""The machine's CPU: how busy all its cores were between two reads of /proc/stat (Linux).

bench/soak.py reads it every second of its load phase: on a 2-core machine, whether the
slow clicks came while the cores had room or while they were full.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

PROC_STAT = Path("/proc/stat")
FULL = 0.95  # a second at least this busy counts as a full one


def jiffies(stat: Path = PROC_STAT) -> tuple[int, int] | None:
    """(busy, total) clock ticks of all cores since boot; None where there is no
    /proc/stat. Idle and I/O wait are not busy; steal (a neighbour's) is not busy either,
    but counts in the total: those ticks were not the machine's to use."""
    try:
        first = stat.read_text(encoding="ascii").split("\n", 1)[0].split()
    except OSError:
        return None
    if not first or first[0] != "cpu" or len(first) < 9:
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = (int(v) for v in first[1:9])
    busy = user + nice + system + irq + softirq
    return busy, busy + idle + iowait + steal


class BusyMeter:
    """The busy share of all cores since the previous `read` (the first: since made)."""

    def __init__(self, stat: Path = PROC_STAT) -> None:
        self.stat = stat
        self.last = jiffies(stat)

    def read(self) -> float | None:
        now = jiffies(self.stat)
        last, self.last = self.last, now
        if now is None or last is None or now[1] <= last[1]:
            return None
        return (now[0] - last[0]) / (now[1] - last[1])


def summary(shares: Sequence[float]) -> str:
    """'mean 81 %, 3 of 62 s at 95 % or more' ('?' with no sample)."""
    if not shares:
        return "?"
    mean = 100 * sum(shares) / len(shares)
    full = sum(1 for share in shares if share >= FULL)
    return f"mean {mean:.0f} %, {full} of {len(shares)} s at {100 * FULL:.0f} % or more"
