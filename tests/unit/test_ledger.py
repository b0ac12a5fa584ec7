"""The ledger of work in flight (orchestrator.ledger): it follows the audit, and the next
gateway closes what a dead one left open. The real gateway killed with SIGKILL is
tests/faults/test_gateway_killed.py; here a real process is killed too, with no Docker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.audit import AuditLog
from orchestrator.backends.owner import Owner
from orchestrator.ledger import Ledger, close_left_work

pytestmark = pytest.mark.unit


def followed(tmp_path: Path) -> tuple[AuditLog, Ledger]:
    audit = AuditLog(tmp_path / "audit.jsonl")
    ledger = Ledger(tmp_path / "inflight", Owner.current())
    audit.followers.append(ledger.follow)
    return audit, ledger


def on_disk(ledger: Ledger) -> dict[str, Any]:
    work: dict[str, Any] = json.loads(ledger.path.read_text())["work"]
    return work


def test_work_is_on_disk_while_open_and_gone_once_closed(tmp_path: Path) -> None:
    audit, ledger = followed(tmp_path)
    audit.record("rig_started", "alice", {"rig": "r1", "surface": "desktop"})
    audit.record("approval_raised", "alice", {"approval": "ap-1", "session": "r1", "step": "x"})
    audit.record("codrive_run_started", "alice", {"run": "run-1", "app": "galculator", "steps": 3})
    audit.record("codrive_step", "alice", {"run": "run-1", "step": 0})
    audit.record("takeover", "alice", {"session": "r1", "seat": "r1", "operator": "olga"})
    work = on_disk(ledger)
    assert set(work) == {"rig:r1", "approval:ap-1", "codrive_run:run-1", "take_over:r1"}
    assert work["codrive_run:run-1"]["steps_done"] == 1
    assert "step" not in work["approval:ap-1"]  # only ids and counts are kept

    audit.record("approval_decided", "alice", {"approval": "ap-1", "decision": "denied"})
    audit.record("codrive_run_ended", "alice", {"run": "run-1", "state": "stopped"})
    assert set(on_disk(ledger)) == {"rig:r1", "take_over:r1"}
    # a take over ends with its surface too (stopped while a person held it)
    audit.record("rig_ended", "alice", {"rig": "r1", "why": "closed"})
    assert on_disk(ledger) == {}
    ledger.close()
    assert not ledger.path.exists()


def test_a_hand_back_closes_only_its_own_seats_take_over(tmp_path: Path) -> None:
    audit, ledger = followed(tmp_path)
    for session in ("k1", "k2"):
        audit.record("takeover", "bob", {"session": session, "seat": "bob", "operator": "o"})
    audit.record("handback", "bob", {"session": "k1", "seat": "bob", "operator": "o"})
    assert set(on_disk(ledger)) == {"take_over:k2"}


def test_a_dead_gateways_work_is_closed_once_and_a_live_ones_is_left(tmp_path: Path) -> None:
    audit, ledger = followed(tmp_path)
    audit.record("approval_raised", "alice", {"approval": "ap-1", "session": "r1"})
    audit.record("codrive_run_started", "alice", {"run": "run-1", "app": "galculator", "steps": 4})
    audit.record("codrive_step", "alice", {"run": "run-1", "step": 0})
    audit.record("takeover", "alice", {"session": "r1", "seat": "r1", "operator": "olga"})
    audit.followers.clear()
    start = ledger.owner.start_time

    alive = close_left_work(ledger.directory, audit, start_time_of=lambda _pid: start)
    assert alive == [] and ledger.path.exists()

    closed = close_left_work(ledger.directory, audit, start_time_of=lambda _pid: None)
    assert {c.kind for c in closed} == {"approval", "codrive_run", "take_over"}
    assert not ledger.path.exists()
    lines = [e for e in audit.read() if e["details"].get("recovered")]
    by_event = {e["event"]: e["details"] for e in lines}
    assert by_event["approval_decided"]["decision"] == "cancelled"
    assert "nothing is approved by default" in by_event["approval_decided"]["reason"]
    run = by_event["codrive_run_ended"]
    assert run["state"] == "failed" and run["steps_done"] == 1
    assert "1 of 4 steps done" in run["reason"] and "gateway stopped" in run["reason"]
    assert by_event["takeover_ended"]["operator"] == "olga"
    assert close_left_work(ledger.directory, audit) == []  # once only


def test_an_unreadable_ledger_is_left_and_others_are_still_closed(tmp_path: Path) -> None:
    audit, ledger = followed(tmp_path)
    audit.record("rig_started", "alice", {"rig": "r9"})
    audit.followers.clear()
    bad = ledger.directory / "torn.json"
    bad.write_text('{"owner": ')
    closed = close_left_work(ledger.directory, audit, start_time_of=lambda _pid: None)
    assert [c.kind for c in closed] == ["rig"] and bad.exists()


def test_a_failing_follower_never_fails_the_record(tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "audit.jsonl")

    def broken(*_: Any) -> None:
        raise RuntimeError("follower broke")

    audit.followers.append(broken)
    audit.record("rig_started", "alice", {"rig": "r1"})
    assert [e["event"] for e in audit.read()] == ["rig_started"]


CHILD = """
import os, sys
from pathlib import Path
from orchestrator.audit import AuditLog
from orchestrator.ledger import Ledger
from orchestrator.backends.owner import Owner
root = Path(sys.argv[1])
audit = AuditLog(root / "audit.jsonl")
ledger = Ledger(root / "inflight", Owner.current())
audit.followers.append(ledger.follow)
audit.record("approval_raised", "alice", {"approval": "ap-7", "session": "k1"})
print("open", flush=True)
sys.stdin.read()
"""


def test_a_process_killed_with_sigkill_leaves_work_the_next_one_closes(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    with child:
        assert child.stdout is not None and child.stdout.readline() == "open\n"
        audit = AuditLog(tmp_path / "audit.jsonl")
        assert close_left_work(tmp_path / "inflight", audit) == []  # it still runs
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    (closed,) = close_left_work(tmp_path / "inflight", audit)
    assert closed.kind == "approval" and closed.entry["approval"] == "ap-7"
    assert list((tmp_path / "inflight").glob("*.json")) == []
