"""What grew in a gateway's memory between two moments (issue 23 item 6), for
bench/soak.py --trace-memory: the gateway runs with CORRAL_TRACEMALLOC (see
orchestrator/gateway/memory.py), each `take` sends it SIGUSR2 and waits for the snapshot
it writes, and `grown` names the places that hold what grew between two of them."""

from __future__ import annotations

import os
import pickle
import signal
import time
import tracemalloc
from pathlib import Path

WAIT_S = 120.0  # a snapshot of a large heap takes a while to write


def take(pid: int, folder: Path, index: int) -> tracemalloc.Snapshot:
    """Snapshot `index` (1, 2, ...) of the gateway `pid`, written into `folder`."""
    os.kill(pid, signal.SIGUSR2)
    path = folder / f"tracemalloc-{index}.snap"
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if path.exists():
            try:
                return tracemalloc.Snapshot.load(str(path))
            except (EOFError, pickle.UnpicklingError):
                pass  # still being written
        time.sleep(0.2)
    raise TimeoutError(f"the gateway wrote no snapshot {path} within {WAIT_S:.0f} s")


def grown(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, top: int = 15) -> list[str]:
    """The `top` allocation sites by growth, as markdown table rows: KiB grown, blocks
    grown, the innermost frames of corral's code (or the innermost of any)."""
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__)]
    stats = after.filter_traces(ignore).compare_to(before.filter_traces(ignore), "traceback")
    rows = []
    for stat in stats[:top]:
        frames = [f for f in stat.traceback if "/corral" in f.filename or "/work/" in f.filename]
        shown = (frames or list(stat.traceback))[-3:]
        where = " <- ".join(f"{_short(f.filename)}:{f.lineno}" for f in reversed(shown))
        rows.append(f"| {stat.size_diff / 1024:+.0f} | {stat.count_diff:+d} | `{where}` |")
    return rows


def _short(filename: str) -> str:
    for marker in ("site-packages/", "/orchestrator/", "/sandboxes/", "/mcp_front/"):
        if marker in filename:
            return marker.strip("/") + "/" + filename.split(marker, 1)[1]
    return filename.rsplit("/", 2)[-1]


def report(pid: int, folder: Path) -> list[str]:
    """Snapshot 2 of the gateway now, and the growth since snapshot 1, as markdown."""
    after = take(pid, folder, 2)
    before = tracemalloc.Snapshot.load(str(folder / "tracemalloc-1.snap"))
    head = ["", "What grew in the gateway's Python heap (tracemalloc, largest first):", ""]
    head += ["| KiB | blocks | where (innermost first) |", "|---|---|---|"]
    return head + grown(before, after)
