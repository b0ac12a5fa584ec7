"""People over a kiosk session (orchestrator/surfaces/oversight.py), through the real
SessionManager and KioskChannel on the in-memory backend: a held click waits for the
decision; the seat refuses the AI's input; a console viewer's hover never takes the
desktop, its button does; the timeline never carries typed text. The same paths on
Docker and a real kiosk: tests/e2e/test_operators.py, tests/e2e/test_console_browser.py."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.errors import SeatError
from orchestrator.home import CorralHome
from orchestrator.recordings.recorder import Recorder
from orchestrator.recordings.store import RecordingMeta, RecordingStore
from orchestrator.recordings.use import AiUse
from orchestrator.surfaces.answers import Answer
from orchestrator.surfaces.kiosk.sessions import SessionManager
from tests.fakes import FakeClock, InMemoryBackend
from tests.unit.test_session_rules import call, text_of, write_agent

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


async def started(manager: SessionManager, backend: InMemoryBackend) -> Any:
    assert not (await call(manager, "computer_session_start")).is_error
    kiosk = backend.opened[-1]
    kiosk.targets[(10, 10)] = {"name": "Pay now", "role": "button"}
    return kiosk


def shots(kiosk: Any) -> int:
    """The screenshots the fake kiosk was asked for so far."""
    return len([r for r in kiosk.requests if r["op"] == "screenshot"])


async def held_then(manager: SessionManager, decide: Any) -> Answer:
    answers: list[Answer] = []

    async def click() -> None:
        answers.append(await call(manager, "computer_click", x=10, y=10))

    def raised() -> bool:
        """Pending, with the masked screenshot the approval is raised with: it is taken
        just after the approval is listed, over the fake kiosk's channel (a thread)."""
        pending = manager.approvals.pending()
        return bool(pending) and pending[0].screenshot_png is not None

    async with anyio.create_task_group() as tg:
        tg.start_soon(click)
        with anyio.fail_after(30):  # a bound, not a wait: the fake kiosk answers at once
            while not raised():
                await anyio.wait_all_tasks_blocked()
        decide(manager.approvals.pending()[0])
    return answers[0]


async def test_a_held_click_runs_only_after_approval(
    corral_home: CorralHome, manager: SessionManager, backend: InMemoryBackend
) -> None:
    write_agent(corral_home)
    kiosk = await started(manager, backend)

    def approve(a: Any) -> None:
        assert a.category == "purchase" and a.screenshot_png
        assert not [r for r in kiosk.requests if r["op"] == "click"]  # not yet
        manager.approvals.decide(a.id, "olga", True)

    answer = await held_then(manager, approve)
    assert not answer.is_error, text_of(answer)
    assert [r for r in kiosk.requests if r["op"] == "click"]
    denied = await held_then(manager, lambda a: manager.approvals.decide(a.id, "olga", False, "no"))
    assert denied.is_error and "denied this action (confirm_words: pay): no" in text_of(denied)
    assert len([r for r in kiosk.requests if r["op"] == "click"]) == 1  # the denied one never ran


async def test_the_seat_refuses_the_ai_and_hover_never_takes_it(
    corral_home: CorralHome, manager: SessionManager, backend: InMemoryBackend
) -> None:
    write_agent(corral_home, confirm_words=[])
    await started(manager, backend)
    seats = manager.oversight

    assert await seats.viewer_input("alice", "olga", "v1", take=False) is False  # a hover
    assert manager.sessions["alice"].controller == "ai"
    assert await seats.viewer_input("alice", "olga", "v1") is True  # a button: taken now
    refused = await call(manager, "computer_type", text="hunter2")
    assert refused.is_error and "A person has the desktop" in text_of(refused)
    assert not (await call(manager, "computer_screenshot")).is_error
    assert await seats.viewer_input("alice", "olga", "v2") is False  # another view: view only
    assert await seats.viewer_input("alice", "pete", "v3") is False  # another person
    with pytest.raises(SeatError, match="olga has the desktop"):
        await seats.take_over("alice", "pete", viewer=None, how="cli")
    await seats.hand_back("alice", "olga")
    assert not (await call(manager, "computer_type", text="hunter2")).is_error
    timeline = " ".join(e.step + e.outcome for e in manager.sessions["alice"].timeline)
    assert "typed 7 characters" in timeline and "hunter2" not in timeline
    assert "refused: a person has the desktop" in timeline


