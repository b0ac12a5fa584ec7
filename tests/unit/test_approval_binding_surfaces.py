"""An approval is for one exact action on every surface kind: the pipeline's stages
(orchestrator/surfaces/pipeline.py) with the real Oversight and ApprovalQueue, on a
desktop, Android and iOS surface whose driver is a fake that holds every "tap" and reads
its target from a dict the test changes. Below the real tests of the same path on a kiosk
and a browser rig (tests/e2e/test_approval_binding*.py): the rigs' drivers hold nothing
of their own yet (issue 22 item 2), so this is the path their holds will take."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from orchestrator.audit import AuditLog
from orchestrator.errors import SessionRefused, SurfaceGone
from orchestrator.people.approvals import ApprovalQueue
from orchestrator.surfaces.answers import answer, text_block
from orchestrator.surfaces.base import Surface
from orchestrator.surfaces.oversight import Oversight
from orchestrator.surfaces.pipeline import Action, Done, Pipeline
from orchestrator.surfaces.registry import Surfaces
from sandboxes.approval_binding import PENDING, TARGET_CHANGED
from sandboxes.approval_rules import Hold
from sandboxes.events import NO_EVENTS
from sandboxes.session_rules import SessionClock
from tests.fakes import FakeClock

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


class Tap(BaseModel):
    verb: str
    x: int = 0
    y: int = 0


@dataclass
class FakeDriver:
    """Holds every tap; reads its target from `target`; records what it did."""

    target: dict[str, Any]
    done: list[str] = field(default_factory=list)
    refused_event: str = "rig_action_refused"
    done_event: str = "rig_action"
    stop_with: str = "Close it with rig_close"
    keeps_timeline: bool = False

    async def rules(self, surface: Any, action: Action) -> None:
        return None

    async def hold(self, surface: Any, action: Action) -> Hold | None:
        if action.params.verb != "tap" or "delete" not in str(self.target.get("name")):
            return None
        return Hold("confirm_words: delete", "delete", "Tap “Delete”").on(dict(self.target))

    async def act(self, surface: Any, action: Action, status: str) -> Done:
        self.done.append(action.params.verb)
        return Done(answer(text_block(f"{action.params.verb} done")))


def surface_of(kind: str) -> Surface:
    class Kind(Surface):
        pass

    Kind.kind = kind
    return Kind(id=f"{kind}-1", agent="alice", clock=SessionClock(9, 60, 600, 0.0, 0.0))


def action(verb: str) -> Action:
    return Action(
        tool="mobile_use",
        name=f"mobile_use {verb}",
        params=Tap(verb=verb),
        counted=verb != "screenshot",
        is_input=verb != "screenshot",
        step=verb,
        details={"rig": "r1", "verb": verb},
    )


def world(tmp_path: Path) -> tuple[Pipeline, ApprovalQueue, AuditLog]:
    audit = AuditLog(tmp_path / "audit.jsonl")
    queue = ApprovalQueue(audit, 60, clock=FakeClock())
    return Pipeline(audit, Oversight(Surfaces(), audit, queue)), queue, audit


async def held(
    pipeline: Pipeline, queue: ApprovalQueue, surface: Surface, driver: Any, during: Any
) -> Any:
    """A tap held for an operator; `during` runs while pending; then it is approved. The
    tap's answer, or the exception it raised."""
    out: list[Any] = []

    async def tap() -> None:
        try:
            out.append(await pipeline.run(surface, action("tap"), driver, NO_EVENTS))
        except SessionRefused as exc:
            out.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(tap)
        with anyio.fail_after(5):  # a bound, not a wait: nothing here waits on time
            while not queue.pending():
                await anyio.wait_all_tasks_blocked()
        (approval,) = queue.pending()
        await during(approval)
        queue.decide(approval.id, "olga", True)
    return out[0]


