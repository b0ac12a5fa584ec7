"""codrive runs (SPEC S3.1, S3.3-S3.6): a run's steps, one after another, on an agent's
shared desktop, with the operator and the person in the loop.

Per step, in this order:
1. a credential step (take_over, or category credential) hands the desktop to a
   person and waits, bounded, for the hand back; no rung ever types credential text;
2. otherwise each try of the step goes through the one action pipeline
   (`orchestrator.codrive.step`): the deny list (before, and after on where the step
   led: the run fails, saying which entry), the rules on what the step acts on as the
   desktop reads it plus its category (an approval with a masked screenshot, a new one
   for every try; denied or expired stops the run), then under the desktop's lock the
   ladder (sandboxes.ladder). A step that would type or paste into a secret field is
   handed to a person instead;
3. a person's input: a try whose input never reached the desktop is retried once after
   the hand back (a second drop stops the run); a try whose input was delivered is never
   sent again (the step is done, or, cut in the middle, the run stops). `current_try`
   says when a try is in flight (1, or 2 for the retry);
4. with watch_mode, the run waits until the application is idle before the next step.

`start` answers when the run ends, when it waits for a person (a handoff, or a person took
the desktop), or after `ANSWER_WITHIN` seconds with it still going; `status` reports it
later. The desktop itself is a port (`Desktop`): the desktop rig
implements it.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Protocol

import anyio

from orchestrator.audit import AuditLog
from orchestrator.codrive.step import StepDriver, StepRules, step_action
from orchestrator.errors import DeniedPage, SeatError, SecretField, SessionRefused
from orchestrator.ledger import Recovered, run_failed_reason
from orchestrator.surfaces.desktop import DesktopRig
from orchestrator.surfaces.pipeline import Pipeline
from sandboxes.codrive import CodriveRunParams, RunState, Step
from sandboxes.codrive_rules import StepTarget
from sandboxes.events import NO_EVENTS, CallEvents
from sandboxes.ladder import DesktopProbes, Registry, StepResult

ANSWER_WITHIN = 30.0
MAX_SEAT_WAITS = 10  # a step a person takes before its try begins waits at most this often
KEEP_RUNS = 20  # finished runs kept per agent for codrive_status
STOPPED_WITH_GATEWAY = "the gateway stopped while the run was going; start it again"


class Desktop(Protocol):
    """What a run needs of the agent's shared desktop (the desktop rig implements it)."""

    probes: DesktopProbes
    registry: Registry
    seat_id: str  # the desktop's key in the console (approvals are raised under it)
    delivered: int  # inputs written in the current try (0: none reached the desktop)

    @property
    def surface(self) -> DesktopRig:
        """The surface the pipeline runs each step on (its lock, seat, budget)."""
        ...

    async def target(self, step: Step) -> StepTarget:
        """What `step` would act on, read from the desktop now."""
        ...

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
    # Set when the run ends or waits for a person: `start` answers then rather than
    # holding the agent's call while nothing can happen without the person.
    answer_now: anyio.Event = field(default_factory=anyio.Event)
    person_needed: str = ""  # while the state is "human": what the person is there for
    planned: int | None = None  # its steps' count, where the steps are not kept (recovered)

    @property
    def total_steps(self) -> int:
        return len(self.steps) if self.planned is None else self.planned

    def public(self) -> dict[str, Any]:
        return {
            "run_id": self.id,
            "state": self.state,
            "target_app": self.app,
            "current_step": self.current_step,
            "current_try": self.current_try or None,
            "total_steps": self.total_steps,
            "steps": [r.public() for r in self.results],
            "reason": self.reason or None,
        }

    def summary(self) -> str:
        lines = [
            f"Run {self.id} on {self.app}: {self.state}, step {self.current_step + 1} "
            f"of {self.total_steps}." + (f" {self.reason}" if self.reason else "")
        ]
        if self.state == "human":
            lines.append(
                f"Waiting for a person ({self.person_needed}); the run goes on once they hand "
                "the desktop back: follow it with codrive_status."
            )
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


