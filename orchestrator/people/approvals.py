"""The approval queue (SPEC S6.1): held actions wait here for an operator.

An approval is raised by a rule (sandboxes.approval_rules), never by the model, and
answered by a named operator from the CLI (`corral approvals`, signed loopback) or the
console. Nobody answering means denied: at `[approvals] timeout_seconds` a pending
approval expires, also when no operator is connected; nothing is ever approved by
default. Every decision, the expiry included, is one audit event with the operator's
name (none for an expiry), the decision, the reason and the latency.

An approval is for one exact action (issue 22 item 1): it holds the tool, the
parameters, the surface and the target as read (`sandboxes.approval_binding.Binding`)
with their digest, and that is what the console and the CLI show (`public`); the agent's
own words, when it gave any, are in the description, labelled as its (a codrive step's
"(the agent says: …)", `sandboxes.codrive_rules.step_hold`). It is used once
(`use`): the approved action, judged again right before it runs, either is the bound one
and runs, or is refused; no second use can release another action.
"""

from __future__ import annotations

import logging
import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field, fields
from typing import Any, Literal

import anyio

from orchestrator.audit import AuditLog
from orchestrator.errors import ApprovalError, AuditUnavailable, SessionRefused
from orchestrator.people.clock import steady_wall
from sandboxes.approval_binding import Binding, changed, shown_params, target_changed_refusal
from sandboxes.approval_rules import Category, Hold

State = Literal["pending", "approved", "denied", "expired", "cancelled"]
KEEP_DECIDED = 200  # decided approvals kept for the console and `approvals list`
MAX_REASON_CHARS = 500
WITHDRAWN = "withdrawn: the agent's call ended before a decision (its client went away)"

logger = logging.getLogger("corral.gateway")


@dataclass
class Approval:
    id: str
    agent: str
    session: str
    tool: str
    step: str  # what the held call does, e.g. "click at 200,100" (never typed text)
    category: Category
    rule: str
    description: str
    created_at: float  # wall clock, seconds
    expires_at: float
    screenshot_png: bytes | None = None
    # The exact action (None: an approval no single input binds, a codrive step's).
    binding: Binding | None = field(default=None, repr=False)
    state: State = "pending"
    decided_by: str | None = None
    reason: str | None = None
    decided_at: float | None = None
    used_at: float | None = None  # when the approved action was judged again, once
    done: anyio.Event = field(default_factory=anyio.Event, repr=False)

    @property
    def digest(self) -> str | None:
        return None if self.binding is None else self.binding.digest

    def public(self) -> dict[str, Any]:
        """What the CLI and the console show (the screenshot is fetched on its own): the
        bound action as it is held, its parameters without typed text."""
        shown = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _UNSHOWN}
        bound = self.binding
        action = None
        if bound is not None:
            action = bound.as_json() | {"params": shown_params(bound.params)}
        return shown | {
            "has_screenshot": self.screenshot_png is not None,
            "action": action,
            "digest": self.digest,
        }


_UNSHOWN = ("screenshot_png", "done", "binding")  # what `Approval.public` leaves out


