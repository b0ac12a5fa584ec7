"""Benchmark: what recording costs (issue 24). Click and screenshot p50 through MCP with
`[recording]` on and off, the gateway's CPU per recorded session, and the recording's MB
per minute on a busy page and an idle one.

Run from the repository root:

    .venv/bin/python bench/recording.py [--runs 60] [--idle 30] [--write docs/benchmarks.md]

Two `corral gateway`s, each with its own throwaway CORRAL_HOME and the heavy page's local
HTTPS site (bench/computer_use_site.py): one records (the default), one has `[recording]
enabled = false`. One kiosk session on each opens the heavy page; then --runs rounds, each
a click and a screenshot on both gateways in rotating order (a click on the page's empty
part: the page does not change, the recorder draws the click's mark and takes the frames
after it). The gateways' CPU time (/proc; their running children, the recordings' encoder
processes, included) over the rounds, divided by their wall time, is each one's CPU share;
the difference is what recording one busy session costs. Then both sessions sit idle
--idle seconds: the recording's growth then is the idle rate.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import anyio
import mcp_types as types
from _common import (
    BenchError,
    markers,
    nearest_rank,
    run_main,
    running_children,
    write_section,
)
from computer_use import free_port, mcp_params, prepare_home, running_gateway
from computer_use_paths import WEB_AGENT
from computer_use_report import check_leftovers, describe_machine, machine_paragraph
from computer_use_site import HEAVY_URL, heavy_site
from cpu_share import cpu_ticks
from mcp import Client
from rich.console import Console
from rich.table import Table

from orchestrator.home import CorralHome, Environment

SECTION = "recording"
NOTE = (
    "Busy: a click and a screenshot back to back on the heavy page, every round; the frames "
    "are mostly the screenshots' own masked images (no second capture) and one taken in each "
    "pause of 0.25 s, with the marks of the clicks since. Idle: nobody acts."
)
TARGET_PERCENT = 5.0
console = Console()


def ticks(pid: int) -> float:
    """CPU seconds used by `pid`, its reaped children (utime, stime, cutime, cstime) and
    its running ones (the recordings' encoder processes among them: utime, stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    own = sum(int(v) for v in fields[11:15])
    # A child that ended between the scan and its read: its time is in cutime by then.
    running = sum(cpu_ticks(str(child.pid)) or 0 for child in running_children(pid))
    return (own + running) / os.sysconf("SC_CLK_TCK")


def recorded_bytes(home: CorralHome) -> int:
    root = home.recordings_dir
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) if root.is_dir() else 0


@contextlib.asynccontextmanager
async def session(home: CorralHome) -> AsyncIterator[Client]:
    async with Client(mcp_params(home, WEB_AGENT)) as client:
        started = await client.call_tool("computer_session_start", {})
        if started.is_error:
            raise BenchError(f"computer_session_start failed: {started.content}")
        opened = await client.call_tool("computer_navigate", {"url": HEAVY_URL})
        if opened.is_error:
            raise BenchError(f"the heavy page did not open: {opened.content}")
        try:
            yield client
        finally:
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await client.call_tool("computer_session_stop", {})


async def timed(client: Client, tool: str, arguments: dict[str, object]) -> float:
    began = time.perf_counter()
    result: types.CallToolResult = await client.call_tool(tool, arguments)
    if result.is_error:
        raise BenchError(f"{tool} failed: {result.content}")
    return (time.perf_counter() - began) * 1000


Result = dict[str, dict[str, float]]


