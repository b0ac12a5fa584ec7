"""Running a script on the host, for `script_when_unavailable = "run_unsandboxed"` only.

Same shape as a container run (merged output, kill, wait) so the runner drives
both with one loop. The hard cap is enforced by `timeout --signal=KILL` here too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import AsyncIterator

import anyio
from anyio.abc import Process

from sandboxes.ports import ExitInfo
from sandboxes.scoped import Scoped


class HostRun(Scoped):
    def __init__(self, argv: list[str], cwd: str, env: dict[str, str]) -> None:
        self._argv = argv
        self._cwd = cwd
        self._env = env
        self._proc: Process | None = None
        self.id = "host"

    async def open(self) -> None:
        self._proc = await anyio.open_process(
            self._argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=self._cwd,
            env=self._env,
            start_new_session=True,
        )
        self.id = f"host:{self._proc.pid}"

    async def end(self, ok: bool) -> None:
        with anyio.CancelScope(shield=True):
            await self.kill()
            if self._proc is not None:
                await self._proc.wait()
                await self._proc.aclose()

    async def output(self) -> AsyncIterator[bytes]:
        assert self._proc is not None and self._proc.stdout is not None
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError):
            while True:
                yield await self._proc.stdout.receive(65536)

    async def wait(self) -> ExitInfo:
        assert self._proc is not None
        code = await self._proc.wait()
        # A signal death is reported like a container's: 128 + signal number.
        return ExitInfo(exit_code=128 - code if code < 0 else code, oom_killed=False)

    async def kill(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGKILL)
