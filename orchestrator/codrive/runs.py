"""codrive runs (SPEC S3.1, S3.3-S3.6): a run's steps, one after another, on an agent's
shared desktop, with the operator and the person in the loop.

Per step, in this order:
1. the deny list: a step whose window title or page matches it is refused without
   acting (the run fails, saying which entry);
2. a consequential step (send, submit, delete, purchase, other) waits for an
   operator's approval, with a masked screenshot, before any rung runs; denied or
   expired stops the run at that step;
3. a credential step (take_over, or category credential) hands the desktop to a
   person and waits, bounded, for the hand back; no rung ever types credential text;
4. otherwise the ladder (sandboxes.ladder) runs the step. If a person's input took the
   seat while it ran, the step is retried once after the hand back; a second drop
   stops the run. `current_try` says when a try is in flight (1, or 2 for the retry):
   only input from then on interrupts it; input before it (while the deny list or an
   approval is checked) makes the try wait for the hand back and then run whole;
5. with watch_mode, the run waits until the application is idle before the next step.

`start` answers when the run ends or after `ANSWER_WITHIN` seconds with it still going;
`status` reports it later. The desktop itself is a port (`Desktop`): the desktop rig
implements it.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Literal, Protocol

import anyio

from orchestrator.audit import AuditLog
from orchestrator.errors import SeatError
from orchestrator.people.approvals import ApprovalQueue
from sandboxes.approval_rules import Hold
from sandboxes.codrive import CodriveRunParams, Step
from sandboxes.events import NO_EVENTS, CallEvents
from sandboxes.ladder import DesktopProbes, Registry, StepResult, run_step
from sandboxes.masking import deny_matches

ANSWER_WITHIN = 30.0
KEEP_RUNS = 20  # finished runs kept per agent for codrive_status

RunState = Literal["running", "waiting_approval", "human", "finished", "failed", "stopped"]


class Desktop(Protocol):
    """What a run needs of the agent's shared desktop (the desktop rig implements it)."""

    probes: DesktopProbes
    registry: Registry
    seat_id: str  # the desktop's key in the console (approvals are raised under it)

    async def masked_png(self) -> bytes: ...

    async def where(self, app: str) -> tuple[str, str]:
        """(the app's window title, the page URL when the app is a browser, else "")."""
        ...

    def seat_is_human(self) -> bool: ...

    def seat_changes(self) -> int:
        """How many times a person has taken the seat so far (a step compares before and
        after to know whether it was interrupted)."""
        ...

    async def ask_person(self, why: str) -> None:
        """Tell the console a person is needed, and why."""
        ...

    async def wait_handback(self, within: float) -> bool:
        """True once the person handed the desktop back, False after `within` seconds."""
        ...

    async def wait_idle(self, app: str) -> str | None:
        """Wait until the app is idle; what happened ("idle after 320 ms"), if known."""
        ...


@dataclass
class CodriveRun:
    id: str
    agent: str
    app: str
    steps: Sequence[Step]
    watch_mode: bool
    state: RunState = "running"
    current_step: int = 0
    current_try: int = 0  # the try of current_step in flight (1, 2 for the retry); 0: none
    results: list[StepResult] = field(default_factory=list)
    reason: str = ""
    created_at: float = field(default_factory=time.time)
    done: anyio.Event = field(default_factory=anyio.Event)

    def public(self) -> dict[str, Any]:
        return {
            "run_id": self.id,
            "state": self.state,
            "target_app": self.app,
            "current_step": self.current_step,
            "current_try": self.current_try or None,
            "total_steps": len(self.steps),
            "steps": [r.public() for r in self.results],
            "reason": self.reason or None,
        }

    def summary(self) -> str:
        lines = [
            f"Run {self.id} on {self.app}: {self.state}, step {self.current_step + 1} "
            f"of {len(self.steps)}." + (f" {self.reason}" if self.reason else "")
        ]
        for r in self.results[-10:]:
            why = f" (fell through: {'; '.join(r.fell_through)})" if r.fell_through else ""
            lines.append(f"step {r.index}: {r.rung}, {r.effect}: {r.outcome}{why}")
        return "\n".join(lines)


class StopRun(Exception):
    """The run ends at this step with this state and reason."""

    def __init__(self, state: RunState, reason: str) -> None:
        super().__init__(reason)
        self.state: RunState = state
        self.reason = reason


def title_matches(title: str, deny_list: Sequence[str]) -> str | None:
    """A deny-list entry that is not a URL or host and appears in the window title
    (case-insensitive), e.g. "captcha"."""
    low = title.casefold()
    for entry in deny_list:
        bare = entry.strip()
        if bare and "://" not in bare and "." not in bare and bare.casefold() in low:
            return entry
    return None


