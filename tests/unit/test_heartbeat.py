"""Long waits that clients survive (issue 25 item 2): a call's progress passes through and
is said again, its time left brought up to date, whenever a few seconds pass without
one; the beat ends with the call; an error of the call comes out as itself. The wire path
(a 150 s approval wait through the official client) is tests/e2e/test_long_waits.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import pytest

from sandboxes.events import NO_EVENTS
from sandboxes.heartbeat import HEARTBEAT_SECONDS, Heartbeat, heartbeat
from tests.fakes import FakeClock

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


class Heard:
    def __init__(self, wanted: int = 0) -> None:
        self.said: list[tuple[str, str, float | None]] = []
        self.wanted = wanted
        self.enough = anyio.Event()

    async def progress(
        self, phase: str, message: str, *, remaining: float | None = None, output: str = ""
    ) -> None:
        self.said.append((phase, message, remaining))
        if len(self.said) >= self.wanted:
            self.enough.set()

    async def log(self, level: Any, event: str, details: Mapping[str, Any] | None = None) -> None:
        return None


def test_the_promise_is_under_five_seconds() -> None:
    assert HEARTBEAT_SECONDS < 5


async def test_progress_passes_through_and_the_beat_says_it_again_with_the_time_left() -> None:
    clock, heard = FakeClock(), Heard()
    beat = Heartbeat(heard, "codrive_run", clock=clock)
    await beat.progress("slot", "waiting for a script slot", remaining=60)
    assert heard.said == [("slot", "waiting for a script slot", 60)]
    assert beat.due(4) == 4

    clock.now += 5
    assert beat.due(4) == 0
    await beat.beat()

    phase, message, left = heard.said[-1]
    assert phase == "slot" and left == 55
    assert message == "waiting for a script slot (still at it: 5 s so far, 55 s left)"
    assert beat.due(4) == 4  # the beat re-arms itself


async def test_before_any_progress_the_beat_names_the_call() -> None:
    clock, heard = FakeClock(), Heard()
    beat = Heartbeat(heard, "browser_use", clock=clock)
    clock.now += 4
    await beat.beat()
    assert heard.said == [("call", "browser_use: working (still at it: 4 s so far)", None)]


async def test_a_silent_call_beats_until_it_ends() -> None:
    heard = Heard(wanted=3)
    with anyio.fail_after(10):  # a bound: the beats are what is waited for
        async with heartbeat(heard, "execute_program", every=0.01):
            await heard.enough.wait()
    ended_with = len(heard.said)
    assert all(message.startswith("execute_program: working") for _, message, _ in heard.said)
    await anyio.wait_all_tasks_blocked()
    assert len(heard.said) == ended_with  # the beat is gone with the block


async def test_an_error_of_the_call_comes_out_as_itself() -> None:
    with pytest.raises(LookupError, match="boom"):
        async with heartbeat(Heard(), "rig_list", every=0.01):
            raise LookupError("boom")


async def test_a_call_nobody_watches_gets_no_beat() -> None:
    async with heartbeat(NO_EVENTS, "rig_list") as events:
        assert events is NO_EVENTS
