"""execute_program's policy (SPEC S1), as pure functions: no I/O here.

- `ExecuteProgramParams`: the tool's parameters, validated at the edge.
- `sandbox_user`: which uid:gid the script runs as.
- `build_script_spec`: the locked-down container for one script.
- `OutputCollector`: merged output with the 2 MiB read cap and 1 MiB reply cap.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sandboxes.errors import ParamError
from sandboxes.exit_line import MARK_PREFIX, is_mark
from sandboxes.isolation import PATH, locked_down
from sandboxes.ports import BindMount, ContainerSpec

TIMEOUT_DEFAULT = 30
TIMEOUT_MAX = 300
HARD_CAP_SECONDS = 600
READ_CAP_BYTES = 2 * 1024 * 1024
REPLY_CAP_BYTES = 1024 * 1024
CODE_MAX_BYTES = 1024 * 1024
WORKSPACE = "/workspace"

Language = Literal["python", "bash", "sh"]

SCRIPT_FILES: Mapping[str, tuple[str, tuple[str, ...]]] = {
    # language: (file name, interpreter argv)
    "python": ("main.py", ("python3", "-u")),
    "bash": ("main.sh", ("bash",)),
    "sh": ("main.sh", ("sh",)),
}


class ExecuteProgramParams(BaseModel):
    """Parameters of execute_program (S1.8). Out-of-range values are errors, never clamped."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    code: Annotated[str, Field(min_length=1, description="The script text (at most 1 MiB).")]
    language: Annotated[Language, Field(description="python (default), bash or sh.")] = "python"
    timeout_seconds: Annotated[
        int,
        Field(ge=1, le=TIMEOUT_MAX, description="1-300, default 30; larger is an error."),
    ] = TIMEOUT_DEFAULT

    @field_validator("timeout_seconds", mode="before")
    @classmethod
    def _no_bool(cls, value: object) -> object:
        # "12" and 12 are accepted (S2.7); true/false are not a number of seconds.
        if isinstance(value, bool):
            raise ValueError("a boolean is not a number of seconds")
        return value


def _describe(loc: str, err_type: str, got: object) -> str:
    allowed = {
        "timeout_seconds": f"an integer from 1 to {TIMEOUT_MAX} (default {TIMEOUT_DEFAULT})",
        "language": "one of 'python', 'bash', 'sh'",
        "code": f"a non-empty script of at most {CODE_MAX_BYTES} bytes",
    }.get(loc)
    if err_type == "missing":
        return f"{loc}: required" + (f"; must be {allowed}" if allowed else "")
    if err_type == "extra_forbidden":
        return f"{loc}: unknown parameter (allowed: code, language, timeout_seconds)"
    return f"{loc}: must be {allowed} (got {got!r})" if allowed else f"{loc}: invalid ({got!r})"


def parse_params(raw: Mapping[str, object]) -> ExecuteProgramParams:
    """Validate raw tool arguments; raise ParamError naming each bad parameter and its range."""
    try:
        params = ExecuteProgramParams.model_validate(dict(raw))
    except ValidationError as exc:
        problems = [
            _describe(".".join(str(p) for p in e["loc"]), e["type"], e.get("input"))
            for e in exc.errors()
        ]
        raise ParamError("; ".join(problems)) from exc
    if len(params.code.encode()) > CODE_MAX_BYTES:
        raise ParamError(_describe("code", "too_long", f"{len(params.code.encode())} bytes"))
    return params


def sandbox_user(host_uid: int, host_gid: int, *, is_wsl: bool) -> str:
    """S1.2: the host user, or 1000:1000 when the host process is root (always on WSL2)."""
    if is_wsl or host_uid == 0:
        return "1000:1000"
    return f"{host_uid}:{host_gid}"


RUNSC_ENVIRONMENT = {"TINI_VERBOSITY": "0"}


