"""Benchmark: what binding an approval to one exact action (issue 22 item 1) and the seat
at the moment of input (item 4) cost, on a click and on a 200-character type, before and
after, against a real kiosk container, in one run.

Run from the repository root:

    .venv/bin/python bench/approval.py [--runs 20] [--write docs/benchmarks.md]

One kiosk container (bench/computer_use.py's reference: no network) shows a page whose
whole middle is a button named "Delete draft". Every row but the raw requests runs
corral's own action pipeline (`orchestrator.surfaces.pipeline.Pipeline`, the real
`Oversight` and `ApprovalQueue`, the kiosk's driver) on a `KioskSession` over that
container's channel:

- item 4, before: the input as one channel request (the seat checked once, before the
  lock; a type in one request); after: the pipeline with no rule holding the input (the
  seat and the pending approval checked under the lock, a type in 32-character chunks);
- item 1, before: a held input whose approval is decided at once (an operator who never
  hesitates) with the target read once, before the wait, as the previous code did (the
  kiosk driver's second read answered from the first); after: the pipeline as it is now,
  the target read again under the lock, bound (sha256 digest) and the approval spent once.
  The held type ends in a newline on the focused button, so its target is the focus.

The digest alone is timed apart. Rounds are interleaved (each round runs every row once,
in a shuffled order, each after an uncounted screenshot so that it starts from a settled
screen) after a few uncounted warm-up rounds; the container is removed at the end.
"""

from __future__ import annotations

import base64
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from _common import NamedTimings, latency_table, publish, run_main, runs_and_write
from computer_use_paths import (
    CLICK_X,
    CLICK_Y,
    HEIGHT,
    KIOSK_ACTION_DEADLINE_S,
    WIDTH,
    Observations,
    started_kiosk,
)
from rich.console import Console

from orchestrator.audit import AuditLog
from orchestrator.backends.channel import KioskChannel
from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.backends.owner import Owner
from orchestrator.config import ComputerUseConfig
from orchestrator.people.approvals import Approval, ApprovalQueue
from orchestrator.surfaces.kiosk.driver import KioskDriver
from orchestrator.surfaces.kiosk.session import KioskSession
from orchestrator.surfaces.oversight import Oversight
from orchestrator.surfaces.pipeline import Action, Pipeline
from orchestrator.surfaces.registry import Surfaces
from sandboxes.approval_binding import Binding
from sandboxes.approval_rules import Hold
from sandboxes.events import NO_EVENTS
from sandboxes.params import ClickParams, TypeParams
from sandboxes.session_rules import SessionClock
from sandboxes.step_text import step_of

WARMUP = 3
TEXT = "a" * 200
HELD_TEXT = "a" * 199 + "\n"  # its newline presses Return on the focused "Delete draft"
PAGE = (
    '<!doctype html><title>bench</title><body style="margin:0"><button style="position:'
    'absolute;left:0;top:0;width:100%;height:100%" onclick="0">Delete draft</button></body>'
)


class AutoApproved(ApprovalQueue):
    """An operator who approves every approval the moment it is raised."""

    def raise_(self, **kwargs: Any) -> Approval:
        approval = super().raise_(**kwargs)
        self.decide(approval.id, "bench", True)
        return approval


class ReadOnce(KioskDriver):
    """Before item 1: the target read once, before the wait (the pipeline's second read,
    after the approval, is answered with the first)."""

    def __init__(self, audit: AuditLog, cfg: ComputerUseConfig) -> None:
        super().__init__(audit, cfg)
        self._first: Hold | None = None

    async def hold(self, session: KioskSession, action: Action) -> Hold | None:
        if self._first is None:
            self._first = await super().hold(session, action)
            return self._first
        first, self._first = self._first, None
        return first


def action(params: ClickParams | TypeParams) -> Action:
    tool = "computer_click" if isinstance(params, ClickParams) else "computer_type"
    return Action(
        tool=tool,
        name=tool,
        params=params,
        counted=True,
        is_input=True,
        step=step_of(tool, params),
        details={"session": "bench", "tool": tool},
    )


