"""Sampling profiles of corral's processes while a benchmark runs (py-spy, from PyPI), and
their top frames as markdown: where the event loop's thread is busy, by function.

`profiled({"gateway": pid, ...}, folder)` runs `py-spy record` on each process for the
block (raw, collapsed stacks: one line per distinct stack and its sample count); `top`
reads one file and counts only the samples of the thread that runs the event loop while
it is not waiting for events (`select`): what holds the loop is what every call waits
behind. "Own time" is a function's own; corral's frames are counted with what they call.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from _common import BenchError, running_children

RATE_HZ = 250
STOP_S = 30.0
IDLE = ("EpollSelector.select", "select (selectors.py")
LOOP = "run_forever"  # a frame every stack of the loop's thread holds


def py_spy() -> str:
    found = str(Path(sys.executable).parent / "py-spy")
    if not Path(found).exists():
        raise BenchError("py-spy is not installed (it is in the dev extras: `make setup`)")
    return found


@contextlib.contextmanager
def profiled(pids: Mapping[str, int], folder: Path) -> Iterator[dict[str, Path]]:
    """py-spy on each process while the block runs; the files, by name."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {name: folder / f"{name}.txt" for name in pids}
    spies: list[subprocess.Popen[bytes]] = []
    try:
        for name, pid in pids.items():
            argv = [py_spy(), "record", "--pid", str(pid), "--rate", str(RATE_HZ)]
            argv += ["--format", "raw", "--output", str(files[name]), "--nonblocking"]
            spies.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        yield files
    finally:
        for spy in spies:
            if spy.poll() is None:
                spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        deadline = time.monotonic() + STOP_S
        for spy in spies:
            try:
                spy.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                spy.kill()
                spy.wait()


OURS = ("orchestrator/", "mcp_front/", "sandboxes/")


@dataclass(frozen=True)
class Top:
    busy_samples: int
    own: list[tuple[str, float]]  # frame, self % of the busy samples: where the time is spent
    ours: list[tuple[str, float]]  # corral's frames, total %: which of its steps cost it


def top(path: Path, count: int = 12) -> Top:
    """The frames that hold the event loop's thread busy: by their own time, and corral's
    frames by their total."""
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    busy = 0
    if not path.exists():
        raise BenchError(f"py-spy wrote no profile at {path}")
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, number = line.rpartition(" ")
        frames = stack.split(";")
        if not number.isdigit() or not any(LOOP in f for f in frames):
            continue
        if any(mark in frames[-1] for mark in IDLE):
            continue
        samples = int(number)
        busy += samples
        own[frames[-1]] += samples
        for frame in set(frames):
            total[frame] += samples
    if busy == 0:
        return Top(0, [], [])
    by_self = [(frame, 100 * n / busy) for frame, n in own.most_common(count)]
    ours = [
        (frame, 100 * n / busy)
        for frame, n in total.most_common()
        if any(mark in frame for mark in OURS)
    ][:count]
    return Top(busy, by_self, ours)


def markdown(name: str, found: Top, seconds: float) -> list[str]:
    """`found` as two tables: `name`'s busy loop, over `seconds`."""
    share = found.busy_samples / RATE_HZ / seconds * 100 if seconds > 0 else 0.0
    lines = [
        f"{name}: the event loop's thread busy {share:.0f}% of {seconds:.0f} s "
        f"({found.busy_samples} samples at {RATE_HZ} Hz)",
        "",
        "| own time: frame | % of busy |",
        "|---|---:|",
        *(f"| `{frame}` | {pct:.1f} |" for frame, pct in found.own),
        "",
        "| corral's frames, with what they call | % of busy |",
        "|---|---:|",
        *(f"| `{frame}` | {pct:.1f} |" for frame, pct in found.ours),
    ]
    return lines


def markdown_all(files: Mapping[str, Path], seconds: float, count: int = 12) -> list[str]:
    lines: list[str] = []
    for name, path in files.items():
        lines += [*markdown(name, top(path, count), seconds), ""]
    return lines


def child_with(argument: str) -> int:
    """The pid of this process's child whose command line holds `argument` (a word)."""
    for child in running_children(os.getpid()):
        if argument.encode() in child.argv:
            return child.pid
    raise BenchError(f"no child process of this benchmark runs with {argument!r}")
