"""A script's output lines in its progress: every line is said once, in order, even when
the output ends while a progress report holding the newest lines is still being sent (a
slow reader, a busy machine). Seen in a full run under two CPU burners: the last line of
tests/e2e/test_progress.py's script was taken into a report that the end of the output
then cancelled mid-send, and the final progress no longer had it. The script, its
container and the client are played here by stand-ins so that the report can be held
mid-send exactly when the output ends; the real path is tests/e2e/test_progress.py."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
import pytest

from sandboxes._script_run import _drive
from sandboxes.events import OutputTail
from sandboxes.exit_line import ExitLine
from sandboxes.ports import ExitInfo
from sandboxes.script_policy import OutputCollector

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


class SlowReader:
    """CallEvents whose reader takes a report holding output lines only once `release` is
    set; `sent` is what was said, in order, once its send completed."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.in_flight = anyio.Event()
        self.release = anyio.Event()

    async def progress(
        self, phase: str, message: str, *, remaining: float | None = None, output: str = ""
    ) -> None:
        if output:
            self.in_flight.set()
            await self.release.wait()
        self.sent += output.splitlines()

    async def log(self, level: Any, event: str, details: Mapping[str, Any] | None = None) -> None:
        return None


class Script:
    """Prints one line, then ends its output once a report has taken that line."""

    def __init__(self, events: SlowReader) -> None:
        self.events = events
        self.ended = anyio.Event()

    async def output(self) -> AsyncIterator[bytes]:
        yield b"tick 0\n"
        await self.events.in_flight.wait()  # the report holding the line is being sent
        self.ended.set()

    async def wait(self) -> ExitInfo:
        return ExitInfo(exit_code=0, oom_killed=False)

    async def kill(self) -> None:
        raise AssertionError("the script ended by itself")


async def test_the_output_ending_mid_report_loses_no_line() -> None:
    events, tail = SlowReader(), OutputTail()
    script = Script(events)

    async def reader() -> None:
        await script.ended.wait()
        await anyio.wait_all_tasks_blocked()  # the run has done all it does before the send
        events.release.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(reader)
        exit_info, timed_out = await _drive(
            script, OutputCollector(), 20, None, events, tail, ExitLine("never-said")
        )
    said = events.sent + tail.take(final=True).splitlines()  # the final progress's lines
    assert (exit_info.exit_code, timed_out) == (0, False)
    assert said == ["tick 0"]