# The script's own shell (issue 23 item 8, `sandboxes.exit_line`): it runs the interpreter
# with stderr merged into stdout, then prints the exit line `MARK CODE:OOM_KILLS` on that
# stdout (the OOM kill count from the container's cgroup: v2's memory.events, v1's
# memory.oom_control; empty where neither is readable) and exits with the script's status.
EXIT_SHIM = (
    'm=$1; shift; "$@" 2>&1; c=$?; o=; '
    "for f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do "
    '[ -r "$f" ] || continue; '
    'while read -r k v; do [ "$k" = oom_kill ] && o=$v; done < "$f"; done; '
    'printf "%s%s:%s\\n" "$m" "$c" "$o"; exit "$c"'
)
_MARK_SLOT = "@MARK@"  # where warm_command puts the mark its line brought


def script_command(
    language: str, hard_cap_seconds: int, runtime: str = "runc", *, exit_mark: str
) -> tuple[str, ...]:
    """The container's command: the hard cap as PID 1, tini under it as a child subreaper
    (reaps zombies; both are in the image, so no host binary is mounted), then the
    script's shell (`EXIT_SHIM`: the interpreter with 2>&1, then the exit line marked
    `exit_mark`, `sandboxes.exit_line`).

    `timeout --signal=KILL` is PID 1 because the script cannot stop or kill PID 1: the
    kernel drops SIGSTOP and SIGKILL sent to a namespace's init from inside it, and any
    other signal it can send makes `timeout` end the run. (As a child of tini, the
    script's own uid could `kill -STOP` it and switch the cap off.) When PID 1 exits,
    the kernel kills everything left in the container. The host enforces the cap too
    (`sandboxes.script`), a few seconds later, in case this one is defeated. stderr is
    merged into stdout at the source, so the order of the two is the order written.

    Under gVisor (`runtime="runsc"`) tini runs without `-s`: gVisor's kernel has no child
    subreapers (tini would refuse to start), so orphans go to PID 1 (`timeout`) and stay
    zombies until the run ends; `TINI_VERBOSITY=0` (`RUNSC_ENVIRONMENT`) keeps tini's
    warning about that out of the output.
    """
    if exit_mark != _MARK_SLOT and not is_mark(exit_mark):
        raise ValueError(f"not an exit mark: {exit_mark!r}")
    file_name, interpreter = SCRIPT_FILES[language]
    return (
        "timeout",
        "--signal=KILL",
        str(hard_cap_seconds),
        "tini",
        *(() if runtime == "runsc" else ("-s",)),
        "--",
        "sh",
        "-c",
        EXIT_SHIM,
        "sh",
        exit_mark,
        *interpreter,
        f"{WORKSPACE}/{file_name}",
    )


def warm_command(runtime: str = "runc") -> tuple[str, ...]:
    """The command of a warm pool container (issue 14): a shell, as the same user under the
    same limits, that blocks reading one line `LANGUAGE CAP MARK` from its stdin, then
    `exec`s exactly `script_command(LANGUAGE, CAP, exit_mark=MARK)` with stdin from
    /dev/null (as a cold run's is). The hard cap so counts from the claim, not from the
    pool's creation, and PID 1 is `timeout` again once the script runs. Anything but a
    known language, a number and a mark ends the container (125) without running
    anything; stdin closed (the owner died) ends it (0).
    """
    branches = []
    for language in SCRIPT_FILES:
        argv = script_command(language, 0, runtime, exit_mark=_MARK_SLOT)
        assert argv[:2] == ("timeout", "--signal=KILL")
        rest = shlex.join(argv[3:]).replace(f" {_MARK_SLOT} ", ' "$mark" ')
        branches.append(f'{language}) exec timeout --signal=KILL "$cap" {rest} </dev/null ;;')
    shim = "\n".join(
        [
            "read -r lang cap mark || exit 0",
            "case \"$cap\" in ''|*[!0-9]*) exit 125 ;; esac",
            f'case "$mark" in {MARK_PREFIX}{"[0-9a-f]" * 16}) ;; *) exit 125 ;; esac',
            'case "$lang" in',
            *branches,
            "esac",
            "exit 125",
        ]
    )
    return ("sh", "-c", shim)


