"""Where the soak's CPU goes: every process's user + system time over the soak's load
phase, grouped by what the process is (issue 23, item 6; docs/benchmarks.md, "Where the
soak's CPU goes").

Runs `bench/soak.py` (its arguments after `--`) as a subprocess, samples /proc/PID/stat of
every process every 0.5 s, takes the baseline when the soak says all its sessions have
started, and prints each group's CPU seconds and share from then to the soak's end. A
process that ends between two samples loses at most its last 0.5 s. Run from the
repository root:

    .venv/bin/python bench/cpu_share.py [-- --agents 10 --actions 300 --scripts 20]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from _common import BenchError, run_main
from rich.console import Console
from rich.table import Table

console = Console()
SAMPLE_S = 0.5
STARTED = "session(s) started;"  # soak.py's line once every session has started
SOAK_DEFAULT = ["--agents", "10", "--actions", "300", "--scripts", "20"]


def group_of(pid: str) -> str | None:
    """What process `pid` is: a corral process by its command line, Chromium's by its
    type (browser, renderer, gpu-process ...), else its name; and whether it runs in a
    container."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        cgroup = Path(f"/proc/{pid}/cgroup").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    if "corral" in command and " gateway" in command:
        return "corral gateway"
    if "corral" in command and " mcp" in command:
        return "corral mcp (the fronts)"
    if "soak.py" in command:
        return "the benchmark's client"
    if "orchestrator.recordings.encoder" in command:
        return "the recordings' encoders"
    if "cpu_share.py" in command:
        return "this sampler"
    name = stat[stat.index("(") + 1 : stat.rindex(")")]
    if "chromium" in command:
        kind = next((a[7:] for a in command.split() if a.startswith("--type=")), "browser")
        name = f"chromium {kind}"
    return f"{name} (in a container)" if "docker" in cgroup else name


def cpu_ticks(pid: str) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


class Sampler:
    """Each process's CPU ticks since `mark()` (or since it was first seen after it)."""

    def __init__(self) -> None:
        self.first: dict[str, int] = {}
        self.last: dict[str, int] = {}
        self.groups: dict[str, str] = {}
        self.marked = threading.Event()
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for pid in filter(str.isdigit, os.listdir("/proc")):
                ticks = cpu_ticks(pid)
                if ticks is None or not self.marked.is_set():
                    continue
                if pid not in self.groups:
                    group = group_of(pid)
                    if group is None:
                        continue
                    self.groups[pid], self.first[pid] = group, ticks
                self.last[pid] = ticks
            self.stop.wait(SAMPLE_S)

    def shares(self) -> dict[str, float]:
        """CPU seconds by group, the largest first."""
        ticks: Counter[str] = Counter()
        for pid, now in self.last.items():
            ticks[self.groups[pid]] += now - self.first[pid]
        hz = os.sysconf("SC_CLK_TCK")
        return {group: used / hz for group, used in ticks.most_common()}


def sampled_soak(
    soak_args: Sequence[str], echo: bool = True
) -> tuple[dict[str, float], float, int]:
    """Run `bench/soak.py soak_args`; CPU seconds by group from the moment its sessions have
    all started to its end, that span's seconds, and its exit code."""
    sampler = Sampler()
    thread = threading.Thread(target=sampler.run, daemon=True)
    thread.start()
    began = 0.0
    soak = [sys.executable, "bench/soak.py", *soak_args]
    with subprocess.Popen(soak, stdout=subprocess.PIPE, text=True) as process:
        assert process.stdout is not None
        for line in process.stdout:
            if echo:
                console.out(line.rstrip("\n"), highlight=False)
            if STARTED in line and not sampler.marked.is_set():
                began = time.monotonic()
                sampler.marked.set()
    sampler.stop.set()
    thread.join()
    if not sampler.marked.is_set():
        raise BenchError("the soak never said its sessions had started")
    return sampler.shares(), time.monotonic() - began, process.returncode


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("soak_args", nargs="*", help="soak.py's arguments (after --)")
    args = parser.parse_args(argv)
    seconds, wall, code = sampled_soak(args.soak_args or SOAK_DEFAULT)
    total = sum(seconds.values())
    table = Table(title=f"CPU from the sessions' start to the soak's end: {wall:.0f} s")
    for column in ("process", "CPU s", "share"):
        table.add_column(column)
    for group, used in list(seconds.items())[:12]:
        table.add_row(group, f"{used:.1f}", f"{100 * used / total:.0f} %")
    console.print(table)
    console.print(f"all processes: {total:.1f} CPU-s in {wall:.0f} s on {os.cpu_count()} CPUs")
    return code


if __name__ == "__main__":
    run_main(main, console)