async def test_stop_from_an_operator_ends_the_session_and_its_held_call(
    corral_home: CorralHome, manager: SessionManager, backend: InMemoryBackend
) -> None:
    write_agent(corral_home)
    await started(manager, backend)

    def stop(_: Any) -> None:
        manager.approvals.cancel_session(manager.sessions["alice"].id, "stopped")

    answer = await held_then(manager, stop)
    assert answer.is_error and "the session ended" in text_of(answer)
    await manager.oversight.stop("alice", "olga")
    assert "alice" not in manager.sessions
    with pytest.raises(SeatError, match="no running session"):
        await manager.oversight.take_over("alice", "olga", viewer=None, how="cli")


async def test_no_thumbnail_is_captured_while_an_ais_call_uses_the_kiosk(
    corral_home: CorralHome, manager: SessionManager, backend: InMemoryBackend, clock: FakeClock
) -> None:
    """A quiet session's timeline thumbnail is a screenshot over the kiosk's channel:
    begun while an AI's call reads its target or gives its input, the call's next step
    would wait behind it. It is left for the call's end (its own entry's thumbnail)."""
    write_agent(corral_home)
    kiosk = await started(manager, backend)
    session = manager.sessions["alice"]
    assert not (await call(manager, "computer_key", key="Tab")).is_error
    clock.advance(60)  # the entry's quiet time long past
    taken = shots(kiosk)
    kiosk.held_ops.add("key")
    async with anyio.create_task_group() as tg:
        tg.start_soon(partial(call, manager, "computer_key", key="Tab"))
        with anyio.fail_after(10):  # bounds, not waits: the fake kiosk answers at once
            await kiosk.arrived.wait()  # the next call's input is in flight
            await manager.oversight._thumbnail(session)  # without the rule: blocks here
        assert shots(kiosk) == taken
        assert session.timeline[-1].thumb_state == "pending"
        kiosk.release()
    clock.advance(60)
    await manager.oversight._thumbnail(session)
    assert shots(kiosk) == taken + 1
    assert session.timeline[-1].thumb_state == "ready" and session.timeline[-1].thumb


async def test_a_recorded_sessions_thumbnail_is_its_recorders_frame_not_a_second_capture(
    corral_home: CorralHome,
    manager: SessionManager,
    backend: InMemoryBackend,
    clock: FakeClock,
    tmp_path: Path,
) -> None:
    """The recorder takes a masked frame after every timeline line once the session is
    quiet; the console's thumbnail of the same moment is that frame, not a screenshot of
    its own over the kiosk's channel (the same screen taken twice, the second capture
    holding up the AI's next call)."""
    write_agent(corral_home)
    kiosk = await started(manager, backend)
    session = manager.sessions["alice"]
    recorder = recorded(session, clock, tmp_path)

    async with anyio.create_task_group() as tg:
        tg.start_soon(recorder.run)
        entry = await key_then_frame(manager, recorder, clock)
        taken = shots(kiosk)
        await manager.oversight._thumbnail(session)
        assert entry.thumb_state == "ready" and entry.thumb
        assert shots(kiosk) == taken  # no screenshot of its own
        tg.cancel_scope.cancel()
    recorder.close_sync("stopped by the agent")


def recorded(session: Any, clock: FakeClock, where: Path) -> Recorder:
    """A recorder of the session, its quiet time on the test's clock (not running yet)."""
    session.use = AiUse(clock)
    store = RecordingStore(where)
    meta = RecordingMeta(id="r", agent="alice", surface="kiosk", seat="alice", started_at=0)
    store.create(meta)
    recorder = Recorder(
        store, meta, session.frame, 4, on_stopped=lambda _: None, clock=clock, use=session.use
    )
    session.recorder = recorder
    return recorder


