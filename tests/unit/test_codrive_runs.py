"""codrive runs (orchestrator/codrive/runs.py) on a fake desktop: approvals before any
rung, the credential handoff, retry once after a person's input, the deny list, the
30-second answer. The desktop here records and answers at once; it stands below the
desktop rig's real tests (issue 11), which drive galculator through the same engine."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.audit import AuditLog
from orchestrator.codrive.runs import CodriveRun, CodriveRuns
from orchestrator.people.approvals import ApprovalQueue
from sandboxes.codrive import CodriveRunParams, Step
from sandboxes.ladder import Located

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


@dataclass
class Probes:
    desk: FakeDesktop

    async def locate(self, app: str, role: str, name: str) -> Located:
        return Located((10, 10), "exact")

    async def pointer(self, step: Step, x: int, y: int) -> None:
        self.desk.acted.append(f"{step.action} {x},{y}")
        if self.desk.grab_on_act:
            self.desk.grab_on_act -= 1
            self.desk.seats += 1  # a person's input took the seat during this step
            self.desk.human = True

    async def keyboard(self, step: Step) -> None:
        self.desk.acted.append(step.action)

    async def fingerprint(self, app: str) -> str:
        return str(len(self.desk.acted))

    async def settle(self, app: str, before: str) -> bool:
        return str(len(self.desk.acted)) != before

    async def pause(self, seconds: int) -> None:
        self.desk.acted.append(f"wait {seconds}")
        if (run := self.desk.status()) is not None:
            self.desk.tries_seen.append(run.public()["current_try"])


@dataclass
class FakeDesktop:
    title: str = "galculator"
    url: str = ""
    human: bool = False
    seats: int = 0
    grab_on_act: int = 0
    grab_on_where: bool = False  # a person's input takes the seat before the try starts
    status: Callable[[], CodriveRun | None] = lambda: None  # what codrive_status would say
    tries_seen: list[int | None] = field(default_factory=list)  # its current_try in a wait
    hands_back: bool = True
    acted: list[str] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)
    registry: dict[str, Any] = field(default_factory=dict)
    seat_id: str = "r-desk"

    @property
    def probes(self) -> Probes:
        return Probes(self)

    async def masked_png(self) -> bytes:
        return b"png"

    async def where(self, app: str) -> tuple[str, str]:
        if self.grab_on_where:
            self.grab_on_where, self.human = False, True
            self.seats += 1
        return self.title, self.url

    def seat_is_human(self) -> bool:
        return self.human

    def seat_changes(self) -> int:
        return self.seats

    async def ask_person(self, why: str) -> None:
        self.asked.append(why)

    async def wait_handback(self, within: float) -> bool:
        if self.hands_back:
            self.human = False
        return self.hands_back

    async def wait_idle(self, app: str) -> None:
        self.acted.append("idle")


def params(*steps: dict[str, Any], watch: bool = False) -> CodriveRunParams:
    return CodriveRunParams(
        target_app="galculator", steps=[Step(**s) for s in steps], watch_mode=watch
    )


async def run_with(
    tmp_path: Path,
    desk: FakeDesktop,
    p: CodriveRunParams,
    decide: Any = None,
    deny: tuple[str, ...] = (),
) -> CodriveRun:
    approvals = ApprovalQueue(AuditLog(tmp_path / "audit.jsonl"), 60)
    async with anyio.create_task_group() as tg:
        runs = CodriveRuns(approvals, AuditLog(tmp_path / "audit.jsonl"), tg.start_soon)

        async def answer() -> None:
            if decide is None:
                return
            with anyio.fail_after(5):
                while not approvals.pending():
                    await anyio.wait_all_tasks_blocked()
            decide(approvals, approvals.pending()[0])

        tg.start_soon(answer)
        run = await runs.start("alice", p, desk, deny)
        await run.done.wait()
    return run


CLICK = {"action": "click", "role": "push button", "name": "7"}


async def test_a_plain_run_finishes_with_one_result_per_step(tmp_path: Path) -> None:
    desk = FakeDesktop()
    run = await run_with(
        tmp_path, desk, params(CLICK, {"action": "type", "text": "qz-typed"}, watch=True)
    )
    assert run.state == "finished" and [r.rung for r in run.results] == ["locate", "none"]
    assert desk.acted == ["click 10,10", "idle", "type", "idle"]
    # the typed text is never in the answer (a run id is random hex: no letters q or z)
    assert "qz-typed" not in run.summary() + str(run.public())
    assert run.public()["steps"][0]["rung"] == "locate"


async def test_a_consequential_step_waits_for_the_operator_before_any_rung(tmp_path: Path) -> None:
    desk = FakeDesktop()

    def approve(q: ApprovalQueue, a: Any) -> None:
        assert desk.acted == []  # nothing ran before the decision
        # The AI's own words stand apart, as its; corral's line says what the step does.
        assert a.agent_words == "send the total" and "send the total" not in a.description
        assert "click the push button “7”" in a.description, a.description
        q.decide(a.id, "olga", True)

    sent = {**CLICK, "category": "send", "description": "send the total"}
    run = await run_with(tmp_path, desk, params(sent), approve)
    assert run.state == "finished" and desk.acted == ["click 10,10"]

    denied = await run_with(
        tmp_path,
        FakeDesktop(),
        params({**CLICK, "category": "delete"}, CLICK),
        lambda q, a: q.decide(a.id, "olga", False, "no"),
    )
    assert denied.state == "stopped" and "denied by olga" in denied.reason
    assert denied.results == []


async def test_a_credential_step_goes_to_a_person_and_resumes(tmp_path: Path) -> None:
    desk = FakeDesktop()
    run = await run_with(
        tmp_path,
        desk,
        params({"action": "take_over", "description": "log in to the bank"}, CLICK),
    )
    assert run.state == "finished" and desk.asked == ["a person is needed: log in to the bank"]
    assert run.results[0].outcome == "a person did this step" and desk.acted == ["click 10,10"]
    stuck = await run_with(tmp_path, FakeDesktop(hands_back=False), params({"action": "take_over"}))
    assert stuck.state == "failed" and "nobody handed the desktop back" in stuck.reason


async def test_a_step_dropped_by_a_person_is_retried_once_then_the_run_stops(
    tmp_path: Path,
) -> None:
    once = await run_with(tmp_path, FakeDesktop(grab_on_act=1), params(CLICK))
    assert once.state == "finished" and len(once.results) == 1
    twice = await run_with(tmp_path, FakeDesktop(grab_on_act=2), params(CLICK))
    assert twice.state == "failed" and "interrupted by a person twice" in twice.reason


async def test_only_input_while_a_try_is_in_flight_interrupts_it(tmp_path: Path) -> None:
    """The status names the try in flight: input before it (here while the deny list is
    checked) makes the try wait for the hand back and then run whole, not dropped."""
    approvals = ApprovalQueue(AuditLog(tmp_path / "audit.jsonl"), 60)
    desk = FakeDesktop(grab_on_where=True)
    async with anyio.create_task_group() as tg:
        runs = CodriveRuns(approvals, AuditLog(tmp_path / "audit.jsonl"), tg.start_soon)
        desk.status = lambda: runs.status("alice", None)
        run = await runs.start("alice", params({"action": "wait", "amount": 1}), desk, [])
        await run.done.wait()
    assert run.state == "finished" and not run.results[0].retried
    assert desk.tries_seen == [1] and run.public()["current_try"] is None


async def test_a_deny_listed_window_or_page_is_refused_without_acting(tmp_path: Path) -> None:
    desk = FakeDesktop(title="Solve this CAPTCHA - Chromium")
    run = await run_with(tmp_path, desk, params(CLICK), deny=("captcha",))
    assert run.state == "failed" and "'captcha' (deny list)" in run.reason and desk.acted == []
    bank = FakeDesktop(url="https://www.bank.example/login")
    run = await run_with(tmp_path, bank, params(CLICK), deny=("bank.example",))
    assert run.state == "failed" and bank.acted == []
    # A step that would open a deny-listed page is refused before anything runs.
    opener = FakeDesktop(title="Chromium")
    to_bank = {
        "action": "click",
        "api_action": "open_url",
        "params": {"url": "https://pay.bank.example/"},
    }
    run = await run_with(tmp_path, opener, params(to_bank), deny=("bank.example",))
    assert run.state == "failed" and "it opens 'bank.example'" in run.reason
    assert opener.acted == []


async def test_a_long_run_answers_while_still_going(tmp_path: Path) -> None:
    approvals = ApprovalQueue(AuditLog(tmp_path / "audit.jsonl"), 60)
    async with anyio.create_task_group() as tg:
        runs = CodriveRuns(
            approvals, AuditLog(tmp_path / "audit.jsonl"), tg.start_soon, answer_within=0.0
        )
        run = await runs.start("alice", params({**CLICK, "category": "send"}), FakeDesktop(), [])
        assert not run.done.is_set() and run.state == "waiting_approval"
        assert runs.status("alice", None) is run and runs.status("alice", run.id) is run
        assert runs.status("alice", "run-nope") is None
        approvals.decide(approvals.pending()[0].id, "olga", True)
    assert run.state == "finished"
