"""execute_program: run one script in the script sandbox (SPEC S1).

The policy (params, container spec, output caps) lives in `script_policy`; what a call
is given and answers in `script_call`; how a run starts in `_script_start` and how it is
driven to its result in `_script_run`. This module picks the path (warm, cold, or the
host when so configured) and holds the run slot.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from sandboxes._script_run import HOST_BACKSTOP_GRACE, HOST_CAP_GRACE, _run_in_slot
from sandboxes._script_start import Start, _Call, _cold_start, _host_start, _warm_start
from sandboxes.errors import SandboxBusy, SandboxUnavailable, UnavailableCode
from sandboxes.events import NO_EVENTS, CallEvents
from sandboxes.ports import ScriptPool
from sandboxes.script_call import (
    InvalidSettings,
    OutputSink,
    ScriptContext,
    ScriptResult,
    ScriptSettings,
    script_user,
)
from sandboxes.script_policy import (
    HARD_CAP_SECONDS,
    ExecuteProgramParams,
)

__all__ = [
    "HOST_BACKSTOP_GRACE",
    "HOST_CAP_GRACE",
    "InvalidSettings",
    "ScriptContext",
    "ScriptResult",
    "ScriptSettings",
    "execute_program",
    "script_user",
]


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
async def _slot(ctx: ScriptContext, events: CallEvents) -> AsyncIterator[None]:
    """A run slot (none without a limit); a refusal as busy, in it or taking it, is audited."""
    if ctx.slots is not None:
        await events.progress("slot", "waiting for a script slot")
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
    async with _slot(call.ctx, call.events):
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


async def _run(call: _Call, start: Start, *, sandboxed: bool, session: str) -> ScriptResult:
    """Take a slot, then run there (without a pool: the pooled path holds its slot)."""
    async with _slot(call.ctx, call.events):
        return await _run_in_slot(call, start, sandboxed=sandboxed, session=session)