@pytest.mark.parametrize("kind", ["desktop", "android", "ios"])
async def test_every_surface_kind_refuses_other_input_while_pending_and_binds_the_target(
    tmp_path: Path, kind: str
) -> None:
    pipeline, queue, audit = world(tmp_path)
    surface = surface_of(kind)
    driver = FakeDriver({"name": "delete photo", "role": "button", "bounds": [0, 0, 9, 9]})

    async def others(approval: Any) -> None:
        assert approval.public()["action"]["surface"] == f"{kind}-1"
        for verb in ("type", "key", "swipe"):
            with pytest.raises(SessionRefused, match=PENDING):
                await pipeline.run(surface, action(verb), driver, NO_EVENTS)
        await pipeline.run(surface, action("screenshot"), driver, NO_EVENTS)  # still works

    done = await held(pipeline, queue, surface, driver, others)
    assert not isinstance(done, Exception) and driver.done == ["screenshot", "tap"]

    async def moved(_: Any) -> None:
        driver.target["bounds"] = [0, 40, 9, 9]  # the same name, somewhere else

    refused = await held(pipeline, queue, surface, driver, moved)
    assert isinstance(refused, SessionRefused) and TARGET_CHANGED in str(refused)
    assert driver.done == ["screenshot", "tap"]  # the moved element was not tapped
    assert surface.waiting is None and surface.clock.used == 1  # the refused tap is not counted
    why = [e["details"].get("why") for e in audit.read() if e["event"] == "rig_action_refused"]
    assert why == [PENDING] * 3 + [TARGET_CHANGED]


@dataclass
class DyingDriver(FakeDriver):
    """Its target read finds the surface dead (as a kiosk's read finds its channel closed)
    and answers an unknown, which the rules would hold."""

    surface: Any = None
    reads: int = 0

    async def hold(self, surface: Any, action: Action) -> Hold | None:
        self.reads += 1
        surface.gone = "the channel closed (end of stream)"
        return Hold("unknown", "cannot be read", "Tap (unknown)").on({"name": None})


def dying_surface() -> Surface:
    class Dying(Surface):
        kind = "kiosk"
        gone: str | None = None

        @property
        def broken(self) -> str | None:
            return self.gone

    return Dying(id="k-1", agent="alice", clock=SessionClock(9, 60, 600, 0.0, 0.0))


async def test_a_surface_that_dies_is_answered_at_once_never_held_for_an_operator(
    tmp_path: Path,
) -> None:
    pipeline, queue, _ = world(tmp_path)
    surface, driver = dying_surface(), DyingDriver(target={})

    # Held, it would wait for an operator: the bound makes that a failure, not a hang.
    with pytest.raises(SurfaceGone, match="the kiosk stopped answering"), anyio.fail_after(5):
        await pipeline.run(surface, action("tap"), driver, NO_EVENTS)
    assert queue.pending() == [] and driver.done == [] and driver.reads == 1

    # Already dead: not even read.
    with pytest.raises(SurfaceGone):
        await pipeline.run(surface, action("tap"), driver, NO_EVENTS)
    assert driver.reads == 1 and surface.clock.used == 0


class DiesWhileActing(FakeDriver):
    """Answers as if all went well, but its surface's channel failed meanwhile (a browser
    rig's screenshot, masked whole when the browser hung under it)."""

    async def act(self, surface: Any, action: Action, status: str) -> Done:
        surface.gone = "no sign of life for 2.5 s"
        return await super().act(surface, action, status)


async def test_a_surface_that_dies_under_an_action_never_answers_as_if_it_had_not(
    tmp_path: Path,
) -> None:
    pipeline, _, audit = world(tmp_path)
    surface, driver = dying_surface(), DiesWhileActing(target={})
    with pytest.raises(SurfaceGone, match="stopped answering during this action"):
        await pipeline.run(surface, action("screenshot"), driver, NO_EVENTS)
    assert driver.done == ["screenshot"]
    assert [e["event"] for e in audit.read()] == []  # no `rig_action` for it
