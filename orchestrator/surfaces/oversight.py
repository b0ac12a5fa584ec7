"""People over kiosk sessions (SPEC S6): held actions, take over and hand back, the
timeline. Used by the session handler (`sessions`), the signed admin API (`corral
approvals`, `corral sessions`) and the console.

- A click or navigation a rule covers (sandboxes.approval_rules) waits for an operator;
  the held call answers only after the decision.
- While a person holds the desktop, the AI's input tools are refused at once; its
  screenshots still work (masked). Input from a console viewer while the AI holds the
  seat starts a take over by itself, before that input is forwarded.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import anyio

from orchestrator.audit import AuditLog
from orchestrator.errors import CorralError, SeatError, SessionRefused
from orchestrator.people.approvals import Approval, ApprovalQueue
from orchestrator.people.timeline import (
    TimelineEntry,
    new_entry,
    settle_superseded,
    thumbnail,
)
from orchestrator.recordings.recorder import Frame
from orchestrator.recordings.use import QUIET_SECONDS
from orchestrator.surfaces.base import Surface
from orchestrator.surfaces.desktop import DesktopRig
from orchestrator.surfaces.kiosk.session import KioskSession
from orchestrator.surfaces.pipeline import PERSON_HAS_IT
from orchestrator.surfaces.registry import Surfaces
from orchestrator.surfaces.screenshots import masked_screenshot
from sandboxes.approval_binding import Binding
from sandboxes.approval_rules import Hold
from sandboxes.events import NO_EVENTS, CallEvents
from sandboxes.step_text import step_of

logger = logging.getLogger("corral.oversight")

PROGRESS_EVERY_SECONDS = 2.0


Seat = Surface
"""What a person can watch and take over: any surface, named by `Surface.seat`."""


class Oversight:
    def __init__(
        self,
        surfaces: Surfaces,
        audit: AuditLog,
        approvals: ApprovalQueue,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.surfaces = surfaces
        self.audit = audit
        self.approvals = approvals
        self.clock = clock
        self._last_input: dict[str, float] = {}  # session id -> monotonic time of an action

    def seats(self) -> dict[str, Seat]:
        """Every seat by its one name (kiosk sessions by agent, rigs by AGENT.KIND)."""
        return self.surfaces.seats()

    # ------------------------------------------------------------------ the AI's calls
    async def wait_for_operator(
        self,
        session: Seat,
        tool: str,
        params: Any,
        hold: Hold,
        status: str,
        events: CallEvents = NO_EVENTS,
        binding: Binding | None = None,
    ) -> Approval:
        """Raise the approval for the exact action `binding` says (with the masked screen
        as it is now) and wait for the decision; return it when approved, raise
        SessionRefused naming the rule otherwise. The approval is the surface's `waiting`
        from the moment it is raised (nothing is awaited before: the pipeline refuses other
        input while it is set) until the pipeline has judged the approved action again, or
        until it was refused. `events` hears "waiting for an operator" with the time left."""
        step = step_of(tool, params)
        approval = self.approvals.raise_(
            agent=session.agent,
            session=session.id,
            tool=tool,
            step=step,
            hold=hold,
            screenshot_png=None,
            binding=binding,
        )
        session.waiting = approval
        try:
            entry = await self._raised(session, approval, hold, status, events)
            await self._decided(approval, hold, events)
        except BaseException:
            session.waiting = None
            raise
        finally:
            self.approvals.withdraw(approval)  # the call itself was cancelled, if pending
        entry.outcome = f"{approval.state} ({hold.rule})"
        if session.recorder is not None:
            decided = {"approval": approval.id, "state": approval.state}
            session.recorder.note(
                {"event": "approval_decided", "operator": approval.decided_by} | decided
            )
        await self._told(approval, events)
        if approval.state == "approved" and session.controller != "human":
            return approval  # the pipeline clears `waiting` once it judged the action again
        session.waiting = None
        if approval.state == "approved":
            raise SessionRefused(f"Approved, but {PERSON_HAS_IT[0].lower()}{PERSON_HAS_IT[1:]}")
        raise SessionRefused(self._not_done(approval, hold))

    async def _raised(
        self, session: Seat, approval: Approval, hold: Hold, status: str, events: CallEvents
    ) -> TimelineEntry:
        """The raised approval's screenshot (the masked screen now), timeline entry and
        log event."""
        if isinstance(session, KioskSession | DesktopRig):  # a screen behind an agent channel
            approval.screenshot_png = (await masked_screenshot(session, status)).png
        png = approval.screenshot_png
        held = f"held for an operator ({hold.rule})"
        entry = self.record(session, approval.tool, approval.step, held, png=png, approval=True)
        await events.log(
            "info",
            "approval_raised",
            {"approval": approval.id, "category": hold.category, "rule": hold.rule},
        )
        return entry

    async def _told(self, approval: Approval, events: CallEvents) -> None:
        decided = {
            "approval": approval.id,
            "decision": approval.state,
            "operator": approval.decided_by,
        }
        await events.log(
            "info" if approval.state == "approved" else "warning", "approval_decided", decided
        )

    def use(self, approval: Approval, now: Binding | None) -> None:
        """Spend the approval on the action judged again now (ApprovalQueue.use)."""
        self.approvals.use(approval, now)

    async def _decided(self, approval: Approval, hold: Hold, events: CallEvents) -> None:
        """Wait for the decision, telling `events` the time left every few seconds."""
        async with anyio.create_task_group() as tg:

            async def tell() -> None:
                while True:
                    left = max(0.0, approval.expires_at - self.approvals.clock())
                    await events.progress(
                        "approval",
                        f"waiting for an operator ({hold.rule}): {int(left)} s left",
                        remaining=left,
                    )
                    await anyio.sleep(PROGRESS_EVERY_SECONDS)

            tg.start_soon(tell)
            await self.approvals.wait(approval)
            tg.cancel_scope.cancel()

    def _not_done(self, approval: Approval, hold: Hold) -> str:
        """Why a held action that was not approved was not done."""
        if approval.state == "denied":
            why = f": {approval.reason}" if approval.reason else ""
            return (
                f"Operator {approval.decided_by} denied this action ({hold.rule}){why}. "
                "It was not done."
            )
        return (
            f"This action needs an operator's approval ({hold.rule}) and "
            f"{'the session ended' if approval.state == 'cancelled' else 'nobody approved it'} "
            f"within {self.approvals.timeout_seconds} s ({approval.state}), so it was not done."
        )

    # ------------------------------------------------------------------ the timeline
    def record(
        self,
        session: Seat,
        tool: str,
        step: str,
        outcome: str,
        *,
        actor: str = "ai",
        png: bytes | None = None,
        approval: bool = False,
    ) -> TimelineEntry:
        """A timeline entry (and a line of the surface's recording; `approval`: it is an
        approval being raised, counted as one)."""
        entry = new_entry(tool, step, outcome, actor, png)
        session.timeline.append(entry)
        self._last_input[session.id] = self.clock()
        if session.recorder is not None:  # a screenshot's own masked image is a frame
            shown = {k: v for k, v in entry.public().items() if k != "thumb"}
            frame = None if png is None else Frame(png)
            session.recorder.note(shown, frame, approval=approval)
            entry.noted = session.recorder.notes
        return entry

    async def thumbnails_forever(self) -> None:
        """Give the newest timeline entry of each quiet session its thumbnail."""
        while True:
            await anyio.sleep(QUIET_SECONDS / 2)
            for session in list(self.seats().values()):
                try:
                    await self._thumbnail(session)
                except Exception:  # a thumbnail is never worth a gateway task
                    logger.exception("thumbnail for session %s failed", session.id)

    async def _thumbnail(self, session: Seat) -> None:
        if not session.timeline:
            return
        newest = session.timeline[-1]
        if newest.thumb_state != "pending":
            return
        if self.clock() - self._last_input.get(session.id, 0.0) < QUIET_SECONDS:
            return
        settle_superseded(list(session.timeline), newest)
        png = newest.source_png or await self._screen_after(session, newest)
        if png is None:
            return
        newest.thumb = await anyio.to_thread.run_sync(thumbnail, png)
        newest.thumb_state = "ready"
        newest.source_png = None

    async def _screen_after(self, session: Seat, entry: TimelineEntry) -> bytes | None:
        """The masked screen after `entry`: its recorder's frame when it is recorded (the
        recorder takes one after every timeline line: the same screen is not captured
        twice), else a screenshot of its own; None for now (the recorder's frame is still
        to come, or a call of the AI's uses the surface) or at all (no agent channel)."""
        recorder = session.recorder
        if recorder is not None and not (recorder.stopped or recorder.closed):
            frame = recorder.frame_since(entry.noted)
            return None if frame is None else frame.png
        if not isinstance(session, KioskSession | DesktopRig):
            return None  # no agent channel to screenshot through: no thumbnail
        if session.use.busy:  # a screenshot now would wait on the call, then hold it
            return None
        return (await masked_screenshot(session, "")).png

    # ------------------------------------------------------------------ the seat
    def _session(self, name: str) -> Seat:
        return self.surfaces.get(name)

    async def take_over(self, agent: str, operator: str, *, viewer: str | None, how: str) -> None:
        """Give the seat to `operator`; once this returns, no input of the AI's lands: the
        seat is set first (every input checks it under the surface's lock, and a long type
        between its chunks), then the input in flight, if any, is waited out
        (`Surface.settled`; see orchestrator.surfaces.pipeline)."""
        session = self._session(agent)
        if session.controller == "human":
            if session.holder == operator:
                session.holder_viewer = viewer or session.holder_viewer
                await session.settled()  # a take over of this person's still settling
                return
            raise SeatError(f"{session.holder} has the desktop of {agent}; ask them to hand back")
        self._took(session, agent, operator, viewer, how)
        await session.settled()

    def _took(self, session: Seat, agent: str, operator: str, viewer: str | None, how: str) -> None:
        session.controller, session.holder, session.holder_viewer = "human", operator, viewer
        session.moved()
        self.audit.record(
            "takeover",
            session.agent,
            {"session": session.id, "seat": agent, "operator": operator, "how": how},
        )
        self.record(
            session, "takeover", f"{operator} took the desktop ({how})", "ok", actor=operator
        )

    async def hand_back(self, agent: str, operator: str) -> None:
        """Give the seat back to the AI, the clipboard and primary selection cleared first
        (what the person copied, an OTP, is not the AI's to read or paste)."""
        session = self._session(agent)
        if session.controller != "human":
            raise SeatError(f"the AI already has the desktop of {agent}")
        cleared = await self._forget_clipboard(session)
        if session.controller != "human":
            raise SeatError(f"the AI already has the desktop of {agent}")  # handed back meanwhile
        holder = session.holder
        session.controller, session.holder, session.holder_viewer = "ai", None, None
        session.needs_person = None
        session.moved()
        self.audit.record(
            "handback",
            session.agent,
            {
                "session": session.id,
                "seat": agent,
                "operator": operator,
                "holder": holder,
                "clipboard_cleared": cleared,
            },
        )
        self.record(
            session, "handback", f"{operator} handed the desktop back", "ok", actor=operator
        )

    async def _forget_clipboard(self, session: Seat) -> bool:
        """Clear the surface's clipboard under its lock; False when its channel failed."""
        try:
            async with session.lock:
                await session.forget_clipboard()
        except CorralError:
            return False
        return True

    async def stop(self, agent: str, operator: str) -> None:
        await self.surfaces.end(agent, f"stopped by operator {operator}")

    async def viewer_input(
        self, agent: str, operator: str, viewer: str, *, take: bool = True
    ) -> bool:
        """A console viewer's input event (RFB key or pointer): forward it only when this
        viewer holds the seat; when the AI holds it, input that acts (`take`: a key or a
        button, not a mere hover) takes the seat now, and is forwarded once the AI's
        input in flight has ended (take_over returns then)."""
        session = self.seats().get(agent)
        if session is None:
            return False
        if session.controller == "human":
            if session.holder == operator and session.holder_viewer is None:
                session.holder_viewer = viewer  # taken from the CLI or a button: this view
            forwarded = session.holder == operator and session.holder_viewer == viewer
            if forwarded and session.recorder is not None:
                session.recorder.poke()  # the person's input changes the screen too
            return forwarded
        if not take:
            return False
        await self.take_over(agent, operator, viewer=viewer, how="console input")
        return True

    def viewer_left(self, agent: str, viewer: str) -> None:
        """A console connection closed: its seat stays taken (hand back is explicit), but
        no other connection's input is forwarded until the holder reconnects."""
        session = self.seats().get(agent)
        if session is not None and session.holder_viewer == viewer:
            session.holder_viewer = None

    # ------------------------------------------------------------------ reads
    def sessions_view(self) -> list[dict[str, Any]]:
        out = []
        for agent, session in sorted(self.seats().items()):
            if session.controller == "human":
                state = f"human ({session.holder})"
            elif session.needs_person is not None:
                state = session.needs_person
            elif session.waiting is not None:
                state = "waiting approval"
            else:
                state = "AI"
            kiosk = session.kind == "kiosk"
            out.append(
                {
                    "agent": agent,
                    "owner": session.agent,
                    "session": session.id,
                    "kind": "kiosk" if kiosk else f"{session.kind} rig of {session.agent}",
                    "needs_person": session.needs_person,
                    "started_at": session.started_at,
                    "actions_used": session.clock.used,
                    "actions_left": max(0, session.clock.max_actions - session.clock.used),
                    "state": state,
                    "controller": session.controller,
                    "holder": session.holder,
                    "size": [session.width, session.height],
                }
            )
        return out