async def measure(
    homes: dict[str, CorralHome], pids: dict[str, int], runs: int, idle: float
) -> Result:
    out: Result = {}
    async with contextlib.AsyncExitStack() as stack:
        clients = {name: await stack.enter_async_context(session(h)) for name, h in homes.items()}
        for client in clients.values():  # warm up
            await timed(client, "computer_screenshot", {})
        samples: dict[tuple[str, str], list[float]] = {
            (n, t): [] for n in homes for t in ("click", "screenshot")
        }
        cpu0 = {n: ticks(p) for n, p in pids.items()}
        size0 = {n: recorded_bytes(h) for n, h in homes.items()}
        began = time.monotonic()
        names = list(homes)
        for run in range(runs):
            order = names[run % 2 :] + names[: run % 2]
            for name in order:
                x = 1100 + (run % 5) * 20  # the page's empty right margin
                samples[(name, "click")].append(
                    await timed(clients[name], "computer_click", {"x": x, "y": 700})
                )
                samples[(name, "screenshot")].append(
                    await timed(clients[name], "computer_screenshot", {})
                )
        busy = time.monotonic() - began
        cpu = {n: (ticks(p) - cpu0[n]) / busy * 100 for n, p in pids.items()}
        grown = {n: recorded_bytes(h) - size0[n] for n, h in homes.items()}
        size1 = {n: recorded_bytes(h) for n, h in homes.items()}
        await anyio.sleep(idle)  # the idle period itself is what is measured
        idled = {n: recorded_bytes(h) - size1[n] for n, h in homes.items()}
        for name in names:
            out[name] = {
                "click": nearest_rank(samples[(name, "click")], 50),
                "screenshot": nearest_rank(samples[(name, "screenshot")], 50),
                "cpu": cpu[name],
                "busy_mb_min": grown[name] / (1 << 20) / busy * 60,
                "idle_mb_min": idled[name] / (1 << 20) / idle * 60,
            }
    return out


def table(result: Result, runs: int) -> tuple[Table, str]:
    on, off = result["recording on"], result["recording off"]
    grid = Table(title=f"Recording's cost ({runs} rounds, p50)")
    for column in ("", "recording on", "recording off", "cost", f"target ≤ {TARGET_PERCENT:g} %"):
        grid.add_column(column)
    lines = ["| | recording on | recording off | cost | target |", "|---|---|---|---|---|"]
    for what in ("click", "screenshot"):
        cost = (on[what] - off[what]) / off[what] * 100
        row = [f"{what} p50 (ms)", f"{on[what]:.1f}", f"{off[what]:.1f}", f"{cost:+.1f} %",
               "met" if cost <= TARGET_PERCENT else "missed"]  # fmt: skip
        grid.add_row(*row)
        lines.append("| " + " | ".join(row) + " |")
    extra = [
        ("gateway CPU, its encoders included, busy session (% of a core)",
         f"{on['cpu']:.1f}", f"{off['cpu']:.1f}", f"{on['cpu'] - off['cpu']:+.1f} points", "-"),
        ("recording, busy page (MB/min)", f"{on['busy_mb_min']:.2f}", "-", "-", "-"),
        ("recording, idle page (MB/min)", f"{on['idle_mb_min']:.2f}", "-", "-", "-"),
    ]  # fmt: skip
    for cells in extra:
        grid.add_row(*cells)
        lines.append("| " + " | ".join(cells) + " |")
    return grid, "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--idle", type=float, default=30.0)
    parser.add_argument("--write", default=None)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="corral-bench-rec-") as tmp, heavy_site() as site:
        homes: dict[str, CorralHome] = {}
        pids: dict[str, int] = {}
        owners: list[tuple[int, int | None]] = []
        with contextlib.ExitStack() as stack:
            for name, enabled in (("recording on", True), ("recording off", False)):
                home = CorralHome(Path(tmp) / name.replace(" ", "-"), Environment())
                port = free_port()
                prepare_home(home, port, site)
                if not enabled:
                    with home.config_file.open("a") as fh:
                        fh.write("\n[recording]\nenabled = false\n")
                gateway = stack.enter_context(
                    running_gateway(home, port, Path(tmp) / f"{home.root.name}.log")
                )
                homes[name], pids[name] = home, gateway.proc.pid
                owners.append((gateway.proc.pid, gateway.start_time))
            result = anyio.run(measure, homes, pids, args.runs, args.idle)
        check_leftovers(owners)
    grid, markdown = table(result, args.runs)
    console.print(grid)
    if args.write:
        command = f".venv/bin/python bench/recording.py --runs {args.runs} --idle {args.idle:g}"
        start, end = markers(SECTION)
        body = f"`{command}`\n\n{machine_paragraph(describe_machine())}\n\n{markdown}\n\n{NOTE}\n"
        write_section(Path(args.write), SECTION, f"{start}\n## Recording's cost\n\n{body}{end}")
    return 0


if __name__ == "__main__":
    run_main(main, console)