async def key_then_frame(manager: SessionManager, recorder: Recorder, clock: FakeClock) -> Any:
    """The AI presses a key and pauses: the recorder (running) takes its frame once the
    quiet time has passed. The key's timeline entry."""
    assert not (await call(manager, "computer_key", key="Tab")).is_error
    entry = manager.sessions["alice"].timeline[-1]
    clock.advance(60)
    with anyio.fail_after(10):  # a bound: the fake kiosk answers at once
        while recorder.frame_since(entry.noted) is None:
            await anyio.wait_all_tasks_blocked()
    return entry


async def test_no_recorder_capture_begins_while_the_ais_screenshot_runs(
    corral_home: CorralHome,
    manager: SessionManager,
    backend: InMemoryBackend,
    clock: FakeClock,
    tmp_path: Path,
) -> None:
    """The AI's screenshot uses the kiosk as its inputs do: a recorder that wakes while it
    runs, the AI's last input long past the quiet time, takes no screenshot of its own
    beside it (which the AI's next call would wait behind on the kiosk's channel); the
    AI's image is the recording's next frame."""
    write_agent(corral_home)
    kiosk = await started(manager, backend)
    session = manager.sessions["alice"]
    recorder = recorded(session, clock, tmp_path)

    assert not (await call(manager, "computer_key", key="Tab")).is_error  # pokes it
    assert await recorder._frame()  # its first frame, taken at once (not running yet)
    taken, notes = shots(kiosk), recorder.notes
    kiosk.held_ops = {"screenshot"}
    async with anyio.create_task_group() as tg:
        tg.start_soon(partial(call, manager, "computer_screenshot"))
        with anyio.fail_after(10):  # bounds, not waits: the fake kiosk answers at once
            await kiosk.arrived.wait()  # the AI's screenshot is in flight
            clock.advance(60)  # the quiet time after the key has long passed
            tg.start_soon(recorder.run)  # awake: the key's poke
            await anyio.wait_all_tasks_blocked()  # without the rule: it captures here
            assert shots(kiosk) == taken + 1
            kiosk.held_ops = set()
            kiosk.release()
            while recorder.frame_since(notes + 1) is None:
                await anyio.wait_all_tasks_blocked()
        assert shots(kiosk) == taken + 1  # the AI's image was the frame
        tg.cancel_scope.cancel()
    recorder.close_sync("stopped by the agent")


class _Rigs:
    """A second surface host beside the kiosk sessions: one headless browser rig."""

    def __init__(self) -> None:
        from orchestrator.surfaces.base import Surface
        from sandboxes.session_rules import SessionClock

        class Browser(Surface):
            kind = "browser"

        clock = SessionClock(5, 60, 600, started=0.0, last_action=0.0)
        self.rig = Browser(id="r1", agent="alice", clock=clock, width=1280, height=800)
        self.ended: list[str] = []

    def surfaces(self) -> list[Any]:
        return [] if self.ended else [self.rig]

    async def end_surface(self, surface: Any, why: str) -> None:
        self.ended.append(why)


async def test_every_surface_is_one_seat_named_one_way_kiosks_by_agent_rigs_agent_kind(
    corral_home: CorralHome, manager: SessionManager, backend: InMemoryBackend
) -> None:
    write_agent(corral_home, confirm_words=[])
    await started(manager, backend)
    rigs = _Rigs()
    manager.oversight.surfaces.add(rigs)
    listed = {row["agent"]: row["kind"] for row in manager.oversight.sessions_view()}
    assert listed == {"alice": "kiosk", "alice.browser": "browser rig of alice"}
    await manager.oversight.take_over("alice.browser", "olga", viewer=None, how="cli")
    assert rigs.rig.controller == "human" and manager.sessions["alice"].controller == "ai"
    with pytest.raises(SeatError, match="no running session"):
        await manager.oversight.hand_back("r1", "olga")  # a rig id is not a seat's name
    await manager.oversight.stop("alice.browser", "olga")
    assert rigs.ended == ["stopped by operator olga"] and "alice" in manager.sessions
