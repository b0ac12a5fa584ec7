"""What one execute_program call (sandboxes.script) is given and answers: the script
sandbox's settings, the call's context, the uid:gid scripts run as, and the result."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from sandboxes.ports import AuditSink, ContainerBackend, ScriptPool, Slots
from sandboxes.script_policy import (
    HARD_CAP_SECONDS,
    sandbox_user,
)

OutputSink = Callable[[bytes], None]


@dataclass(frozen=True, slots=True)
class ScriptResult:
    exit_code: int | None
    timed_out: bool
    hard_cap_hit: bool
    oom_killed: bool
    truncated: bool
    output: str
    output_bytes: int
    returned_bytes: int
    duration_ms: int
    timeout_seconds: int
    sandboxed: bool

    def structured(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """One line for the model/terminal: how the script ended."""
        if self.hard_cap_hit:
            how = f"killed by the {HARD_CAP_SECONDS} s hard cap (container removed)"
        elif self.timed_out:
            how = f"timed out after {self.timeout_seconds} s (killed and removed)"
        elif self.oom_killed:
            how = "killed: out of memory (limit 2 GiB, no swap)"
        else:
            how = f"exit code {self.exit_code}"
        where = "" if self.sandboxed else " [ran UNSANDBOXED on the host]"
        return f"{how}; {self.duration_ms} ms{where}"

    def to_text(self) -> str:
        parts = [self.output]
        if self.truncated:
            cut = self.output_bytes - self.returned_bytes
            parts.append(
                f"\n[output truncated: {self.returned_bytes} of {self.output_bytes} bytes "
                f"returned, {cut} bytes cut]"
            )
        parts.append(f"\n[{self.summary()}]")
        return "".join(parts)


@dataclass(frozen=True, slots=True)
class ScriptSettings:
    """`[container.sandbox]` as the script kind needs it."""

    image: str
    tmp_size_mb: int
    runtime: str = "runc"  # the engine's OCI runtime: runc, or runsc (gVisor)
    when_unavailable: Literal["refuse", "run_unsandboxed"] = "refuse"


@dataclass(frozen=True, slots=True)
class InvalidSettings:
    """`[container.sandbox]` could not be read: nothing runs, and this says why."""

    problems: tuple[str, ...]
    file: str


@dataclass(frozen=True, slots=True)
class ScriptContext:
    """What one execute_program call needs from its surroundings."""

    backend: ContainerBackend
    audit: AuditSink
    work_dir: Path
    sandbox: ScriptSettings | InvalidSettings
    agent: str = "cli"
    slots: Slots | None = None  # None: no limit (a caller that runs one script at a time)
    pool: ScriptPool | None = None  # None: every run is cold (`[container.sandbox] warm = 0`)


def _is_wsl() -> bool:
    try:
        return "microsoft" in Path("/proc/version").read_text().lower()
    except OSError:
        return False


def script_user() -> str:
    """The uid:gid scripts run as on this host (S1.2), cold or warm."""
    return sandbox_user(os.getuid(), os.getgid(), is_wsl=_is_wsl())
