"""How a SIGKILL is told apart (sandboxes._script_run._result): the engine's OOM flag,
the hard cap by elapsed time, and under gVisor, where the engine does not always report
an OOM kill, a SIGKILL nobody of ours sent is the memory limit."""

from __future__ import annotations

import pytest

from sandboxes._script_run import _result
from sandboxes.ports import ExitInfo
from sandboxes.script_call import ScriptResult
from sandboxes.script_policy import ExecuteProgramParams, OutputCollector

pytestmark = pytest.mark.unit

PARAMS = ExecuteProgramParams(code="print(1)", language="python", timeout_seconds=30)


def result(
    exit_info: ExitInfo, *, elapsed: float = 2.0, gvisor: bool, timed_out: bool = False
) -> ScriptResult:
    collector = OutputCollector()
    return _result(PARAMS, collector, exit_info, timed_out, elapsed, 600, True, gvisor=gvisor)


def test_a_sigkill_under_gvisor_that_no_cap_sent_is_reported_as_out_of_memory() -> None:
    done = result(ExitInfo(exit_code=137, oom_killed=False), gvisor=True)
    assert done.oom_killed and not done.hard_cap_hit and done.exit_code == 137


def test_under_runc_only_the_engine_says_out_of_memory() -> None:
    assert not result(ExitInfo(exit_code=137, oom_killed=False), gvisor=False).oom_killed
    assert result(ExitInfo(exit_code=137, oom_killed=True), gvisor=False).oom_killed


def test_the_hard_cap_and_the_timeout_are_never_taken_for_out_of_memory() -> None:
    capped = result(ExitInfo(exit_code=137, oom_killed=False), elapsed=600.0, gvisor=True)
    assert capped.hard_cap_hit and not capped.oom_killed
    late = result(ExitInfo(exit_code=137, oom_killed=False), gvisor=True, timed_out=True)
    assert late.timed_out and not late.oom_killed
