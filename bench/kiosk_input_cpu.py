"""Benchmark: the CPU a kiosk spends on one input (issue 23 item 6), by kind of input,
paced as an agent of the soak sends them and back to back, against a real kiosk container.

Run from the repository root:

    .venv/bin/python bench/kiosk_input_cpu.py [--runs 40] [--write docs/benchmarks.md]

One kiosk container (the image and hardening of a session without network, as
bench/computer_use.py's reference) is started and driven through corral's kiosk channel,
on about:blank and then on a page of text (`PAGES`). Each row sends --runs inputs of one
kind (or the soak's cycle of ten: three clicks each with its target read first, three
scrolls, three Tab keys, one screenshot), either paced, one every PACE_S seconds (an
agent of `bench/soak.py --rate 50`: ten agents share 50 actions a second), or back to
back. The container's CPU (the engine's one-shot stats: every process of it, Chromium's,
Xvfb's and the kiosk agent's) is read before and after each row; a row of no input,
paced as long, gives what the idle kiosk costs meanwhile. With a local engine, each
process's share is read too (from /proc, through the engine's `top`). On each page, rows
run in the order listed after one uncounted warm-up pass of the cycle. The container is
removed at the end.

Not a latency benchmark: it says where the soak's CPU goes on the kiosk's side.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import anyio
import docker
from _common import BenchError, local_backend, publish, run_main, runs_and_write
from computer_use_paths import KIOSK_ACTION_DEADLINE_S, Observations, started_kiosk
from cpu_share import cpu_ticks, group_of
from rich.console import Console
from soak import action as soak_action
from soak_report import CLICK, KEY, SCROLL, SHOT

from orchestrator.backends.channel import KioskChannel

PACE_S = 0.2  # one agent's actions in the soak at 50 actions a second over 10 agents
HZ = os.sysconf("SC_CLK_TCK")
Input = Callable[[KioskChannel, int], Awaitable[None]]
CHANNEL_OP = {CLICK: "click", SCROLL: "scroll", KEY: "key", SHOT: "screenshot"}
CLICK_EXTRA = {"button": "left", "double": False}
IN_A_CONTAINER = " (in a container)"  # what `group_of` adds for a container's process


async def _request(channel: KioskChannel, op: str, **fields: Any) -> None:
    await channel.request(op, KIOSK_ACTION_DEADLINE_S, **fields)


async def _act(
    channel: KioskChannel, tool: str, arguments: dict[str, Any], *, read_target: bool
) -> None:
    """One of the soak's actions (`soak.action`) as the kiosk channel's ops: a click's
    target read first when `read_target` (the confirm words make the pipeline read it)."""
    if tool == CLICK and read_target:
        await _request(channel, "target", **arguments)
    extra = CLICK_EXTRA if tool == CLICK else {}
    await _request(channel, CHANNEL_OP[tool], **arguments, **extra)


def only(tool: str) -> Input:
    """The soak's actions of one kind (`soak.action(i, tool)`), no target read."""

    async def send(channel: KioskChannel, i: int) -> None:
        await _act(channel, *soak_action(i, tool), read_target=False)

    return send


async def target(channel: KioskChannel, i: int) -> None:
    _, at = soak_action(i, CLICK)
    await _request(channel, "target", **at)


async def nothing(channel: KioskChannel, i: int) -> None:
    return None


async def soak_cycle(channel: KioskChannel, i: int) -> None:
    """The soak's i-th action, as its agents send it."""
    await _act(channel, *soak_action(i), read_target=True)


_PARAGRAPH = (
    "The quarterly report lists every invoice the team approved, the supplier, the amount "
    "and the date it was paid; totals follow each section, with the notes of the auditor."
)
# about:blank, and a page of text (headings, paragraphs, a form) as agents mostly see: a
# data: URL, so the kiosk needs no network. Its screenshots weigh ~0.2 bytes a pixel.
PAGES: dict[str, str | None] = {
    "about:blank": None,
    "a page of text": "data:text/html,"
    + quote(
        "<body style='font:15px serif;margin:24px'><h1>Quarterly report</h1>"
        + "".join(f"<h3>Section {i}</h3><p>{_PARAGRAPH * (2 + i % 3)}</p>" for i in range(12))
        + "<form><label>Name <input></label> <label>Password <input type=password>"
        "</label> <button>Sign in</button></form></body>"
    ),
}

KINDS: dict[str, Input] = {
    "no input (the idle kiosk)": nothing,
    "click": only(CLICK),
    "target read (a click's confirm-word check)": target,
    "scroll": only(SCROLL),
    "key Tab": only(KEY),
    "screenshot (masked)": only(SHOT),
    "the soak's cycle": soak_cycle,
}


@dataclass(frozen=True, slots=True)
class Row:
    page: str
    kind: str
    paced: bool
    inputs: int
    cpu_ms: float
    seconds: float
    shares: dict[str, float]  # CPU ms by process kind (empty when /proc is not the engine's)


