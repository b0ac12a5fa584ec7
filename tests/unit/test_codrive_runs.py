"""codrive runs (orchestrator/codrive/runs.py) through the real action pipeline and
oversight, on a fake desktop: approvals before any rung, the credential handoff, retry
once after a person's input, the deny list, the 30-second answer. The desktop here
records and answers at once; it stands below the desktop rig's real tests (issue 11,
tests/e2e/test_codrive*.py), which drive galculator and Chromium through the same path."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.audit import AuditLog
from orchestrator.codrive.runs import CodriveRun, CodriveRuns
from orchestrator.codrive.step import StepRules
from orchestrator.errors import SeatError
from orchestrator.people.approvals import ApprovalQueue
from orchestrator.surfaces.base import Surface
from orchestrator.surfaces.oversight import Oversight
from orchestrator.surfaces.pipeline import Pipeline
from sandboxes.codrive import CodriveRunParams, Step
from sandboxes.codrive_rules import StepTarget
from sandboxes.ladder import Located
from sandboxes.session_rules import SessionClock

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


@dataclass
class Probes:
    desk: FakeDesktop

    async def locate(self, app: str, role: str, name: str) -> Located:
        return Located((10, 10), "exact", role, name)

    async def pointer(self, step: Step, x: int, y: int) -> None:
        self.desk.acted.append(f"{step.action} {x},{y}")
        self.desk.url = self.desk.url_after_act or self.desk.url
        if self.desk.grab_on_act:
            self.desk.grab_on_act -= 1
            self.desk.grab()  # a person's input took the seat during this step

    async def keyboard(self, step: Step) -> None:
        self.desk.acted.append(step.action)
        self.desk.delivered += 1
        if self.desk.grab_mid_type:  # a person's input lands between two chunks
            self.desk.grab_mid_type = False
            self.desk.grab()
            raise SeatError("a person has the desktop")

    async def fingerprint(self, app: str) -> str:
        return str(len(self.desk.acted))

    async def settle(self, app: str, before: str) -> bool:
        return str(len(self.desk.acted)) != before

    async def pause(self, seconds: int) -> None:
        self.desk.acted.append(f"wait {seconds}")
        if (run := self.desk.status()) is not None:
            self.desk.tries_seen.append(run.public()["current_try"])
        if self.desk.grab_on_wait:  # a person's input ends the wait: nothing was sent
            self.desk.grab_on_wait -= 1
            self.desk.grab()
            raise SeatError("a person has the desktop")


@dataclass
class FakeDesktop:
    title: str = "galculator"
    url: str = ""
    grab_on_act: int = 0
    grab_on_wait: int = 0
    grab_mid_type: bool = False
    url_after_act: str = ""  # where a click leads (a link, a redirect)
    grab_on_where: bool = False  # a person's input takes the seat before the try starts
    status: Callable[[], CodriveRun | None] = lambda: None  # what codrive_status would say
    tries_seen: list[int | None] = field(default_factory=list)  # its current_try in a wait
    hands_back: bool = True
    acted: list[str] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)
    registry: dict[str, Any] = field(default_factory=dict)
    seat_id: str = "r-desk"
    delivered: int = 0
    surface: Surface = field(
        default_factory=lambda: Surface(
            id="r-desk",
            agent="alice",
            clock=SessionClock(100, 600, 3600, time.monotonic(), time.monotonic()),
        )
    )

    @property
    def probes(self) -> Probes:
        return Probes(self)

    @property
    def human(self) -> bool:
        return self.surface.controller == "human"

    def grab(self) -> None:
        self.surface.controller = "human"
        self.surface.moved()

    async def target(self, step: Step) -> StepTarget:
        if step.role is not None and step.name is not None:
            return StepTarget({"role": step.role, "name": step.name, "error": None})
        return StepTarget(unread="the fake reads only named elements")

    async def masked_png(self) -> bytes:
        return b"png"

    async def where(self, app: str) -> tuple[str, str]:
        if self.grab_on_where:
            self.grab_on_where = False
            self.grab()
        return self.title, self.url

    def seat_is_human(self) -> bool:
        return self.human

    def seat_changes(self) -> int:
        return self.surface.seat_count

    async def ask_person(self, why: str) -> None:
        self.asked.append(why)

    async def wait_handback(self, within: float) -> bool:
        if self.hands_back and self.human:
            self.surface.controller = "ai"
            self.surface.moved()
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
    words: tuple[str, ...] = (),
) -> CodriveRun:
    approvals = ApprovalQueue(AuditLog(tmp_path / "audit.jsonl"), 60)
    async with anyio.create_task_group() as tg:
        runs = codrive_runs(tmp_path, approvals, tg.start_soon)

        async def answer() -> None:
            if decide is None:
                return
            with anyio.fail_after(5):
                while not approvals.pending():
                    await anyio.wait_all_tasks_blocked()
            decide(approvals, approvals.pending()[0])

        tg.start_soon(answer)
        run = await runs.start("alice", p, desk, StepRules(deny, words))
        await run.done.wait()
    return run


class NoSurfaces:
    def seats(self) -> dict[str, Any]:
        return {}


def codrive_runs(tmp_path: Path, approvals: ApprovalQueue, spawn: Any, **more: Any) -> CodriveRuns:
    """Runs through the real pipeline and oversight (approvals raised in `approvals`)."""
    audit = AuditLog(tmp_path / "audit.jsonl")
    pipeline = Pipeline(audit, Oversight(NoSurfaces(), audit, approvals))
    return CodriveRuns(pipeline, audit, spawn, **more)


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
        # Bound to the step and what the desktop read it acts on (issue 22 item 1).
        bound = a.public()["action"]
        assert bound["tool"] == "codrive_run" and a.digest is not None
        assert bound["target"]["element"]["name"] == "7", bound
        q.decide(a.id, "olga", True)

    run = await run_with(tmp_path, desk, params({**CLICK, "category": "send"}), approve)
    assert run.state == "finished" and desk.acted == ["click 10,10"]

    denied = await run_with(
        tmp_path,
        FakeDesktop(),
        params({**CLICK, "category": "delete"}, CLICK),
        lambda q, a: q.decide(a.id, "olga", False, "no"),
    )
    assert denied.state == "stopped" and "olga denied this action" in denied.reason
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
    """A try none of whose input reached the desktop (a wait a person ended) is retried
    once; a second drop stops the run."""
    wait = {"action": "wait", "amount": 1}
    once = await run_with(tmp_path, FakeDesktop(grab_on_wait=1), params(wait))
    assert once.state == "finished" and len(once.results) == 1 and once.results[0].retried
    twice = await run_with(tmp_path, FakeDesktop(grab_on_wait=2), params(wait))
    assert twice.state == "failed" and "interrupted by a person twice" in twice.reason


async def test_input_that_reached_the_desktop_is_never_sent_again(tmp_path: Path) -> None:
    """A click delivered whole, then a person's input: the step is done, not clicked
    again. A type cut between chunks: not typed again; the run stops."""
    clicked = FakeDesktop(grab_on_act=1)
    run = await run_with(tmp_path, clicked, params(CLICK))
    assert run.state == "finished" and clicked.acted == ["click 10,10"]
    assert "not sent again" in run.results[0].outcome
    typed = FakeDesktop(grab_mid_type=True)
    run = await run_with(tmp_path, typed, params({"action": "type", "text": "hello"}, CLICK))
    assert run.state == "stopped" and "not sent again" in run.reason
    assert typed.acted == ["type"]


async def test_only_input_while_a_try_is_in_flight_interrupts_it(tmp_path: Path) -> None:
    """The status names the try in flight: input before it (here while the deny list is
    checked) makes the try wait for the hand back and then run whole, not dropped."""
    approvals = ApprovalQueue(AuditLog(tmp_path / "audit.jsonl"), 60)
    desk = FakeDesktop(grab_on_where=True)
    async with anyio.create_task_group() as tg:
        runs = codrive_runs(tmp_path, approvals, tg.start_soon)
        desk.status = lambda: runs.status("alice", None)
        run = await runs.start("alice", params({"action": "wait", "amount": 1}), desk, StepRules())
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
        runs = codrive_runs(tmp_path, approvals, tg.start_soon, answer_within=0.0)
        run = await runs.start(
            "alice", params({**CLICK, "category": "send"}), FakeDesktop(), StepRules()
        )
        assert not run.done.is_set() and run.state == "waiting_approval"
        assert runs.status("alice", None) is run and runs.status("alice", run.id) is run
        assert runs.status("alice", "run-nope") is None
        approvals.decide(approvals.pending()[0].id, "olga", True)
    assert run.state == "finished"


class PersonAtHand(FakeDesktop):
    """A desktop whose person hands it back only when the test says so."""

    def __init__(self) -> None:
        super().__init__()
        self.handed = anyio.Event()

    async def wait_handback(self, within: float) -> bool:
        await self.handed.wait()
        return True


async def test_a_run_that_waits_for_a_person_answers_at_once(tmp_path: Path) -> None:
    """The call answers when the run asks for a person, not after `answer_within`: the
    agent is told what the run waits for, and codrive_status follows it to its end."""
    approvals = ApprovalQueue(AuditLog(tmp_path / "audit.jsonl"), 60)
    desk = PersonAtHand()
    steps = params({"action": "take_over", "description": "log in to the bank"}, CLICK)
    with anyio.fail_after(20):  # a bound, far below answer_within: the answer comes first
        async with anyio.create_task_group() as tg:
            runs = codrive_runs(tmp_path, approvals, tg.start_soon, answer_within=3600.0)
            run = await runs.start("alice", steps, desk, StepRules())
            assert run.state == "human" and not run.done.is_set()
            assert "Waiting for a person (log in to the bank)" in run.summary()
            assert desk.asked == ["a person is needed: log in to the bank"]
            desk.handed.set()
            await run.done.wait()
    assert run.state == "finished" and [a.split()[0] for a in desk.acted] == ["click"]


async def test_the_rules_hold_a_step_whatever_its_category(tmp_path: Path) -> None:
    """Category none on a button the desktop reads as "Delete": held, and nothing ran
    before the decision."""
    desk = FakeDesktop()

    def approve(q: ApprovalQueue, a: Any) -> None:
        assert desk.acted == [] and a.rule == "confirm_words: delete"
        q.decide(a.id, "olga", True)

    step = {"action": "click", "role": "push button", "name": "Delete all"}
    run = await run_with(tmp_path, desk, params(step), approve, words=("delete",))
    assert run.state == "finished" and desk.acted == ["click 10,10"]


async def test_the_deny_list_is_checked_again_after_every_step(tmp_path: Path) -> None:
    """A click that leads to a denied page (in any case): the run stops there, before
    the next step."""
    desk = FakeDesktop(url="https://shop.test/", url_after_act="https://shop.test/PAY/now")
    run = await run_with(tmp_path, desk, params(CLICK, CLICK), deny=("https://shop.test/pay",))
    assert run.state == "failed" and "led to 'https://shop.test/pay'" in run.reason
    assert desk.acted == ["click 10,10"]
