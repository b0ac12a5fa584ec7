"""An approval is for one exact action (issue 22 item 1): the binding's digest
(sandboxes/approval_binding.py), the queue's single use (orchestrator/people/approvals.py),
and the pipeline (orchestrator/surfaces/pipeline.py) through the real SessionManager on
the in-memory kiosk: other input refused while an approval is pending, the target read
again after the approval, a changed target refused and audited. The same path on real
containers: tests/e2e/test_approval_binding.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.audit import AuditLog
from orchestrator.errors import ApprovalError, SessionRefused
from orchestrator.home import CorralHome
from orchestrator.people.approvals import Approval, ApprovalQueue
from orchestrator.surfaces.answers import Answer
from orchestrator.surfaces.kiosk.sessions import SessionManager
from sandboxes.approval_binding import (
    PENDING,
    TARGET_CHANGED,
    Binding,
    canonical,
    changed,
    shown_params,
)
from sandboxes.approval_rules import Hold
from tests.fakes import FakeClock, InMemoryBackend
from tests.unit.test_oversight import started
from tests.unit.test_session_rules import call, text_of, write_agent

pytestmark = [pytest.mark.unit, pytest.mark.anyio]

TARGET = {"name": "Pay now", "role": "button", "text": "Pay now", "href": None, "error": None}
CLICK = Binding("computer_click", {"x": 10, "y": 10, "button": "left"}, "s1", TARGET)


def test_the_digest_is_of_the_canonical_json_of_tool_params_surface_and_target() -> None:
    reordered = Binding(
        "computer_click", {"button": "left", "y": 10, "x": 10}, "s1", dict(reversed(TARGET.items()))
    )
    assert reordered.digest == CLICK.digest  # key order is not part of the action
    assert canonical({"b": "é", "a": 1}) == '{"a":1,"b":"é"}'.encode()
    assert len(CLICK.digest) == 64 and not changed(CLICK.digest, reordered)
    others = [
        Binding("computer_key", CLICK.params, "s1", TARGET),
        Binding(CLICK.tool, {**CLICK.params, "x": 11}, "s1", TARGET),
        Binding(CLICK.tool, CLICK.params, "s2", TARGET),
        Binding(CLICK.tool, CLICK.params, "s1", {**TARGET, "name": "Pay everything"}),
        Binding(CLICK.tool, CLICK.params, "s1", {**TARGET, "bounds": [0, 0, 10, 10]}),
        Binding(CLICK.tool, CLICK.params, "s1", None),
    ]
    assert all(changed(CLICK.digest, other) for other in others)
    assert changed(CLICK.digest, None)  # no rule holds what is there now: not what was approved


def test_what_an_operator_sees_of_the_parameters_leaves_typed_text_out() -> None:
    shown = shown_params({"text": "hunter2\n", "verb": "fill", "ref": "e3"})
    assert shown == {"text": "(8 characters, not shown)", "verb": "fill", "ref": "e3"}
    typed = Binding("computer_type", {"text": "12\n"}, "s1", TARGET)
    assert typed.digest != Binding("computer_type", {"text": "13\n"}, "s1", TARGET).digest


def _queue(tmp_path: Path) -> tuple[ApprovalQueue, Path]:
    path = tmp_path / "audit.jsonl"
    return ApprovalQueue(AuditLog(path), 120, clock=FakeClock()), path


def _raise(q: ApprovalQueue) -> Approval:
    hold = Hold("confirm_words: pay", "purchase", "Click the button “Pay now”", TARGET)
    return q.raise_(
        agent="alice",
        session="s1",
        tool="computer_click",
        step="left click at 10,10",
        hold=hold,
        screenshot_png=None,
        binding=CLICK,
    )


def test_an_approval_is_used_once_and_only_for_the_bound_action(tmp_path: Path) -> None:
    q, path = _queue(tmp_path)
    approval = _raise(q)
    with pytest.raises(ApprovalError, match="is pending; it releases no action"):
        q.use(approval, CLICK)  # not decided: releases nothing
    q.decide(approval.id, "olga", True)
    q.use(approval, CLICK)
    with pytest.raises(ApprovalError, match="was already used"):
        q.use(approval, CLICK)
    with pytest.raises(ApprovalError, match="already approved by olga"):
        q.decide(approval.id, "olga", True)  # a second decision releases nothing either
    swapped = _raise(q)
    q.decide(swapped.id, "olga", True)
    now = Binding(CLICK.tool, CLICK.params, "s1", {**TARGET, "name": "Delete everything"})
    with pytest.raises(SessionRefused, match=TARGET_CHANGED):
        q.use(swapped, now)
    with pytest.raises(ApprovalError, match="was already used"):
        q.use(swapped, CLICK)  # a refused use spends it too
    used = [json.loads(line) for line in path.read_text().splitlines()]
    used = [e["details"] for e in used if e["event"] == "approval_used"]
    assert [u["target_changed"] for u in used] == [False, True]
    assert used[1]["digest"] == CLICK.digest and used[1]["now"] == now.digest


def test_the_console_and_the_cli_read_the_bound_action(
    tmp_path: Path,
) -> None:
    q, _ = _queue(tmp_path)
    shown = _raise(q).public()
    assert shown["action"] == {
        "tool": "computer_click",
        "params": {"x": 10, "y": 10, "button": "left"},
        "surface": "s1",
        "target": TARGET,
    }
    assert shown["digest"] == CLICK.digest
    assert "binding" not in shown
    json.dumps(shown)  # what the admin API sends


async def _while_held(
    manager: SessionManager, during: Callable[[Approval], Any], decide: bool = True
) -> Answer:
    """A held click on the fake kiosk; `during` runs while it is pending, then the
    operator decides."""
    answers: list[Answer] = []

    async def click() -> None:
        answers.append(await call(manager, "computer_click", x=10, y=10))

    async with anyio.create_task_group() as tg:
        tg.start_soon(click)
        with anyio.fail_after(5):  # a bound, not a wait: the fake kiosk answers at once
            while not manager.approvals.pending():
                await anyio.wait_all_tasks_blocked()
        (approval,) = manager.approvals.pending()
        await during(approval)
        manager.approvals.decide(approval.id, "olga", decide)
    return answers[0]


def _inputs(kiosk: Any) -> list[str]:
    return [r["op"] for r in kiosk.requests if r["op"] in ("click", "type", "key", "navigate")]


async def test_other_input_is_refused_while_an_approval_is_pending_screenshots_are_not(
    corral_home: CorralHome, manager: SessionManager, backend: InMemoryBackend
) -> None:
    write_agent(corral_home)
    kiosk = await started(manager, backend)
    before = _inputs(kiosk)

    async def others(approval: Approval) -> None:
        assert approval.public()["action"]["target"]["name"] == "Pay now"
        for tool, args in (
            ("computer_click", {"x": 300, "y": 300}),
            ("computer_type", {"text": "x"}),
            ("computer_key", {"key": "Tab"}),
            ("computer_navigate", {"url": "https://example.com/"}),
        ):
            refused = await call(manager, tool, **args)
            assert refused.is_error and PENDING in text_of(refused), (tool, text_of(refused))
            assert approval.id in text_of(refused)
        assert not (await call(manager, "computer_screenshot")).is_error
        assert _inputs(kiosk) == before  # none reached the kiosk

    answer = await _while_held(manager, others)
    assert not answer.is_error, text_of(answer)
    assert _inputs(kiosk) == [*before, "click"]  # the approved click, once
    assert manager.sessions["alice"].waiting is None
    assert not (await call(manager, "computer_key", key="Tab")).is_error  # free again


@pytest.mark.parametrize(
    "swapped",
    [
        {"name": "Pay everything", "role": "button"},  # still held, another element
        {"name": "Continue", "role": "button"},  # no rule holds it now
    ],
)
async def test_a_target_that_changed_while_pending_is_refused_and_audited(
    corral_home: CorralHome,
    manager: SessionManager,
    backend: InMemoryBackend,
    swapped: dict[str, Any],
) -> None:
    write_agent(corral_home)
    kiosk = await started(manager, backend)
    before = _inputs(kiosk)

    async def swap(_: Approval) -> None:
        kiosk.targets[(10, 10)] = swapped

    answer = await _while_held(manager, swap)
    assert answer.is_error and TARGET_CHANGED in text_of(answer), text_of(answer)
    assert _inputs(kiosk) == before  # the swapped element was not clicked
    audit = AuditLog(corral_home.audit_file).read()
    refused = [e for e in audit if e["event"] == "computer_action_refused"]
    assert refused[-1]["details"]["why"] == TARGET_CHANGED
    assert refused[-1]["details"]["approved"] != refused[-1]["details"]["now"]
    assert manager.sessions["alice"].waiting is None
    assert manager.sessions["alice"].clock.used == 0  # a refused action is not counted


async def test_the_same_click_again_needs_a_new_approval(
    corral_home: CorralHome, manager: SessionManager, backend: InMemoryBackend
) -> None:
    write_agent(corral_home)
    kiosk = await started(manager, backend)
    seen: list[str] = []

    async def note(approval: Approval) -> None:
        seen.append(approval.id)

    assert not (await _while_held(manager, note)).is_error
    denied = await _while_held(manager, note, decide=False)
    assert denied.is_error and "denied" in text_of(denied)
    assert len(set(seen)) == 2  # the second click was held anew, not released by the first
    assert _inputs(kiosk).count("click") == 1
