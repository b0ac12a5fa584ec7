"""How an execute_program run starts (sandboxes.script): the script written to a private
workspace, then a cold container, a claimed warm one, or the host (unsandboxed)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import anyio

from sandboxes.errors import HomeUnwritable
from sandboxes.events import CallEvents
from sandboxes.exit_line import new_mark
from sandboxes.host_exec import HostRun
from sandboxes.ports import ExitInfo, WarmScript
from sandboxes.script_call import OutputSink, ScriptContext, ScriptSettings, script_user
from sandboxes.script_policy import (
    SCRIPT_FILES,
    ExecuteProgramParams,
    build_script_spec,
)


class _Execution(Protocol):
    def output(self) -> AsyncIterator[bytes]: ...

    async def wait(self) -> ExitInfo: ...

    async def kill(self) -> None: ...


@dataclass(frozen=True, slots=True)
class _Call:
    """One execute_program call: what each step of its run reads."""

    params: ExecuteProgramParams
    ctx: ScriptContext
    on_output: OutputSink | None
    hard_cap_seconds: int
    events: CallEvents
    exit_mark: str = field(default_factory=new_mark)  # this run's exit line (exit_line)


def _write_workspace(work_dir: Path, language: str, code: str) -> Path:
    try:
        work_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        workspace = Path(tempfile.mkdtemp(prefix="exec-", dir=work_dir))
    except OSError as exc:
        raise HomeUnwritable("a script's workspace in", work_dir, _reason(exc)) from exc
    try:
        # The sandbox user (uid 1000 when we are root) must be able to read the script.
        workspace.chmod(0o755)
        _write_script(workspace, language, code)
    except BaseException:
        shutil.rmtree(workspace, ignore_errors=True)
        raise
    return workspace


def _write_script(workspace: Path, language: str, code: str) -> None:
    script = workspace / SCRIPT_FILES[language][0]
    try:
        script.write_text(code, encoding="utf-8")
        script.chmod(0o644)
    except OSError as exc:
        raise HomeUnwritable("the script", script, _reason(exc)) from exc


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


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
                exit_mark=call.exit_mark,
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
        async with claimed.run(params.language, call.hard_cap_seconds, call.exit_mark) as running:
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
