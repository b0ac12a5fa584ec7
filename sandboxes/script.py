"""execute_program: run one script in the script sandbox (SPEC S1).

The policy (params, container spec, output caps) lives in `script_policy`;
this module drives one run through a `ContainerBackend` and reports it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

import anyio

from sandboxes.errors import EngineError, SandboxBusy, SandboxUnavailable, UnavailableCode
from sandboxes.events import NO_EVENTS, PROGRESS_INTERVAL_SECONDS, CallEvents, OutputTail
from sandboxes.host_exec import HostRun
from sandboxes.ports import AuditSink, ContainerBackend, ExitInfo, ScriptPool, Slots, WarmScript
from sandboxes.script_policy import (
    HARD_CAP_SECONDS,
    SCRIPT_FILES,
    ExecuteProgramParams,
    OutputCollector,
    build_script_spec,
    sandbox_user,
)

OutputSink = Callable[[bytes], None]
T = TypeVar("T")
# The host kills a run this long past the hard cap if the in-container cap has not ended
# it (the script cannot reach the host); and gives up on a wedged engine later still.
HOST_CAP_GRACE = 5
HOST_BACKSTOP_GRACE = 30


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


class _Execution(Protocol):
    def output(self) -> AsyncIterator[bytes]: ...

    async def wait(self) -> ExitInfo: ...

    async def kill(self) -> None: ...


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


def _write_workspace(work_dir: Path, language: str, code: str) -> Path:
    work_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    workspace = Path(tempfile.mkdtemp(prefix="exec-", dir=work_dir))
    # The sandbox user (uid 1000 when we are root) must be able to read the script.
    workspace.chmod(0o755)
    _write_script(workspace, language, code)
    return workspace


def _write_script(workspace: Path, language: str, code: str) -> None:
    script = workspace / SCRIPT_FILES[language][0]
    script.write_text(code, encoding="utf-8")
    script.chmod(0o644)


async def _drive(
    execution: _Execution,
    collector: OutputCollector,
    timeout_seconds: int,
    on_output: OutputSink | None,
    events: CallEvents,
    tail: OutputTail,
) -> tuple[ExitInfo, bool]:
    timed_out = False
    started = time.monotonic()
    watched = events is not NO_EVENTS

    async def report() -> None:
        """Elapsed of timeout and the new output lines, every PROGRESS_INTERVAL_SECONDS."""
        while True:
            await anyio.sleep(PROGRESS_INTERVAL_SECONDS)
            elapsed = time.monotonic() - started
            await events.progress(
                "running",
                f"running: {elapsed:.1f} s of {timeout_seconds} s",
                remaining=max(0.0, timeout_seconds - elapsed),
                output=tail.take(),
            )

    async def read() -> bool:
        with anyio.move_on_after(timeout_seconds) as scope:
            async for chunk in execution.output():
                kept = collector.feed(chunk)
                if kept and watched:
                    tail.feed(kept)
                if kept and on_output is not None:
                    on_output(kept)
        return scope.cancelled_caught

    if watched:
        await events.progress(
            "running", f"running: 0.0 s of {timeout_seconds} s", remaining=timeout_seconds
        )
    out_of_time = await (_reporting(report, read) if watched else read())
    if out_of_time:
        timed_out = True
        await execution.kill()
    return await execution.wait(), timed_out


async def _reporting(
    report: Callable[[], Coroutine[Any, Any, None]], body: Callable[[], Awaitable[T]]
) -> T:
    """`body()`, with `report()` running beside it until it ends. An error of the body is
    raised as itself (not wrapped in an exception group)."""
    failure: Exception | None = None
    async with anyio.create_task_group() as reporters:
        reporters.start_soon(report)
        try:
            result = await body()
        except Exception as exc:
            failure = exc
        finally:
            reporters.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return result


async def _check_sandbox(ctx: ScriptContext) -> ScriptSettings:
    if isinstance(ctx.sandbox, InvalidSettings):
        raise SandboxUnavailable(
            UnavailableCode.INVALID_CONFIG,
            f"[container.sandbox] is invalid: {'; '.join(ctx.sandbox.problems)} "
            f"(in {ctx.sandbox.file})",
            "fix config.toml, then check it with `corral doctor`",
        )
    await ctx.backend.check(ctx.sandbox.image)
    return ctx.sandbox


@dataclass(frozen=True, slots=True)
class _Call:
    """One execute_program call: what each step of its run reads."""

    params: ExecuteProgramParams
    ctx: ScriptContext
    on_output: OutputSink | None
    hard_cap_seconds: int
    events: CallEvents


async def execute_program(
    params: ExecuteProgramParams,
    ctx: ScriptContext,
    *,
    on_output: OutputSink | None = None,
    hard_cap_seconds: int = HARD_CAP_SECONDS,
    events: CallEvents = NO_EVENTS,
) -> ScriptResult:
    """Run `params.code`; raise SandboxUnavailable (after auditing it) if it cannot run safely.

    `on_output` gets every kept chunk of the merged output as it comes; `events` gets the
    phases, the elapsed time with the newest output lines (`sandboxes.events.OutputTail`)
    every PROGRESS_INTERVAL_SECONDS while the script runs, and a last `finished` event
    before this returns (none after). `hard_cap_seconds` exists so a test can prove the
    hard cap fires on its own; callers leave it at 600.
    """
    call = _Call(params, ctx, on_output, hard_cap_seconds, events)
    if ctx.pool is not None and isinstance(ctx.sandbox, ScriptSettings):
        pooled = await _run_pooled(call, ctx.sandbox, ctx.pool)
        if isinstance(pooled, ScriptResult):
            return pooled
        return await _unavailable(pooled, call)
    try:
        sandbox = await _check_sandbox(ctx)
        # A backend may learn only at start that the sandbox cannot be used (a cluster
        # that cannot pull the image): the script has not run, so it is the same answer.
        session, start = _cold_start(call, sandbox)
        return await _run(call, start, sandboxed=True, session=session)
    except SandboxUnavailable as exc:
        return await _unavailable(exc, call)


async def _unavailable(exc: SandboxUnavailable, call: _Call) -> ScriptResult:
    """Audit why the sandbox cannot be used; raise it, or run on the host if so configured."""
    ctx, events = call.ctx, call.events
    ctx.audit.record(
        "script_sandbox_unavailable",
        ctx.agent,
        {"code_name": exc.code.value, "reason": exc.reason},
    )
    await events.log("error", "sandbox_unavailable", {"code": exc.code.value})
    bypass = (
        isinstance(ctx.sandbox, ScriptSettings)
        and ctx.sandbox.when_unavailable == "run_unsandboxed"
    )
    if not bypass:
        raise exc
    ctx.audit.record(
        "script_sandbox_bypassed",
        ctx.agent,
        {"unavailable": exc.code.value, "language": call.params.language},
    )
    await events.log("warning", "sandbox_bypassed", {"unavailable": exc.code.value})
    return await _run(call, _host_start(call), sandboxed=False, session="host")


@contextlib.asynccontextmanager
async def _slot(ctx: ScriptContext) -> AsyncIterator[None]:
    """A run slot (none without a limit); a refusal as busy, in it or taking it, is audited."""
    try:
        async with contextlib.nullcontext() if ctx.slots is None else ctx.slots.slot():
            yield
    except SandboxBusy as exc:
        ctx.audit.record("script_busy", ctx.agent, {"reason": str(exc)})
        raise


async def _run_pooled(
    call: _Call, sandbox: ScriptSettings, pool: ScriptPool
) -> ScriptResult | SandboxUnavailable:
    """With a pool: take a slot, then claim a warm container (a live one of the current
    image proves the engine and the image, so the per-call check is skipped); on a miss,
    check and run cold in the same slot. The check's failure is returned, not raised, for
    the caller to handle outside the slot."""
    async with _slot(call.ctx):
        claimed = await pool.claim()
        if claimed is None:
            try:
                await call.ctx.backend.check(sandbox.image)
            except SandboxUnavailable as exc:
                return exc
            session, start = _cold_start(call, sandbox)
        else:
            session, start = _warm_start(call, claimed)
        try:
            return await _run_in_slot(
                call, start, sandboxed=True, session=session, warm=claimed is not None
            )
        except BaseException:
            if claimed is not None:
                await claimed.discard()  # already done if its run had started
            raise


Start = Callable[[], contextlib.AbstractAsyncContextManager[_Execution]]


@contextlib.asynccontextmanager
async def _fresh_workspace(ctx: ScriptContext, params: ExecuteProgramParams) -> AsyncIterator[Path]:
    """A private workspace holding the script, removed afterwards (shielded)."""
    workspace = await anyio.to_thread.run_sync(
        _write_workspace, ctx.work_dir, params.language, params.code
    )
    try:
        yield workspace
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(shutil.rmtree, workspace, True)


def _cold_start(call: _Call, sandbox: ScriptSettings) -> tuple[str, Start]:
    """A fresh workspace and a container created for this call (the cold path)."""
    ctx, params = call.ctx, call.params
    session = uuid.uuid4().hex[:12]
    user = script_user()
    labels = ctx.backend.labels(kind="script", agent=ctx.agent, session=session)

    @contextlib.asynccontextmanager
    async def start() -> AsyncIterator[_Execution]:
        async with _fresh_workspace(ctx, params) as workspace:
            spec = build_script_spec(
                image=sandbox.image,
                language=params.language,
                workspace_dir=str(workspace),
                user=user,
                labels=labels,
                tmp_size_mb=sandbox.tmp_size_mb,
                hard_cap_seconds=call.hard_cap_seconds,
                runtime=sandbox.runtime,
            )
            async with ctx.backend.start(spec) as running:
                yield running

    return session, start


def _warm_start(call: _Call, claimed: WarmScript) -> tuple[str, Start]:
    """The claimed container's empty workspace gets the script, then its line starts it."""
    params = call.params

    @contextlib.asynccontextmanager
    async def start() -> AsyncIterator[_Execution]:
        workspace = Path(claimed.workspace)
        await anyio.to_thread.run_sync(_write_script, workspace, params.language, params.code)
        async with claimed.run(params.language, call.hard_cap_seconds) as running:
            yield running

    return claimed.session, start