class KioskCpu:
    """The container's CPU through the engine, and each process's through /proc."""

    def __init__(self, container_id: str) -> None:
        self.client = docker.from_env()
        self.id = container_id

    def total_ms(self) -> float:
        stats = self.client.api.stats(self.id, stream=False, one_shot=True)
        return float(stats["cpu_stats"]["cpu_usage"]["total_usage"]) / 1e6

    def by_process(self) -> dict[str, float]:
        """CPU ms so far of each kind of process (`cpu_share.group_of`: by name, Chromium's
        by its type; the kiosk agent is the container's python3)."""
        found: dict[str, float] = {}
        top = self.client.api.top(self.id, ps_args="-eo pid")
        for (pid,) in top.get("Processes") or []:
            group, ticks = group_of(pid), cpu_ticks(pid)
            if group is None or ticks is None:
                return {}  # not this machine's processes (a remote engine)
            kind = group.removesuffix(IN_A_CONTAINER).replace("python3", "kiosk agent")
            found[kind] = found.get(kind, 0.0) + ticks * 1000 / HZ
        return found

    def close(self) -> None:
        self.client.close()


async def measure_row(
    channel: KioskChannel, cpu: KioskCpu, page: str, kind: str, paced: bool, runs: int
) -> Row:
    send = KINDS[kind]
    shares_before = await anyio.to_thread.run_sync(cpu.by_process)
    before = await anyio.to_thread.run_sync(cpu.total_ms)
    began = time.perf_counter()
    for i in range(runs):
        await send(channel, i)
        if paced:  # the load model, not a synchronisation
            await anyio.sleep(max(0.0, began + (i + 1) * PACE_S - time.perf_counter()))
    seconds = time.perf_counter() - began
    after = await anyio.to_thread.run_sync(cpu.total_ms)
    shares_after = await anyio.to_thread.run_sync(cpu.by_process)
    shares = {k: v - shares_before.get(k, 0.0) for k, v in shares_after.items()}
    kept = {k: v for k, v in shares.items() if v > 0} if shares_before else {}
    return Row(page, kind, paced, runs, after - before, seconds, kept)


async def measure(runs: int) -> list[Row]:
    rows: list[Row] = []
    async with started_kiosk(local_backend(), Observations()) as channel:
        cpu = KioskCpu(channel.id)
        try:
            for page, url in PAGES.items():
                if url is not None:
                    await _request(channel, "navigate", url=url)
                for i in range(10):
                    await soak_cycle(channel, i)  # warm-up: AT-SPI, the first frames
                rows.append(await measure_row(channel, cpu, page, next(iter(KINDS)), True, runs))
                for kind in list(KINDS)[1:]:
                    for paced in (True, False):
                        rows.append(await measure_row(channel, cpu, page, kind, paced, runs))
        finally:
            cpu.close()
    if any(row.cpu_ms <= 0 for row in rows[1:]):
        raise BenchError("a row of inputs cost no CPU: the engine's stats are not counting")
    return rows


def _shares(row: Row) -> str:
    if not row.shares or row.inputs == 0:
        return "-"
    top = sorted(row.shares.items(), key=lambda item: -item[1])[:4]
    return ", ".join(f"{name} {ms / row.inputs:.1f}" for name, ms in top)


def section(rows: list[Row], runs: int) -> str:
    lines = [
        "<!-- bench:kiosk_input_cpu:start -->",
        "## What one input costs the kiosk in CPU, paced and back to back",
        "",
        f"`bench/kiosk_input_cpu.py --runs {runs}`: a real kiosk container on about:blank,",
        "then on a page of text (headings, paragraphs, a form with a password field; a",
        f"data: URL), through corral's kiosk channel; {runs} inputs a row, paced one every",
        f"{PACE_S} s (an agent of `bench/soak.py --rate 50`) or back to back; the container's",
        "CPU from the engine's stats, each process's from /proc.",
        "",
        "| page | input | sent | CPU ms an input | inputs a second "
        "| top processes (CPU ms an input) |",
        "|---|---|---|---:|---:|---|",
    ]
    for row in rows:
        sent = "paced" if row.paced else "back to back"
        per = row.cpu_ms / row.inputs
        rate = row.inputs / row.seconds if row.seconds else 0.0
        lines.append(
            f"| {row.page} | {row.kind} | {sent} | {per:.1f} | {rate:.1f} | {_shares(row)} |"
        )
    lines += [
        "",
        "The idle row is CPU per paced interval with nothing sent. One machine, one run:",
        "compare rows within the table, not across runs.",
        "<!-- bench:kiosk_input_cpu:end -->",
    ]
    return "\n".join(lines)


def main() -> int:
    args = runs_and_write(None, __doc__, 40, "inputs a row")
    rows = anyio.run(measure, args.runs)
    publish(Console(emoji=False), section(rows, args.runs), args.write, "kiosk_input_cpu")
    return 0


if __name__ == "__main__":
    run_main(main, Console())