@dataclass(eq=False)
class CodriveRuns:
    """Every agent's codrive runs: the ones going and the last `KEEP_RUNS` finished."""

    pipeline: Pipeline
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
        rules: StepRules,
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
            await self._execute(run, desktop, rules)

        self.spawn(go)
        with anyio.move_on_after(self.answer_within):
            while not run.answer_now.is_set():
                with anyio.move_on_after(2.0):
                    await run.answer_now.wait()
                if not run.answer_now.is_set():
                    await events.progress(
                        "codrive", f"{run.state}, step {run.current_step + 1} of {len(run.steps)}"
                    )
        return run

    def restore(self, left: Sequence[Recovered]) -> None:
        """Runs a killed gateway left going (orchestrator.ledger), as failed, so that
        codrive_status tells their agents what became of them."""
        for recovered in left:
            entry, agent = recovered.entry, recovered.agent or ""
            done = int(entry.get("steps_done", 0))
            run = CodriveRun(
                str(entry["run"]), agent, str(entry.get("app", "")), (), False, state="failed"
            )
            run.current_step, run.planned = done, int(entry.get("steps", done))
            run.reason = run_failed_reason(entry)
            run.done.set()
            self.runs.setdefault(agent, []).append(run)

    def status(self, agent: str, run_id: str | None) -> CodriveRun | None:
        mine = self.runs.get(agent, [])
        if run_id is None:
            return mine[-1] if mine else None
        return next((r for r in mine if r.id == run_id), None)

    # ------------------------------------------------------------------ a run
    async def _execute(self, run: CodriveRun, desktop: Desktop, rules: StepRules) -> None:
        try:
            for index, step in enumerate(run.steps):
                run.current_step = index
                run.results.append(await self._step(run, index, step, desktop, rules))
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
        except anyio.get_cancelled_exc_class():  # the gateway stops: the run ends with it
            run.state, run.reason = "failed", STOPPED_WITH_GATEWAY
            raise
        finally:
            self.audit.record(
                "codrive_run_ended",
                run.agent,
                {
                    "run": run.id,
                    "state": run.state,
                    "steps_done": len(run.results),
                    "reason": run.reason or None,
                },
            )
            run.done.set()
            run.answer_now.set()

    async def _step(
        self, run: CodriveRun, index: int, step: Step, desktop: Desktop, rules: StepRules
    ) -> StepResult:
        if step.needs_person:
            return await self._handoff(run, index, step, desktop)
        attempt, waits = 1, 0
        while True:
            if desktop.seat_is_human():
                await self._wait_for_seat(run, index, desktop)
            driver = StepDriver(run, index, step, desktop, rules, attempt)
            result = await self._try(run, driver)
            if result is not None:
                return result
            if not driver.acting and waits < MAX_SEAT_WAITS:
                waits += 1  # taken before the try began: it runs whole after the hand back
                continue
            self.audit.record(
                "codrive_step_dropped", run.agent, {"run": run.id, "step": index, "try": attempt}
            )
            if attempt == 2:
                raise StopRun(
                    "failed",
                    f"step {index} was interrupted by a person twice (retried once after the "
                    "first hand back); the run stopped",
                )
            attempt += 1

    async def _try(self, run: CodriveRun, driver: StepDriver) -> StepResult | None:
        """One try through the pipeline: its result, or None when a person's input
        dropped it before any of its input reached the desktop."""
        desktop, index = driver.desktop, driver.index
        seats_before, desktop.delivered = desktop.seat_changes(), 0
        try:
            action = step_action(index, driver.step)
            await self.pipeline.run(desktop.surface, action, driver, NO_EVENTS)
        except DeniedPage as denied:
            raise StopRun("failed", str(denied)) from None
        except SecretField as secret:
            return await self._handoff(run, index, driver.step, desktop, why=str(secret))
        except (SeatError, SessionRefused) as exc:
            if desktop.seat_changes() == seats_before and not desktop.seat_is_human():
                raise StopRun("stopped", f"step {index}: {exc}") from None  # not approved
            if desktop.delivered:
                raise StopRun(
                    "stopped",
                    f"step {index} was interrupted by a person after part of its input "
                    "reached the desktop; it is not sent again, and the run stopped",
                ) from None
            return None
        finally:
            run.current_try = 0
        assert driver.result is not None
        driver.result.retried = driver.attempt == 2
        if desktop.seat_changes() != seats_before:  # delivered whole, then a person came
            driver.result.outcome += "; a person took the desktop after it (not sent again)"
        return driver.result

    async def _handoff(
        self, run: CodriveRun, index: int, step: Step, desktop: Desktop, why: str = ""
    ) -> StepResult:
        """Hand the desktop to a person for this step; done once they hand it back."""
        run.state = "human"
        why = why or step.description or "a login, password or payment"
        await desktop.ask_person(f"a person is needed: {why}")
        run.person_needed = why
        run.answer_now.set()
        self.audit.record("codrive_handoff", run.agent, {"run": run.id, "step": index})
        if not await desktop.wait_handback(self.handoff_timeout):
            raise StopRun(
                "failed",
                f"step {index}: nobody handed the desktop back within {self.handoff_timeout:g} s",
            )
        run.state = "running"
        return StepResult(index, "none", effect="changed", outcome="a person did this step")

    async def _wait_for_seat(self, run: CodriveRun, index: int, desktop: Desktop) -> None:
        run.state = "human"
        run.person_needed = "a person took the desktop"
        run.answer_now.set()
        if not await desktop.wait_handback(self.handoff_timeout):
            raise StopRun(
                "failed",
                f"step {index}: a person kept the desktop for {self.handoff_timeout:g} s",
            )
        run.state = "running"