@dataclass(eq=False)
class CodriveRuns:
    """Every agent's codrive runs: the ones going and the last `KEEP_RUNS` finished."""

    approvals: ApprovalQueue
    audit: AuditLog
    spawn: Callable[[Callable[[], Coroutine[Any, Any, None]]], Any]
    _: KW_ONLY
    handoff_timeout: float = 600.0
    answer_within: float = ANSWER_WITHIN
    runs: dict[str, list[CodriveRun]] = field(default_factory=dict, init=False)
    # Told of each finished step (the desktop's seat id, the run, the result): the
    # gateway puts it on the console's timeline.
    on_step: Callable[[str, CodriveRun, StepResult], None] | None = field(default=None, init=False)

    # ------------------------------------------------------------------ the tools
    async def start(
        self,
        agent: str,
        params: CodriveRunParams,
        desktop: Desktop,
        deny_list: Sequence[str],
        events: CallEvents = NO_EVENTS,
    ) -> CodriveRun:
        """Start a run; return it when it ends or after `answer_within` seconds."""
        run = CodriveRun(
            "run-" + secrets.token_hex(5), agent, params.target_app, params.steps, params.watch_mode
        )
        mine = self.runs.setdefault(agent, [])
        mine.append(run)
        del mine[:-KEEP_RUNS]
        self.audit.record(
            "codrive_run_started",
            agent,
            {"run": run.id, "app": run.app, "steps": len(run.steps), "watch": run.watch_mode},
        )

        async def go() -> None:
            await self._execute(run, desktop, deny_list)

        self.spawn(go)
        with anyio.move_on_after(self.answer_within):
            while not run.done.is_set():
                with anyio.move_on_after(2.0):
                    await run.done.wait()
                if not run.done.is_set():
                    await events.progress(
                        "codrive", f"{run.state}, step {run.current_step + 1} of {len(run.steps)}"
                    )
        return run

    def status(self, agent: str, run_id: str | None) -> CodriveRun | None:
        mine = self.runs.get(agent, [])
        if run_id is None:
            return mine[-1] if mine else None
        return next((r for r in mine if r.id == run_id), None)

    # ------------------------------------------------------------------ a run
    async def _execute(self, run: CodriveRun, desktop: Desktop, deny_list: Sequence[str]) -> None:
        try:
            for index, step in enumerate(run.steps):
                run.current_step = index
                run.results.append(await self._step(run, index, step, desktop, deny_list))
                if self.on_step is not None:
                    self.on_step(desktop.seat_id, run, run.results[-1])
                run.state = "running"
                if run.watch_mode:
                    note = await desktop.wait_idle(run.app)
                    if note:
                        run.results[-1].outcome += f"; then {note}"
            run.state = "finished"
        except StopRun as stop:
            run.state, run.reason = stop.state, stop.reason
        except Exception as exc:  # the desktop broke: the run fails, the gateway lives
            run.state, run.reason = "failed", f"the desktop failed: {exc}"[:300]
        finally:
            self.audit.record(
                "codrive_run_ended",
                run.agent,
                {"run": run.id, "state": run.state, "steps_done": len(run.results)},
            )
            run.done.set()

    async def _step(
        self, run: CodriveRun, index: int, step: Step, desktop: Desktop, deny_list: Sequence[str]
    ) -> StepResult:
        target = str((step.params or {}).get("url") or "")  # e.g. chromium's open_url
        if target and (entry := deny_matches(target, deny_list)) is not None:
            raise StopRun("failed", f"step {index} refused: it opens {entry!r} (deny list)")
        title, url = await desktop.where(run.app)
        entry = (deny_matches(url, deny_list) if url else None) or title_matches(title, deny_list)
        if entry is not None:
            raise StopRun("failed", f"step {index} refused: the app shows {entry!r} (deny list)")
        if step.consequential:
            await self._approve(run, index, step, desktop)
        if step.needs_person:
            await self._handoff(run, index, step, desktop)
            return StepResult(index, "none", effect="changed", outcome="a person did this step")
        for attempt in (1, 2):
            if desktop.seat_is_human():
                await self._wait_for_seat(run, index, desktop)
            seats_before = desktop.seat_changes()
            run.current_try = attempt  # from here on, a person's input interrupts the try
            result: StepResult | None
            try:
                result = await run_step(index, step, run.app, desktop.probes, desktop.registry)
            except SeatError:  # a person's input froze the seat while the step ran
                result = None
            finally:
                run.current_try = 0
            if result is not None and desktop.seat_changes() == seats_before:
                result.retried = attempt == 2
                return result
            self.audit.record(
                "codrive_step_dropped", run.agent, {"run": run.id, "step": index, "try": attempt}
            )
            if attempt == 2:
                raise StopRun(
                    "failed",
                    f"step {index} was interrupted by a person twice (retried once after the "
                    "first hand back); the run stopped",
                )
        raise AssertionError("unreachable")

    async def _approve(self, run: CodriveRun, index: int, step: Step, desktop: Desktop) -> None:
        assert step.category != "none" and step.category != "credential"
        what = f"step {index}: {step.action}"
        if step.role is not None:
            what += f" the {step.role} “{step.name}”"
        approval = self.approvals.raise_(
            agent=run.agent,
            session=desktop.seat_id,
            tool="codrive_run",
            step=what[:300],
            hold=Hold(f"category: {step.category}", step.category, f"{run.app}: {what}"[:300]),
            screenshot_png=await desktop.masked_png(),
            agent_words=step.description or None,  # the AI's own words, shown as its
        )
        run.state = "waiting_approval"
        await self.approvals.wait(approval)
        if approval.state != "approved":
            by = f" by {approval.decided_by}" if approval.decided_by else ""
            raise StopRun("stopped", f"step {index} was {approval.state}{by}; the run stopped")
        run.state = "running"

    async def _handoff(self, run: CodriveRun, index: int, step: Step, desktop: Desktop) -> None:
        run.state = "human"
        why = step.description or "a login, password or payment"
        await desktop.ask_person(f"a person is needed: {why}")
        self.audit.record("codrive_handoff", run.agent, {"run": run.id, "step": index})
        if not await desktop.wait_handback(self.handoff_timeout):
            raise StopRun(
                "failed",
                f"step {index}: nobody handed the desktop back within {self.handoff_timeout:g} s",
            )

    async def _wait_for_seat(self, run: CodriveRun, index: int, desktop: Desktop) -> None:
        run.state = "human"
        if not await desktop.wait_handback(self.handoff_timeout):
            raise StopRun(
                "failed",
                f"step {index}: a person kept the desktop for {self.handoff_timeout:g} s",
            )
        run.state = "running"