def _host_start(call: _Call) -> Start:
    """The script on the host, unsandboxed (`when_unavailable = "run_unsandboxed"`)."""
    file_name, interpreter = SCRIPT_FILES[call.params.language]

    @contextlib.asynccontextmanager
    async def start() -> AsyncIterator[_Execution]:
        async with _fresh_workspace(call.ctx, call.params) as workspace:
            argv = ["timeout", "--signal=KILL", str(call.hard_cap_seconds), *interpreter]
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": str(workspace),
                "LANG": "C.UTF-8",
                "PYTHONUNBUFFERED": "1",
            }
            async with HostRun([*argv, str(workspace / file_name)], str(workspace), env) as run:
                yield run

    return start


async def _run(call: _Call, start: Start, *, sandboxed: bool, session: str) -> ScriptResult:
    """Take a slot, then run there (without a pool: the pooled path holds its slot)."""
    async with _slot(call.ctx):
        return await _run_in_slot(call, start, sandboxed=sandboxed, session=session)


@contextlib.asynccontextmanager
async def _started(start: Start) -> AsyncIterator[_Execution]:
    """`start()`, with one rule: once the script has started, a SandboxUnavailable (a
    transport error mapped to it, mid-run or at clean-up) is an EngineError, an error
    answer. Only a script that never started may go to the host (`run_unsandboxed`)."""
    script_started = False
    try:
        async with start() as running:
            script_started = True
            yield running
    except SandboxUnavailable as exc:
        if not script_started:
            raise
        raise EngineError(
            f"the script sandbox failed after the script started ({exc.reason}); "
            "it is not run again, in the sandbox or on the host"
        ) from exc


