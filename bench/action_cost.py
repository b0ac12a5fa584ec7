"""What one action costs the machine, by process, one kind of action at a time (issue 23,
item 6: where the soak's CPU goes, and which actions its slow clicks wait behind).

Runs `bench/soak.py` once per kind, each time every agent doing only that action on the
soak's schedule (`--only`), no scripts and no recording, and samples every process's CPU
as `bench/cpu_share.py` does (from the moment all sessions have started to the soak's end):

- idle: the sessions open as long, no action sent: the baseline (Chromium, the agents, the
  gateway and the fronts with nothing to do);
- click, and click again with agents that have no confirm words (`--no-confirm-words`: no
  click reads its target first), scroll (one step), key (`Tab`), screenshot.

A cell is a process group's CPU in the kind's run less its CPU at the idle run's rate over
as long, divided by the actions answered: milliseconds of CPU per action. The last rows
are each run's latencies (p50 / p95 of the kind's own tool) and its actions a second.
Run from the repository root:

    .venv/bin/python bench/action_cost.py [--agents 10] [--actions 300] [--rate 50]
        [--screenshot-rate 10] [--write docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from _common import BenchError, markers, run_main, write_section
from cpu_share import sampled_soak
from rich.console import Console
from rich.table import Table
from soak_report import CLICK, IDLE, KEY, SCROLL, SHOT

console = Console()
SECTION = "action-cost"
SHOWN_GROUPS = 9  # the groups costing most, by the click's column; the rest summed


@dataclass(frozen=True)
class Kind:
    name: str
    only: str
    tool: str = ""
    confirm_words: bool = True


KINDS = (
    Kind("idle", IDLE),
    Kind("click", CLICK, CLICK),
    Kind("click, no confirm words", CLICK, CLICK, confirm_words=False),
    Kind("scroll", SCROLL, SCROLL),
    Kind("key", KEY, KEY),
    Kind("screenshot", SHOT, SHOT),
)


@dataclass
class Run:
    kind: Kind
    cpu_s: dict[str, float]
    seconds: float
    latency: dict[str, float]  # p50, p95, n of the kind's tool (empty for idle)
    rate: float


def actions(kind: Kind, args: argparse.Namespace) -> int:
    """Each agent's actions of the kind: screenshots at their own rate over as long."""
    if kind.only != SHOT:
        return int(args.actions)
    return max(1, int(args.actions) * int(args.screenshot_rate) // int(args.rate))


def soak_args(kind: Kind, args: argparse.Namespace, summary: Path) -> list[str]:
    rate = args.screenshot_rate if kind.only == SHOT else args.rate
    argv = ["--agents", str(args.agents), "--actions", str(actions(kind, args)), "--scripts", "0"]
    argv += ["--rate", str(rate), "--no-recording", "--only", kind.only]
    argv += ["--summary", str(summary)]
    return argv + ([] if kind.confirm_words else ["--no-confirm-words"])


def run_kind(kind: Kind, args: argparse.Namespace) -> Run:
    with tempfile.TemporaryDirectory(prefix="corral-bench-cost-") as tmp:
        summary_file = Path(tmp) / "summary.json"
        argv = soak_args(kind, args, summary_file)
        console.print(f"[dim]{kind.name}: bench/soak.py {shlex.join(argv)}[/]")
        cpu, seconds, _code = sampled_soak(argv, echo=False)
        if not summary_file.exists():
            raise BenchError(f"{kind.name}: the soak wrote no summary (it failed: run it alone)")
        summary = json.loads(summary_file.read_text(encoding="utf-8"))
    if summary["errors"]:
        raise BenchError(f"{kind.name}: {summary['errors']} action(s) failed: run it alone")
    latency = summary["tools"].get(kind.tool, {}) if kind.tool else {}
    if kind.tool and latency.get("n") != args.agents * actions(kind, args):
        raise BenchError(f"{kind.name}: {latency.get('n', 0)} of the actions answered")
    return Run(kind, cpu, seconds, latency, float(summary["actions_per_s"]))


def per_action(run: Run, idle: Run) -> dict[str, float]:
    """Each group's CPU ms per action over the idle run's rate."""
    count = run.latency.get("n", 0)
    if not count:
        return {}
    costs = {}
    for group in set(run.cpu_s) | set(idle.cpu_s):
        baseline = idle.cpu_s.get(group, 0.0) / idle.seconds * run.seconds
        costs[group] = (run.cpu_s.get(group, 0.0) - baseline) * 1000 / count
    return costs


def table_rows(runs: list[Run]) -> tuple[list[str], list[list[str]]]:
    idle, measured = runs[0], runs[1:]
    costs = [per_action(run, idle) for run in measured]
    order = sorted(costs[0], key=lambda g: -costs[0][g])
    shown, rest = order[:SHOWN_GROUPS], order[SHOWN_GROUPS:]
    header = ["process", *(run.kind.name for run in measured)]
    rows = [[group, *(f"{cost.get(group, 0.0):.1f}" for cost in costs)] for group in shown]
    rows.append(["the rest", *(f"{sum(c.get(g, 0.0) for g in rest):.1f}" for c in costs)])
    rows.append(["all processes", *(f"**{sum(c.values()):.1f}**" for c in costs)])
    rows.append(
        ["p50 / p95 (ms)", *(f"{r.latency['p50']:.1f} / {r.latency['p95']:.1f}" for r in measured)]
    )
    rows.append(["actions a second", *(f"{run.rate:.1f}" for run in measured)])
    idle_total = sum(idle.cpu_s.values()) / idle.seconds
    rows.append(["idle: CPU-s a second", f"{idle_total:.2f}", *([""] * (len(measured) - 1))])
    return header, rows


def print_table(runs: list[Run]) -> None:
    header, rows = table_rows(runs)
    table = Table(title="CPU per action, ms, by process (over the idle sessions' own)")
    for column in header:
        table.add_column(column)
    for row in rows:
        table.add_row(*(cell.replace("**", "") for cell in row))
    console.print(table)


def markdown(runs: list[Run], args: argparse.Namespace, command: str) -> str:
    header, rows = table_rows(runs)
    start, end = markers(SECTION)
    lines = [f"| {' | '.join(header)} |", "|" + "---|" * len(header)]
    lines += [f"| {' | '.join(row)} |" for row in rows]
    table = "\n".join(lines)
    return f"""{start}
## What one action costs, by process (issue 23 item 6)

`{command}`: the soak with {args.agents} agents, each doing only one kind of action on
the soak's schedule ({args.rate} actions a second in all, {args.actions} each; screenshots
{args.screenshot_rate} a second for as long), no scripts and no recording; every
process's CPU sampled from the moment all sessions have started to the soak's end
(bench/cpu_share.py), less the same processes' CPU in a run with the sessions open and
no action sent, per action answered. {os.cpu_count()} CPUs.

{table}
{end}"""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--agents", type=int, default=10, help="agents, each its own session")
    parser.add_argument("--actions", type=int, default=300, help="actions per agent and kind")
    parser.add_argument("--rate", type=int, default=50, help="actions a second in all")
    parser.add_argument("--screenshot-rate", type=int, default=10, help="the same, screenshots")
    parser.add_argument("--write", metavar="PATH", help="write/replace the section in this file")
    args = parser.parse_args(argv)
    if not 1 <= args.agents <= 40:
        parser.error("--agents must be from 1 to 40")
    if not 1 <= args.actions <= 10_000:
        parser.error("--actions must be from 1 to 10000 (the session's action budget)")
    for flag, value in (("--rate", args.rate), ("--screenshot-rate", args.screenshot_rate)):
        if not 1 <= value <= 1000:
            parser.error(f"{flag} must be from 1 to 1000 actions a second")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    runs = [run_kind(kind, args) for kind in KINDS]
    print_table(runs)
    if args.write:
        command = [".venv/bin/python", "bench/action_cost.py", "--agents", str(args.agents)]
        command += ["--actions", str(args.actions), "--rate", str(args.rate)]
        command += ["--screenshot-rate", str(args.screenshot_rate), "--write", args.write]
        write_section(Path(args.write), SECTION, markdown(runs, args, shlex.join(command)))
        console.print(f"wrote the section to {args.write}")
    return 0


if __name__ == "__main__":
    run_main(main, console)
