"""The approval queue (orchestrator/people/approvals.py): decided by a named operator, denied
at its timeout, never approved by default; every decision audited once."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from orchestrator.audit import AuditLog
from orchestrator.errors import ApprovalError, AuditUnavailable
from orchestrator.people.approvals import WITHDRAWN, Approval, ApprovalQueue
from orchestrator.people.clock import SteadyWall
from sandboxes.approval_rules import Hold
from tests.fakes import FakeClock

pytestmark = [pytest.mark.unit, pytest.mark.anyio]

HOLD = Hold("confirm_words: pay", "purchase", "Click the button “Pay”")


def events(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def queue(tmp_path: Path, clock: FakeClock, timeout: int = 120) -> ApprovalQueue:
    return ApprovalQueue(AuditLog(tmp_path / "audit.jsonl"), timeout, clock=clock)


def raised(q: ApprovalQueue, tool: str = "computer_click") -> Approval:
    return q.raise_(
        agent="alice",
        session="s1",
        tool=tool,
        step="left click at 1,2",
        hold=HOLD,
        screenshot_png=b"png",
    )


async def test_an_approved_call_goes_on_and_the_decision_is_audited_once(tmp_path: Path) -> None:
    clock = FakeClock()
    q = queue(tmp_path, clock)
    approval = raised(q)
    clock.advance(3)
    async with anyio.create_task_group() as tg:
        tg.start_soon(q.wait, approval)
        await anyio.wait_all_tasks_blocked()
        q.decide(approval.id, "olga", True, "")
    assert approval.state == "approved" and approval.decided_by == "olga"
    decided = [e for e in events(tmp_path / "audit.jsonl") if e["event"] == "approval_decided"]
    assert len(decided) == 1
    assert decided[0]["details"] == {
        "approval": approval.id,
        "session": "s1",
        "operator": "olga",
        "decision": "approved",
        "reason": None,
        "latency_ms": 3000,
    }


async def test_a_pending_approval_is_denied_at_its_timeout_never_approved(tmp_path: Path) -> None:
    clock = FakeClock()
    q = queue(tmp_path, clock, timeout=5)
    approval = raised(q, "computer_navigate")
    clock.advance(5)
    await q.wait(approval)  # the clock is past the expiry: no real waiting
    assert approval.state == "expired" and approval.decided_by is None
    with pytest.raises(ApprovalError, match="already expired"):
        q.decide(approval.id, "olga", True)
    decided = [e for e in events(tmp_path / "audit.jsonl") if e["event"] == "approval_decided"]
    assert [d["details"]["decision"] for d in decided] == ["expired"]  # type: ignore[index]


async def test_the_expiry_pass_denies_what_nobody_waits_on(tmp_path: Path) -> None:
    clock = FakeClock()
    q = queue(tmp_path, clock, timeout=5)
    approval = raised(q)
    q.expire_due()
    assert approval.state == "pending"
    clock.advance(6)
    q.expire_due()
    assert approval.state == "expired"


async def test_unknown_decided_and_too_long_reasons_are_refused(tmp_path: Path) -> None:
    q = queue(tmp_path, FakeClock())
    with pytest.raises(ApprovalError, match="no approval"):
        q.decide("ap-nope", "olga", True)
    approval = raised(q)
    with pytest.raises(ApprovalError, match="at most 500"):
        q.decide(approval.id, "olga", False, "x" * 501)
    q.decide(approval.id, "olga", False, "not now")
    assert approval.state == "denied" and approval.reason == "not now"
    with pytest.raises(ApprovalError, match="already denied by olga"):
        q.decide(approval.id, "pete", True)


async def test_an_ended_session_cancels_what_it_waited_for(tmp_path: Path) -> None:
    q = queue(tmp_path, FakeClock())
    approval = raised(q)
    q.cancel_session("s1", "the session ended")
    assert approval.state == "cancelled"
    assert q.pending() == []


@pytest.mark.parametrize("step", [-3600, 3600], ids=["an-hour-back", "an-hour-on"])
async def test_a_step_of_the_machines_clock_moves_no_expiry(tmp_path: Path, step: int) -> None:
    """The wall clock (one the test controls, never the machine's) stepped by an hour
    after the approval was raised: it neither expires at once nor waits an hour more;
    it expires when its timeout has passed on the monotonic clock, and not before."""
    wall, mono = FakeClock(1_800_000_000.0), FakeClock(50.0)
    q = ApprovalQueue(AuditLog(tmp_path / "audit.jsonl"), 5, clock=SteadyWall(wall, mono))
    approval = raised(q)
    wall.advance(step)
    mono.advance(4)
    q.expire_due()
    assert approval.state == "pending"
    mono.advance(1)
    await q.wait(approval)  # past its timeout: no real waiting
    assert approval.state == "expired"
    assert approval.expires_at - approval.created_at == 5


async def test_a_cancelled_wait_withdraws_its_approval(tmp_path: Path) -> None:
    """The held call went away (its client hung up): nobody is left to answer for."""
    q = queue(tmp_path, FakeClock())
    approval = raised(q)
    async with anyio.create_task_group() as tg:
        tg.start_soon(q.wait, approval)
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()
    assert approval.state == "cancelled" and approval.reason == WITHDRAWN
    assert q.pending() == []
    decided = [e for e in events(tmp_path / "audit.jsonl") if e["event"] == "approval_decided"]
    assert [e["details"]["decision"] for e in decided] == ["cancelled"]


async def test_an_approval_the_audit_cannot_hold_is_not_given(tmp_path: Path) -> None:
    """Written before it takes effect: the operator is told, the call stays held, and a
    denial still stands without the audit (it releases nothing)."""
    path = tmp_path / "audit.jsonl"
    q = queue(tmp_path, FakeClock())
    first, second = raised(q), raised(q)
    path.unlink()
    path.mkdir()  # the log cannot be written now
    with pytest.raises(AuditUnavailable):
        q.decide(first.id, "olga", True, "")
    assert first.state == "pending" and not first.done.is_set()
    q.decide(second.id, "olga", False, "")
    assert second.state == "denied"
