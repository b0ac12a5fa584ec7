"""`when_unavailable = "run_unsandboxed"` (sandboxes/script.py): only a sandbox that fails
before the script started may send it to the host. Once the container is up, an error,
even one mapped to SandboxUnavailable (a transport error mid-run), is an error answer and
nothing runs on the host. The script writes a marker file: whether it exists says whether
it ran on the host. The bypass itself on the real engine: tests/integration/
test_script_lifecycle.py::test_run_unsandboxed_runs_on_the_host_and_audits_every_bypass."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from sandboxes.errors import EngineError, SandboxUnavailable, UnavailableCode
from sandboxes.script import ScriptContext, ScriptSettings, execute_program
from sandboxes.script_policy import ExecuteProgramParams
from tests.fakes import InMemoryBackend

pytestmark = [pytest.mark.unit, pytest.mark.anyio]

LOST = SandboxUnavailable(
    UnavailableCode.DAEMON_UNREACHABLE, "the engine's connection dropped", "restart it"
)


class Audit:
    def __init__(self) -> None:
        self.events: list[str] = []

    def record(self, event: str, agent: str | None, details: Mapping[str, Any]) -> None:
        self.events.append(event)


def context(tmp_path: Path, backend: InMemoryBackend, audit: Audit) -> ScriptContext:
    bypassing = ScriptSettings(
        image="corral-sandbox:test", tmp_size_mb=16, when_unavailable="run_unsandboxed"
    )
    return ScriptContext(backend, audit, tmp_path / "work", bypassing, agent="alice")


def marking(marker: Path) -> ExecuteProgramParams:
    return ExecuteProgramParams(
        language="python",
        code=f"open({str(marker)!r}, 'w').write('ran')\nprint('done')\n",
        timeout_seconds=30,
    )


async def test_a_failure_after_the_script_started_never_runs_it_on_the_host(
    tmp_path: Path,
) -> None:
    backend = InMemoryBackend(script_failure=("after", LOST))
    audit = Audit()
    marker = tmp_path / "ran-on-host"

    with pytest.raises(EngineError, match="after the script started") as caught:
        await execute_program(marking(marker), context(tmp_path, backend, audit))

    assert backend.scripts_started == 1
    assert caught.value.__cause__ is LOST
    assert not marker.exists(), "the script ran again on the host"
    assert "script_sandbox_bypassed" not in audit.events


async def test_a_failure_before_the_script_started_may_still_bypass(tmp_path: Path) -> None:
    """The control: the same error before the start is what `run_unsandboxed` is for, and
    the marker proves this test sees a host run when there is one."""
    backend = InMemoryBackend(script_failure=("before", LOST))
    audit = Audit()
    marker = tmp_path / "ran-on-host"

    result = await execute_program(marking(marker), context(tmp_path, backend, audit))

    assert backend.scripts_started == 0
    assert marker.read_text() == "ran"
    assert result.sandboxed is False
    # The sandboxed attempt is on record before it starts; then why it failed, the bypass,
    # and the host run.
    assert audit.events[:4] == [
        "script_started",
        "script_sandbox_unavailable",
        "script_sandbox_bypassed",
        "script_started",
    ]