@dataclass(eq=False)
class ApprovalQueue:
    """Pending and recently decided approvals, in the gateway's memory."""

    audit: AuditLog
    timeout_seconds: int
    _: KW_ONLY
    clock: Callable[[], float] = steady_wall  # a step of the machine's clock moves no expiry
    _all: OrderedDict[str, Approval] = field(default_factory=OrderedDict, init=False, repr=False)

    # ------------------------------------------------------------------ raise / wait
    def raise_(
        self,
        *,
        agent: str,
        session: str,
        tool: str,
        step: str,
        hold: Hold,
        screenshot_png: bytes | None,
        binding: Binding | None = None,
    ) -> Approval:
        now = self.clock()
        approval = Approval(
            id="ap-" + secrets.token_hex(5),
            agent=agent,
            session=session,
            tool=tool,
            step=step,
            category=hold.category,
            rule=hold.rule,
            description=hold.description,
            created_at=now,
            expires_at=now + self.timeout_seconds,
            screenshot_png=screenshot_png,
            binding=binding,
        )
        self.audit.record(  # on record before any operator can see it
            "approval_raised",
            agent,
            {
                "approval": approval.id,
                "session": session,
                "tool": tool,
                "step": step,
                "category": hold.category,
                "rule": hold.rule,
                "timeout_seconds": self.timeout_seconds,
                "digest": approval.digest,
            },
        )
        self._all[approval.id] = approval
        self._trim()
        return approval

    async def wait(self, approval: Approval) -> Approval:
        """Until an operator decides, or the approval expires (then it is denied). A wait
        cancelled (the agent's call went away: its client hung up, its front was killed)
        withdraws the approval, so no operator answers a question nobody asks any more."""
        try:
            while approval.state == "pending":
                left = approval.expires_at - self.clock()
                if left <= 0:
                    self._settle(approval, "expired", None, self._expiry_reason())
                    break
                with anyio.move_on_after(left):
                    await approval.done.wait()
        except anyio.get_cancelled_exc_class():
            self.withdraw(approval)
            raise
        return approval

    def withdraw(self, approval: Approval) -> None:
        """A pending approval whose held call went away: cancelled, with why (the one
        place for it, whether the call went while waiting or before)."""
        if approval.state == "pending":
            self._settle(approval, "cancelled", None, WITHDRAWN)

    def _expiry_reason(self) -> str:
        return f"no operator answered within {self.timeout_seconds} s"

    # ------------------------------------------------------------------ decide
    def decide(self, approval_id: str, operator: str, approve: bool, reason: str = "") -> Approval:
        approval = self._all.get(approval_id)
        if approval is None:
            raise ApprovalError(f"no approval {approval_id!r} (see `corral approvals list`)")
        if approval.state != "pending":
            raise ApprovalError(
                f"approval {approval_id} is already {approval.state}"
                + (f" by {approval.decided_by}" if approval.decided_by else "")
            )
        if len(reason) > MAX_REASON_CHARS:
            raise ApprovalError(f"reason: at most {MAX_REASON_CHARS} characters")
        if self.clock() >= approval.expires_at:
            self._settle(approval, "expired", None, self._expiry_reason())
            raise ApprovalError(f"approval {approval_id} expired before the decision")
        self._settle(approval, "approved" if approve else "denied", operator, reason or None)
        return approval

    def use(self, approval: Approval, now: Binding | None) -> None:
        """Spend an approved approval on the action about to run, judged again now (None:
        no rule holds it any more): once only, and only for the bound action. Raises
        ApprovalError when it is not approved or was used; SessionRefused when the action
        is not the one approved (the approval is spent then too). Audited either way."""
        if approval.state != "approved" or approval.used_at is not None:
            used = "was already used" if approval.used_at is not None else f"is {approval.state}"
            raise ApprovalError(f"approval {approval.id} {used}; it releases no action")
        approval.used_at = self.clock()
        moved = changed(approval.digest or "", now)
        self.audit.record(
            "approval_used",
            approval.agent,
            {
                "approval": approval.id,
                "session": approval.session,
                "digest": approval.digest,
                "now": None if now is None else now.digest,
                "target_changed": moved,
            },
        )
        if moved:
            raise SessionRefused(target_changed_refusal(approval.id))

    def cancel_session(self, session: str, why: str) -> None:
        """Deny what a session still waits for when it ends (its calls are gone)."""
        for approval in list(self._all.values()):
            if approval.session == session and approval.state == "pending":
                self._settle(approval, "cancelled", None, why)

    def _settle(
        self, approval: Approval, state: State, operator: str | None, reason: str | None
    ) -> None:
        """Written to the audit before it takes effect: an approval the audit cannot hold
        is not given (AuditUnavailable to the operator); a denial, expiry or withdrawal
        stands without it (it releases nothing)."""
        now = self.clock()
        try:
            self.audit.record(
                "approval_decided",
                approval.agent,
                {
                    "approval": approval.id,
                    "session": approval.session,
                    "operator": operator,
                    "decision": state,
                    "reason": reason,
                    "latency_ms": int((now - approval.created_at) * 1000),
                },
            )
        except AuditUnavailable:
            if state == "approved":
                raise
            logger.warning("approval %s %s, not on record: the audit log fails", approval.id, state)
        approval.state = state
        approval.decided_by = operator
        approval.reason = reason
        approval.decided_at = now
        approval.done.set()

    # ------------------------------------------------------------------ reads
    def get(self, approval_id: str) -> Approval | None:
        return self._all.get(approval_id)

    def pending(self, agent: str | None = None) -> list[Approval]:
        return [
            a
            for a in self._all.values()
            if a.state == "pending" and (agent is None or a.agent == agent)
        ]

    def recent(self) -> list[Approval]:
        """Every kept approval, newest first."""
        return list(reversed(self._all.values()))

    def expire_due(self) -> None:
        """Expire what is past its time even if nobody waits on it (a backstop: the held
        call's own wait expires it first)."""
        now = self.clock()
        for approval in list(self._all.values()):
            if approval.state == "pending" and now >= approval.expires_at:
                self._settle(approval, "expired", None, self._expiry_reason())

    def _trim(self) -> None:
        decided = [k for k, a in self._all.items() if a.state != "pending"]
        for key in decided[: max(0, len(decided) - KEEP_DECIDED)]:
            del self._all[key]