def rows_for(channel: KioskChannel, audit: AuditLog) -> dict[str, Callable[[], Awaitable[Any]]]:
    queue = AutoApproved(audit, 60)
    pipeline = Pipeline(audit, Oversight(Surfaces(), audit, queue))
    session = KioskSession(
        id="bench",
        agent="bench",
        clock=SessionClock(10**9, 3600, 86_400, time.monotonic(), time.monotonic()),
        channel=channel,
        width=WIDTH,
        height=HEIGHT,
    )
    free = KioskDriver(audit, ComputerUseConfig(confirm_words=[]))
    held = ComputerUseConfig(confirm_words=["delete"])
    click, typed = ClickParams(x=CLICK_X, y=CLICK_Y), TypeParams(text=TEXT)
    held_type = TypeParams(text=HELD_TEXT)
    fields = {"x": CLICK_X, "y": CLICK_Y, "button": "left", "double": False}

    def run(params: ClickParams | TypeParams, driver: KioskDriver) -> Awaitable[Any]:
        return pipeline.run(session, action(params), driver, NO_EVENTS)

    return {
        "click: one request (before item 4)": lambda: channel.request(
            "click", KIOSK_ACTION_DEADLINE_S, **fields
        ),
        "click: pipeline, nothing held (after item 4)": lambda: run(click, free),
        "click held, auto-approved: target read once (before item 1)": lambda: run(
            click, ReadOnce(audit, held)
        ),
        "click held, auto-approved: read again, bound, used once (after item 1)": lambda: run(
            click, KioskDriver(audit, held)
        ),
        "type 200: one request (before item 4)": lambda: channel.request(
            "type", KIOSK_ACTION_DEADLINE_S, text=TEXT
        ),
        "type 200: pipeline, nothing held, 32-char chunks (after item 4)": lambda: run(typed, free),
        "type 200 + newline held, auto-approved: focus read once (before item 1)": lambda: run(
            held_type, ReadOnce(audit, held)
        ),
        "type 200 + newline held: read again, bound, used once (after item 1)": lambda: run(
            held_type, KioskDriver(audit, held)
        ),
    }


async def digest_us(channel: KioskChannel) -> float:
    """The median time of one binding's digest, in microseconds, on a target as read."""
    target = await channel.request("target", KIOSK_ACTION_DEADLINE_S, x=CLICK_X, y=CLICK_Y)
    binding = Binding("computer_click", ClickParams(x=1, y=2).model_dump(), "bench", target)
    spent = []
    for _ in range(2000):
        started = time.perf_counter()
        _ = binding.digest
        spent.append((time.perf_counter() - started) * 1e6)
    return statistics.median(spent)


async def measure(runs: int) -> tuple[list[NamedTimings], float]:
    backend = DockerBackend(Owner.current())
    samples: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="corral-bench-approval-") as tmp:
        audit = AuditLog(Path(tmp) / "audit.jsonl")
        async with started_kiosk(backend, Observations()) as channel:
            url = "data:text/html;base64," + base64.b64encode(PAGE.encode()).decode()
            await channel.request("navigate", 30, url=url)
            rows = rows_for(channel, audit)
            names = list(rows)
            order = random.Random(22)
            for round_ in range(WARMUP + runs):
                for name in order.sample(names, len(names)):
                    # Every row starts from a settled screen: the first screenshot after an
                    # input waits for its repaint, which would bill one row for another's.
                    await channel.request("screenshot", KIOSK_ACTION_DEADLINE_S)
                    started = time.perf_counter()
                    await rows[name]()
                    elapsed = (time.perf_counter() - started) * 1000
                    if round_ >= WARMUP:
                        samples.setdefault(name, []).append(elapsed)
            digest = await digest_us(channel)
    return [NamedTimings(name, tuple(samples[name])) for name in names], digest


def section(rows: list[NamedTimings], runs: int, digest: float) -> str:
    lines = [
        "<!-- bench:approval:start -->",
        "## An approval bound to one exact action, and the seat at input: before and after",
        "",
        f"`bench/approval.py --runs {runs}`: a real kiosk container, driven through corral's",
        "own action pipeline (real `Oversight` and `ApprovalQueue`, the kiosk's driver), in",
        "one run. Item 4 (the seat and a pending approval checked under the surface's lock,",
        "a type in 32-character chunks): before is the input as one channel request. Item 1",
        "(the target read again after the approval, bound by digest, the approval used once):",
        "before is the same held input with the target read once, before the wait. Held rows",
        "are approved the moment they are raised, so they show what corral adds, not a",
        "person's time; they include the masked screenshot every approval carries.",
        "",
        *latency_table(rows),
        "",
        f"The digest of a binding (sha256 of its canonical JSON) alone: {digest:.1f} µs",
        "(median). What item 1 adds to a held action is one more read of its target (the",
        "kiosk's `target` or `focused` op) under the lock; an action no rule holds pays",
        "nothing for it. The machine is shared (2 cores, other tests running): read the",
        "p95s as noise.",
        "<!-- bench:approval:end -->",
    ]
    return "\n".join(lines)


def main() -> int:
    args = runs_and_write(None, __doc__, 20, "timed rounds (each runs every row once)")
    rows, digest = anyio.run(measure, args.runs)
    publish(Console(emoji=False), section(rows, args.runs, digest), args.write, "approval")
    return 0


if __name__ == "__main__":
    run_main(main, Console())