async def _run_in_slot(
    call: _Call, start: Start, *, sandboxed: bool, session: str, warm: bool = False
) -> ScriptResult:
    """Drive the execution `start` makes, clean up, report, audit."""
    params, events, hard_cap_seconds = call.params, call.events, call.hard_cap_seconds
    collector = OutputCollector()
    tail = OutputTail()
    await events.progress(
        "container",
        "starting the script sandbox" if sandboxed else "starting the script on the host",
    )
    started = time.monotonic()
    try:
        with anyio.fail_after(hard_cap_seconds + HOST_BACKSTOP_GRACE):
            async with _started(start) as running:
                await events.log(
                    "info",
                    "sandbox_started",
                    {"kind": "script", "sandboxed": sandboxed, "timeout": params.timeout_seconds},
                )
                with anyio.move_on_after(hard_cap_seconds + HOST_CAP_GRACE) as host_cap:
                    exit_info, timed_out = await _drive(
                        running, collector, params.timeout_seconds, call.on_output, events, tail
                    )
                if host_cap.cancelled_caught:
                    await running.kill()
                    exit_info, timed_out = await running.wait(), True
    except TimeoutError as exc:
        raise EngineError(
            f"the script was not stopped within {hard_cap_seconds} s + "
            f"{HOST_BACKSTOP_GRACE} s; it was force-removed"
        ) from exc
    elapsed = time.monotonic() - started
    result = _result(
        params,
        collector,
        exit_info,
        timed_out,
        elapsed,
        hard_cap_seconds,
        sandboxed,
        host_cap_hit=host_cap.cancelled_caught,
    )
    _audit_run(call.ctx, params, result, session, warm=warm)
    await events.progress("finished", result.summary(), output=tail.take(final=True))
    return result