def warm_signal(language: str, hard_cap_seconds: int, exit_mark: str) -> bytes:
    """The line that starts a claimed warm container on `language` (see `warm_command`)."""
    if language not in SCRIPT_FILES:
        raise ValueError(f"unknown language {language!r}")
    if not is_mark(exit_mark):
        raise ValueError(f"not an exit mark: {exit_mark!r}")
    return f"{language} {int(hard_cap_seconds)} {exit_mark}\n".encode()


def build_script_spec(
    *,
    image: str,
    language: str | None,
    workspace_dir: str,
    user: str,
    labels: Mapping[str, str],
    tmp_size_mb: int,
    hard_cap_seconds: int = HARD_CAP_SECONDS,
    runtime: str = "runc",
    exit_mark: str | None = None,
) -> ContainerSpec:
    """Every S1.2 isolation flag at once (the limits themselves: `sandboxes.isolation`).
    `language=None` builds a warm pool container: the same spec, but the command waits for
    `warm_signal` on its stdin (the only other difference: stdin is open). A cold run's
    spec needs its `exit_mark` (`sandboxes.exit_line.new_mark`)."""
    if language is not None and exit_mark is None:
        raise ValueError("a script's spec needs its exit mark")
    return locked_down(
        image=image,
        command=(
            warm_command(runtime)
            if language is None
            else script_command(language, hard_cap_seconds, runtime, exit_mark=str(exit_mark))
        ),
        stdin_open=language is None,
        labels=labels,
        user=user,
        network=None,
        tmpfs={"/tmp": f"rw,exec,nosuid,nodev,size={tmp_size_mb}m"},
        mounts=(BindMount(source=workspace_dir, target=WORKSPACE, read_only=True),),
        environment={
            "HOME": "/tmp",
            "LANG": "C.UTF-8",
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PATH": PATH,
            **(RUNSC_ENVIRONMENT if runtime == "runsc" else {}),
        },
        working_dir=WORKSPACE,
        deadline_seconds=None if language is None else hard_cap_seconds,
        runtime=runtime,
    )


def cut_utf8(data: bytes, limit: int) -> bytes:
    """At most `limit` bytes of `data`, never splitting a UTF-8 character."""
    if len(data) <= limit:
        return data
    end = limit
    # Step back over continuation bytes (10xxxxxx) to the start of the split character.
    while end > 0 and (data[end] & 0xC0) == 0x80:
        end -= 1
    return data[:end]


@dataclass(frozen=True, slots=True)
class CollectedOutput:
    text: str
    truncated: bool
    total_bytes: int
    kept_bytes: int
    returned_bytes: int

    def truncation_note(self) -> str:
        if not self.truncated:
            return ""
        return (
            f"[output truncated: {self.returned_bytes} of {self.total_bytes} bytes returned, "
            f"{self.total_bytes - self.returned_bytes} bytes cut; corral keeps at most "
            f"{READ_CAP_BYTES} bytes and returns at most {REPLY_CAP_BYTES}]"
        )


class OutputCollector:
    """Keeps the first `read_cap` bytes, counts the rest, returns at most `reply_cap`."""

    def __init__(self, read_cap: int = READ_CAP_BYTES, reply_cap: int = REPLY_CAP_BYTES) -> None:
        if reply_cap >= read_cap:
            # The read cap may split a character; the reply cap must leave room to cut cleanly.
            raise ValueError("reply_cap must be smaller than read_cap")
        self._read_cap = read_cap
        self._reply_cap = reply_cap
        self._kept = bytearray()
        self.total_bytes = 0

    def feed(self, chunk: bytes) -> bytes:
        """Account for `chunk`; return the part that was kept (what a live stream may show)."""
        self.total_bytes += len(chunk)
        room = self._read_cap - len(self._kept)
        if room <= 0:
            return b""
        kept = chunk[:room]
        self._kept += kept
        return kept

    def result(self) -> CollectedOutput:
        returned = cut_utf8(bytes(self._kept), self._reply_cap)
        return CollectedOutput(
            text=returned.decode("utf-8", errors="replace"),
            truncated=self.total_bytes > len(returned),
            total_bytes=self.total_bytes,
            kept_bytes=len(self._kept),
            returned_bytes=len(returned),
        )
