"""One action pipeline (issue 21): every input on every surface passes it, in this
order, written once.

    gate → parameters → budget → alive → seat → pending → rules → approval → bound
      → driver → timeline → answer
    └─ the manager's handle ─┘ └──────────────────── Pipeline.run ───────────────────┘

The surface manager (`kiosk.sessions.SessionManager`, `rigs.RigManager`) gates the call
(capability, permissions) and validates its parameters into a pydantic model; it then
hands the pipeline an `Action` and the surface kind's `Driver`. The pipeline checks the
budget, the seat (a person holding the surface refuses the AI's input), the driver's
rules (the URL policy), raises and waits for an approval when a rule holds the action,
then, under the surface's lock and after one last seat check, spends the action and runs
the driver; it audits the outcome and writes the timeline. A surface kind supplies only
its driver.

An approval is for one exact action (issue 22 item 1), on every surface:

1. The driver's `hold` returns the rule with the target it judged (`Hold.target`); the
   pipeline binds the tool, the parameters, the surface's id and that target
   (`bind`, `sandboxes.approval_binding.Binding`, with a sha256 digest) into the approval.
2. From the moment the approval is raised until the approved action was judged again,
   the approval is the surface's `waiting`: every other input on it (the inputs a
   person's seat refuses; screenshots still work) is refused at once, "an approval is
   pending" (`pending`; a rig's call does not queue behind the held call).
3. Approved, under the lock, the driver's `hold` reads the target again; the approval is
   spent on what it reads (`ApprovalQueue.use`): the same digest runs, anything else (a
   different element, or one no rule holds any more) is refused, "the target changed
   since it was approved", audited with both digests.
4. An approval is used once: `use` refuses a second use, and a decided approval cannot
   be decided again.

What is left between the second read and the driver's input is the time the lock holds
nothing else: a page script that swaps the element in those milliseconds is not seen.

The seat at the moment of input (issue 22 item 4). Three things make "once a take over
returns, no input of the AI's lands" true, on every surface:

1. Under `surface.lock`, nothing is awaited between the last seat check and the driver's
   first write, and the driver writes only under that lock (codrive's inputs take it too,
   `orchestrator.codrive.desktop`).
2. A take over (`Oversight.take_over`: the CLI, the console's button, or the console's
   first key or click, `viewer_input`) sets the seat to the person first, then waits for
   the lock (`Surface.settled`) before it returns or forwards the person's input: an
   input queued behind the lock finds the person's seat and is refused; the one in
   flight ends first.
3. A long input is cut so that "in flight" is short: a `type` goes in chunks
   (`orchestrator.surfaces.inputs.TYPE_CHUNK` characters) and the seat is checked before
   each; when a person took it meanwhile, the rest is not typed and the call answers
   with an error that says how many characters were (`InputInterrupted`, audited).
   Other inputs are one request each, bounded by their deadline (a navigation's is the
   longest, 30 s): that is the longest a take over can wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from orchestrator.audit import AuditLog
from orchestrator.errors import CorralError, InputInterrupted, SessionRefused, SurfaceGone
from orchestrator.recordings.recorder import Frame
from orchestrator.surfaces.answers import Answer, fit_width, with_state
from orchestrator.surfaces.base import Surface
from sandboxes.approval_binding import PENDING, TARGET_CHANGED, Binding, pending_refusal
from sandboxes.approval_rules import Hold
from sandboxes.events import CallEvents
from sandboxes.recording import mark_of

if TYPE_CHECKING:
    from orchestrator.people.approvals import Approval

PERSON_HAS_IT = "A person has the desktop; wait for hand back (screenshots still work)."


@dataclass(frozen=True, slots=True)
class Action:
    """One input, as the pipeline sees it."""

    tool: str  # the gateway tool (computer_click, browser_use ...)
    name: str  # what the budget's refusal names ("computer_click", "browser_use click")
    params: Any  # the validated parameters (a verb model for a rig)
    counted: bool  # spends one action of the budget
    is_input: bool  # refused while a person holds the seat
    step: str  # for approvals and the timeline: never typed text or a key
    details: dict[str, Any] = field(default_factory=dict)  # the audit's (who, what; never
    # the text typed): {"session", "tool"} on a kiosk, {"rig", "verb"} on a rig


@dataclass(slots=True)
class Done:
    """What the driver did: the tool answer, and how the timeline and audit tell it."""

    answer: Answer
    outcome: str = "ok"
    step: str | None = None  # a more precise step than the action's, once done
    details: dict[str, Any] = field(default_factory=dict)


class Driver(Protocol):
    """What a surface kind supplies: what its input means, and its rules."""

    refused_event: str  # the audit event of a refusal (computer_action_refused ...)
    done_event: str  # the audit event of a done action (computer_action, rig_action)
    stop_with: str  # how the budget's refusal says to end the surface
    keeps_timeline: bool  # whether its actions are written to the console's timeline

    async def rules(self, surface: Any, action: Action) -> None:
        """Refuse (SessionRefused) what a policy forbids, before any approval."""

    async def hold(self, surface: Any, action: Action) -> Hold | None:
        """The rule that makes this action wait for an operator, if any."""

    async def act(self, surface: Any, action: Action, status: str) -> Done:
        """Do the action on the surface (validated, allowed, counted already)."""


class Approver(Protocol):
    """The approval stage and the timeline (orchestrator.surfaces.oversight.Oversight)."""

    async def wait_for_operator(
        self,
        session: Any,
        tool: str,
        params: Any,
        hold: Hold,
        status: str,
        events: CallEvents,
        binding: Binding | None = None,
    ) -> Approval: ...

    def use(self, approval: Approval, now: Binding | None) -> None: ...

    def record(self, session: Surface, tool: str, step: str, outcome: str) -> Any: ...


def bind(surface: Surface, action: Action, hold: Hold) -> Binding:
    """The exact action a hold asks an operator about: tool, parameters, surface, and the
    target the rule judged."""
    params = action.params
    dumped = params.model_dump(mode="json") if isinstance(params, BaseModel) else {}
    return Binding(action.tool, dumped, surface.id, hold.target)


class Pipeline:
    def __init__(
        self,
        audit: AuditLog,
        approver: Approver | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.audit = audit
        self.approver = approver
        self.clock = clock

    async def run(
        self, surface: Surface, action: Action, driver: Driver, events: CallEvents
    ) -> Answer:
        try:
            surface.clock.check_budget(
                action.name, counted=action.counted, stop_with=driver.stop_with
            )
        except SessionRefused:
            self.audit.record(
                driver.refused_event, surface.agent, {**action.details, "why": "budget"}
            )
            raise
        self.alive(surface)
        self.seat(surface, action, driver)
        self.pending(surface, action, driver)
        # The AI's call uses the surface (`AiUse.acting`) while it reads the target and
        # while it gives its input: no recording frame or timeline thumbnail is captured.
        with surface.use.acting():
            await driver.rules(surface, action)
            hold = await driver.hold(surface, action)
        self.alive(surface)  # a target that could not be read because the surface died
        approval = None
        if hold is not None:  # the wait for an operator is no use of the surface
            approval = await self._approved(surface, action, driver, hold, events)
        try:
            with surface.use.acting():
                async with surface.lock:
                    if approval is not None:
                        await self._still_bound(surface, action, driver, approval)
                    done = await self._act(surface, action, driver)
        finally:
            if approval is not None and surface.waiting is approval:
                surface.waiting = None  # held until the approved action was judged again
        self.audit.record(driver.done_event, surface.agent, {**action.details, **done.details})
        if surface.recorder is not None:  # its mark, on the frame the timeline entry wakes
            shot = done.answer.images  # a screenshot's masked image: a frame already
            surface.recorder.poke(
                mark_of(action.params, done.step or action.step),
                frame=Frame(shot[0].png) if shot else None,
            )
        self._timeline(surface, action, driver, done.step or action.step, done.outcome[:300])
        held = None if approval is None else approval.id
        said = fit_width(done.answer, getattr(action.params, "max_width", None))
        return with_state(said, surface.summary(self.clock(), held))

    async def _approved(
        self, surface: Surface, action: Action, driver: Driver, hold: Hold, events: CallEvents
    ) -> Approval:
        """Raise the approval for exactly this action and wait for it: the surface takes
        no other input meanwhile (checked again here: another call's approval may have been
        raised while this one's target was read; nothing is awaited from here until the
        approval is the surface's `waiting`)."""
        assert self.approver is not None, "a rule held an action without an approval queue"
        self.pending(surface, action, driver)
        status = surface.status(self.clock())
        binding = bind(surface, action, hold)
        return await self.approver.wait_for_operator(
            surface, action.tool, action.params, hold, status, events, binding
        )

    async def _still_bound(
        self, surface: Surface, action: Action, driver: Driver, approval: Approval
    ) -> None:
        """After the approval, under the lock: read the target again (the driver's own
        rule, `hold`), and refuse (audited) unless it is the action approved, exactly; the
        approval is spent either way (used once)."""
        assert self.approver is not None
        again = await driver.hold(surface, action)
        self.alive(surface)
        now = None if again is None else bind(surface, action, again)
        try:
            self.approver.use(approval, now)
        except SessionRefused:
            why = {
                "why": TARGET_CHANGED,
                "approval": approval.id,
                "approved": approval.digest,
                "now": None if now is None else now.digest,
            }
            self.audit.record(driver.refused_event, surface.agent, {**action.details, **why})
            self._timeline(surface, action, driver, action.step, f"refused: {TARGET_CHANGED}")
            raise

    async def _act(self, surface: Surface, action: Action, driver: Driver) -> Done:
        """Under the lock: the seat, the budget spent, the driver's input."""
        self.seat(surface, action, driver)
        if action.counted:
            surface.clock.spend(self.clock())
        try:
            done = await driver.act(surface, action, surface.status(self.clock()))
            if surface.broken:  # it died under the input: its answer is not to be trusted
                raise SurfaceGone(
                    f"The {surface.kind} stopped answering during this action; whether it "
                    "took effect is not known."
                )
            return done
        except InputInterrupted as exc:
            why = {"why": "a person took the desktop mid-input", "typed": exc.typed}
            self.audit.record(driver.refused_event, surface.agent, {**action.details, **why})
            self._timeline(surface, action, driver, action.step, f"interrupted: {exc}"[:300])
            raise
        except CorralError as exc:
            self._timeline(surface, action, driver, action.step, f"failed: {exc}"[:300])
            raise

    @staticmethod
    def alive(surface: Surface) -> None:
        """A surface whose channel failed (its container died, its agent stopped
        answering) is not a question for an operator: the call answers at once, before
        any rule reads it or approval waits on it, and the surface's manager ends it and
        says why (`SurfaceGone` is a CorralError: `_end_if_broken`). Checked at the start
        and after each read of the target (the read is what finds a dead channel)."""
        if surface.egress_gone:
            raise SurfaceGone("Nothing was done: the session's egress proxy is gone.")
        if surface.broken:
            raise SurfaceGone(f"Nothing was done: the {surface.kind} stopped answering.")

    def seat(self, surface: Surface, action: Action, driver: Driver) -> None:
        """Refuse the AI's input at once while a person holds the surface: the one seat
        check, made before the approval and again under the lock right before input."""
        if not action.is_input or surface.controller != "human":
            return
        why = "a person has the desktop"
        self.audit.record(driver.refused_event, surface.agent, {**action.details, "why": why})
        self._timeline(surface, action, driver, action.step, "refused: a person has the desktop")
        raise SessionRefused(PERSON_HAS_IT)

    def pending(self, surface: Surface, action: Action, driver: Driver) -> None:
        """Refuse the AI's input at once while an approval is pending on the surface (the
        same inputs a person's seat refuses; screenshots still work): what was approved
        is what is there when the approved action runs. The one check, made before the
        rules and again right before an approval is raised (a rig's call made while an
        approval is pending runs the pipeline at once instead of queueing behind the held
        call, `rigs.RigManager`)."""
        waiting = surface.waiting
        if not action.is_input or waiting is None:
            return
        why = {"why": PENDING, "approval": waiting.id}
        self.audit.record(driver.refused_event, surface.agent, {**action.details, **why})
        self._timeline(surface, action, driver, action.step, f"refused: {PENDING}")
        raise SessionRefused(pending_refusal(waiting.step, waiting.id))

    def _timeline(
        self, surface: Surface, action: Action, driver: Driver, step: str, outcome: str
    ) -> None:
        if driver.keeps_timeline and self.approver is not None:
            self.approver.record(surface, action.tool, step, outcome)
        elif surface.recorder is not None:  # no console timeline: the recording's own
            surface.recorder.note(
                {"tool": action.tool, "step": step, "outcome": outcome, "actor": "ai"}
            )