def _result(
    params: ExecuteProgramParams,
    collector: OutputCollector,
    exit_info: ExitInfo,
    timed_out: bool,
    elapsed: float,
    hard_cap_seconds: int,
    sandboxed: bool,
    *,
    host_cap_hit: bool = False,
) -> ScriptResult:
    out = collector.result()
    # The in-container cap kills with SIGKILL (exit 137) once `hard_cap_seconds` have passed;
    # the host's own cap, a few seconds later, says so itself.
    hard_cap_hit = host_cap_hit or (
        not timed_out
        and not exit_info.oom_killed
        and exit_info.exit_code == 137
        and elapsed >= hard_cap_seconds - 0.5
    )
    return ScriptResult(
        exit_code=None if (timed_out or hard_cap_hit) else exit_info.exit_code,
        timed_out=timed_out or hard_cap_hit,
        hard_cap_hit=hard_cap_hit,
        oom_killed=exit_info.oom_killed,
        truncated=out.truncated,
        output=out.text,
        output_bytes=out.total_bytes,
        returned_bytes=out.returned_bytes,
        duration_ms=int(elapsed * 1000),
        timeout_seconds=params.timeout_seconds,
        sandboxed=sandboxed,
    )


def _audit_run(
    ctx: ScriptContext,
    params: ExecuteProgramParams,
    result: ScriptResult,
    session: str,
    *,
    warm: bool,
) -> None:
    ctx.audit.record(
        "script_executed",
        ctx.agent,
        {
            "session": session,
            "language": params.language,
            "code_bytes": len(params.code.encode()),
            "exit_code": result.exit_code,
            "timed_out": result.timed_out,
            "hard_cap_hit": result.hard_cap_hit,
            "oom_killed": result.oom_killed,
            "output_bytes": result.output_bytes,
            "truncated": result.truncated,
            "duration_ms": result.duration_ms,
            "sandboxed": result.sandboxed,
            "warm": warm,
        },
    )
