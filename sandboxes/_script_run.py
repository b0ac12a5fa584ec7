"""One execute_program run driven to its result (sandboxes.script): the output read
within the timeout, progress reported, the caps enforced, the result built and audited."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import anyio

from sandboxes._script_start import Start, _Call, _Execution
from sandboxes.beside import tasks_beside
from sandboxes.errors import AuditUnavailable, EngineError, HomeUnwritable, SandboxUnavailable
from sandboxes.events import NO_EVENTS, PROGRESS_INTERVAL_SECONDS, CallEvents, OutputTail
from sandboxes.exit_line import ExitLine
from sandboxes.ports import ExitInfo
from sandboxes.script_call import OutputSink, ScriptContext, ScriptResult
from sandboxes.script_policy import (
    ExecuteProgramParams,
    OutputCollector,
)

T = TypeVar("T")
# The host kills a run this long past the hard cap if the in-container cap has not ended
# it (the script cannot reach the host); and gives up on a wedged engine later still.
HOST_CAP_GRACE = 5
HOST_BACKSTOP_GRACE = 30


async def _drive(
    execution: _Execution,
    collector: OutputCollector,
    timeout_seconds: int,
    on_output: OutputSink | None,
    events: CallEvents,
    tail: OutputTail,
    exit_line: ExitLine,
) -> tuple[ExitInfo, bool]:
    """Read the output until it ends, or until the script's plain exit line (the output is
    whole then: `sandboxes.exit_line`), within the timeout; then the exit, from that line
    or from the engine."""
    timed_out = False
    started = time.monotonic()
    watched = events is not NO_EVENTS

    async def report(stop: anyio.Event) -> None:
        """Elapsed of timeout and the new output lines, every PROGRESS_INTERVAL_SECONDS,
        until `stop` (what is left goes in the final progress)."""
        while True:
            with anyio.move_on_after(PROGRESS_INTERVAL_SECONDS):
                await stop.wait()
            if stop.is_set():
                return
            elapsed = time.monotonic() - started
            await events.progress(
                "running",
                f"running: {elapsed:.1f} s of {timeout_seconds} s",
                remaining=max(0.0, timeout_seconds - elapsed),
                output=tail.take(),
            )

    def take(chunk: bytes) -> None:
        kept = collector.feed(chunk)
        if kept and watched:
            tail.feed(kept)
        if kept and on_output is not None:
            on_output(kept)

    async def read() -> bool:
        with anyio.move_on_after(timeout_seconds) as scope:
            async for chunk in execution.output():
                take(exit_line.feed(chunk))
                if exit_line.plain:
                    break  # the output is whole; the container's teardown is not ours
        take(exit_line.rest())
        return scope.cancelled_caught

    if watched:
        await events.progress(
            "running", f"running: 0.0 s of {timeout_seconds} s", remaining=timeout_seconds
        )
    out_of_time = await (_reporting(report, read) if watched else read())
    if out_of_time:
        timed_out = True
        await execution.kill()
    elif exit_line.said is not None and exit_line.plain:
        return ExitInfo(exit_code=exit_line.said.code, oom_killed=False), False
    return await execution.wait(), timed_out


async def _reporting(
    report: Callable[[anyio.Event], Coroutine[Any, Any, None]], body: Callable[[], Awaitable[T]]
) -> T:
    """`body()`, with `report(stop)` running beside it until it ends. Once the body has
    returned, a report being sent is let finish (it has taken its lines from the tail:
    cancelled mid-send, they would be said nowhere), then `stop` ends the reports. An
    error of the body cancels them and is raised as itself (not in an exception group)."""
    stop, stopped = anyio.Event(), anyio.Event()

    async def reporter() -> None:
        try:
            await report(stop)
        finally:
            stopped.set()

    async with tasks_beside() as reporters:
        reporters.start_soon(reporter)
        result = await body()
        stop.set()
        await stopped.wait()
        return result


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
    _audit_start(call, session, sandboxed=sandboxed, warm=warm)
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
                        running,
                        collector,
                        params.timeout_seconds,
                        call.on_output,
                        events,
                        tail,
                        ExitLine(call.exit_mark),
                    )
                if host_cap.cancelled_caught:
                    await running.kill()
                    exit_info, timed_out = await running.wait(), True
    except HomeUnwritable as exc:  # its workspace: before anything ran
        _audit_not_run(call, session, exc)
        raise
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
        gvisor=sandboxed and getattr(call.ctx.sandbox, "runtime", "runc") == "runsc",
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
    gvisor: bool = False,
) -> ScriptResult:
    out = collector.result()
    killed = not timed_out and not host_cap_hit and exit_info.exit_code == 137
    # The in-container cap kills with SIGKILL (exit 137) once `hard_cap_seconds` have passed;
    # the host's own cap, a few seconds later, says so itself.
    capped = killed and elapsed >= hard_cap_seconds - 0.5
    # Under gVisor the engine does not always report an OOM kill (google/gvisor#2433): a
    # SIGKILL that neither the timeout nor a cap sent is the memory limit there.
    oom_killed = exit_info.oom_killed or (gvisor and killed and not capped)
    hard_cap_hit = host_cap_hit or (capped and not oom_killed)
    return ScriptResult(
        exit_code=None if (timed_out or hard_cap_hit) else exit_info.exit_code,
        timed_out=timed_out or hard_cap_hit,
        hard_cap_hit=hard_cap_hit,
        oom_killed=oom_killed,
        truncated=out.truncated,
        output=out.text,
        output_bytes=out.total_bytes,
        returned_bytes=out.returned_bytes,
        duration_ms=int(elapsed * 1000),
        timeout_seconds=params.timeout_seconds,
        sandboxed=sandboxed,
    )


def _audit_start(call: _Call, session: str, *, sandboxed: bool, warm: bool) -> None:
    """Before anything runs: a call whose start the audit cannot hold does not run
    (AuditUnavailable), and a run the gateway dies in is on record."""
    call.ctx.audit.record(
        "script_started",
        call.ctx.agent,
        {
            "session": session,
            "language": call.params.language,
            "code_bytes": len(call.params.code.encode()),
            "sandboxed": sandboxed,
            "warm": warm,
        },
    )


def _audit_not_run(call: _Call, session: str, exc: HomeUnwritable) -> None:
    """The started run that never ran, on record when the disk still takes a line."""
    with contextlib.suppress(AuditUnavailable):
        call.ctx.audit.record(
            "script_not_run", call.ctx.agent, {"session": session, "reason": str(exc)[:300]}
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
