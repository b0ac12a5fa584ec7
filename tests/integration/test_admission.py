"""The host's admission (orchestrator/backends/admission.py) on the real engine: a kiosk
start waits for a boot slot before any container of it exists, and says so in its
progress; a screenshot waits for a capture slot before the kiosk is asked, and its 5 s
deadline counts from the slot, not from the queue (sixty sessions at once on two cores
missed it: the kiosk was taken for hung and the session ended)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from orchestrator.backends.admission import admission
from orchestrator.config import ComputerUseConfig, CorralConfig
from orchestrator.gateway.service import egress_factory
from orchestrator.home import CorralHome
from orchestrator.runtime import Runtime
from orchestrator.surfaces.kiosk.sessions import SessionManager
from sandboxes.params import SessionStartParams

pytestmark = pytest.mark.anyio

AGENT = "admitted"
# `runtime`: tests/integration/conftest.py (no script pool: only this test's containers)


class Progress:
    """A call's events: each progress line kept; `queued` set on the queue's."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []
        self.queued = anyio.Event()

    async def progress(self, phase: str, message: str, **_: Any) -> None:
        self.lines.append((phase, message))
        if phase == "queue":
            self.queued.set()

    async def log(self, *_: Any, **__: Any) -> None:
        return None


def _manager(home: CorralHome, rt: Runtime) -> SessionManager:
    config = CorralConfig()
    return SessionManager(
        home,
        config,
        rt.backend,
        rt.audit,
        egress_factory(rt.backend, config),
    )


async def _take_all(slots: anyio.Semaphore) -> int:
    taken = slots.value
    for _ in range(taken):
        await slots.acquire()
    return taken


async def test_a_start_waits_for_a_boot_slot_with_no_container_made_and_says_so(
    corral_home: CorralHome, runtime: Runtime
) -> None:
    boots = admission().boots
    taken = await _take_all(boots)
    manager = _manager(corral_home, runtime)
    events = Progress()
    answers: list[Any] = []
    try:
        async with anyio.create_task_group() as tg:

            async def start() -> None:
                params, cfg = SessionStartParams(), ComputerUseConfig()
                answers.append(await manager.start(AGENT, params, cfg, events))

            tg.start_soon(start)
            with anyio.fail_after(60):  # a bound, should the start never queue
                await events.queued.wait()
            mine = {"corral.instance": runtime.owner.instance_id}
            made = await runtime.backend.list_managed(mine)
            assert made == [], "a container was made before the start had its slot"
            assert f"{taken} starts are under way" in events.lines[-1][1]
            boots.release()  # one slot frees: the start goes on
            taken -= 1
        assert not answers[0].is_error, answers[0].text
        assert AGENT in manager.sessions
        phases = [phase for phase, _ in events.lines]
        assert phases.index("queue") < phases.index("container")
    finally:
        for _ in range(taken):
            boots.release()
        await manager.close_all()


async def test_a_screenshot_queued_past_its_deadline_still_gets_the_kiosks_answer(
    corral_home: CorralHome, runtime: Runtime
) -> None:
    manager = _manager(corral_home, runtime)
    try:
        await manager.start(AGENT, SessionStartParams(), ComputerUseConfig())
        session = manager.sessions[AGENT]
        captures = admission().captures
        taken = await _take_all(captures)
        shots: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def shoot() -> None:
                shots.append(await manager.screenshot(session))

            tg.start_soon(shoot)
            await anyio.wait_all_tasks_blocked()
            assert captures.statistics().tasks_waiting == 1 and not shots
            # The condition under test is time itself: held longer than the deadline.
            await anyio.sleep(session.screenshot_deadline + 1)
            for _ in range(taken):
                captures.release()
        answer = shots[0]
        assert not answer.is_error, answer.text
        assert "could not" not in answer.text and "failed" not in answer.text, answer.text
        assert session.channel.broken is None
        assert AGENT in manager.sessions
    finally:
        await manager.close_all()
