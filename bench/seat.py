"""Benchmark: what the seat at the moment of input costs (issue 22 item 4), on a click and
on a 200-character type, before and after, against a real kiosk container.

Run from the repository root:

    .venv/bin/python bench/seat.py [--runs 30] [--write docs/benchmarks.md]

One kiosk container (the image and hardening of a session without network, as
bench/computer_use.py's reference) is started and driven through corral's kiosk channel:

- before: the input as one request (a 200-character type was one `type` request; the
  seat was checked once, before the lock);
- after: the input as the pipeline sends it now: under the surface's lock, the seat
  checked, then `orchestrator.surfaces.inputs.channel_input`, which types in
  `TYPE_CHUNK`-character requests with the seat checked before each.

Rounds are interleaved (each round runs the four rows once, in rotating order) after a
few uncounted warm-up rounds. The container is removed at the end.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from types import SimpleNamespace

import anyio
from _common import NamedTimings, latency_table, local_backend, publish, run_main, runs_and_write
from computer_use_paths import (
    CLICK_X,
    CLICK_Y,
    KIOSK_ACTION_DEADLINE_S,
    Observations,
    started_kiosk,
)
from rich.console import Console

from orchestrator.backends.channel import KioskChannel
from orchestrator.surfaces.inputs import TYPE_CHUNK, channel_input

WARMUP = 3
TEXT = "a" * 200
CLICK = SimpleNamespace(x=CLICK_X, y=CLICK_Y, button="left", double=False)
TYPE = SimpleNamespace(text=TEXT)


def rows_for(channel: KioskChannel) -> dict[str, Callable[[], Awaitable[object]]]:
    lock = anyio.Lock()
    seat = {"controller": "ai"}

    def holds() -> bool:
        return seat["controller"] == "ai"

    async def under_lock(verb: str, params: SimpleNamespace) -> object:
        async with lock:
            if not holds():
                raise RuntimeError("the seat moved during the benchmark")
            return await channel_input(channel, verb, params, holds_seat=holds)

    click = {"x": CLICK_X, "y": CLICK_Y, "button": "left", "double": False}
    return {
        "click, before (one request)": lambda: channel.request(
            "click", KIOSK_ACTION_DEADLINE_S, **click
        ),
        "click, after (lock + seat check)": lambda: under_lock("click", CLICK),
        "type 200 chars, before (one request)": lambda: channel.request(
            "type", KIOSK_ACTION_DEADLINE_S, text=TEXT
        ),
        f"type 200 chars, after ({-(-len(TEXT) // TYPE_CHUNK)} chunks, seat before each)": (
            lambda: under_lock("type", TYPE)
        ),
    }


async def measure(runs: int) -> list[NamedTimings]:
    backend = local_backend()
    samples: dict[str, list[float]] = {}
    async with started_kiosk(backend, Observations()) as channel:
        rows = rows_for(channel)
        names = list(rows)
        for round_ in range(WARMUP + runs):
            for i in range(len(names)):
                name = names[(round_ + i) % len(names)]
                started = time.perf_counter()
                await rows[name]()
                elapsed = (time.perf_counter() - started) * 1000
                if round_ >= WARMUP:
                    samples.setdefault(name, []).append(elapsed)
    return [NamedTimings(name, tuple(samples[name])) for name in names]


def section(rows: list[NamedTimings], runs: int) -> str:
    lines = [
        "<!-- bench:seat:start -->",
        "## The seat at the moment of input: click and 200-character type",
        "",
        f"`bench/seat.py --runs {runs}`: a real kiosk container through corral's kiosk",
        "channel. Before: the input as one request. After: under the surface's lock with the",
        f"seat checked, a type sent in {TYPE_CHUNK}-character chunks with the seat checked",
        "before each (what the action pipeline does now).",
        "",
        *latency_table(rows),
        "",
        "The seat check itself is a lock and a comparison (microseconds): a click costs the",
        "same. A long type costs one channel round trip per chunk instead of one in all:",
        "the price of a person's take over stopping the AI within one chunk. The machine is",
        "shared (2 cores, other benchmarks and tests running): read the p95s as noise.",
        "<!-- bench:seat:end -->",
    ]
    return "\n".join(lines)


def main() -> int:
    args = runs_and_write(None, __doc__, 30, "timed rounds (each runs every row once)")
    rows = anyio.run(measure, args.runs)
    publish(Console(emoji=False), section(rows, args.runs), args.write, "seat")
    return 0


if __name__ == "__main__":
    run_main(main, Console())
