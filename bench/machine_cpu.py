"""The machine's CPU: how busy all its cores were between two reads of /proc/stat (Linux),
and how much of it the hypervisor gave to other guests (steal).

bench/soak.py reads it every second of its load phase: on a 2-core machine, whether the
slow clicks came while the cores had room or while they were full, ours or stolen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

PROC_STAT = Path("/proc/stat")
FULL = 0.95  # a second at least this busy counts as a full one


@dataclass(frozen=True, slots=True)
class Share:
    """A stretch of time's CPU, as shares of all cores' ticks."""

    busy: float  # this machine's processes and kernel
    stolen: float  # ticks the hypervisor ran another guest on these cores

    @property
    def used(self) -> float:
        return self.busy + self.stolen


def jiffies(stat: Path = PROC_STAT) -> tuple[int, int, int] | None:
    """(busy, steal, total) clock ticks of all cores since boot; None where there is no
    /proc/stat. Idle and I/O wait are neither busy nor stolen."""
    try:
        first = stat.read_text(encoding="ascii").split("\n", 1)[0].split()
    except OSError:
        return None
    if not first or first[0] != "cpu" or len(first) < 9:
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = (int(v) for v in first[1:9])
    busy = user + nice + system + irq + softirq
    return busy, steal, busy + steal + idle + iowait


class BusyMeter:
    """The busy share of all cores since the previous `read` (the first: since made)."""

    def __init__(self, stat: Path = PROC_STAT) -> None:
        self.stat = stat
        self.last = jiffies(stat)

    def read(self) -> Share | None:
        now = jiffies(self.stat)
        last, self.last = self.last, now
        if now is None or last is None or now[2] <= last[2]:
            return None
        total = now[2] - last[2]
        return Share((now[0] - last[0]) / total, (now[1] - last[1]) / total)


def summary(shares: Sequence[Share]) -> str:
    """'mean 72 % busy, 3 % stolen; 3 of 60 s full' ('?' with no sample): a second is
    full when busy and stolen together reach `FULL`."""
    if not shares:
        return "?"
    busy = 100 * sum(share.busy for share in shares) / len(shares)
    stolen = 100 * sum(share.stolen for share in shares) / len(shares)
    full = sum(1 for share in shares if share.used >= FULL)
    return (
        f"mean {busy:.0f} % busy, {stolen:.1f} % stolen; {full} of {len(shares)} s at "
        f"{100 * FULL:.0f} % or more"
    )
