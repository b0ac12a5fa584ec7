"""How many scripts run at once on this host: `[container.sandbox] max_concurrent`.

Each script sandbox may take 2 GiB and holds an engine stream (and a worker thread)
while it runs, so a client that sends many calls at once could starve the machine and
every other tool. A call takes a slot before its container starts:

- within one process, calls wait in order of arrival (a FIFO semaphore), at most
  `max_queued` of them and at most `queue_timeout_seconds` each; beyond either bound
  the call is answered at once with `SandboxBusy`, which says how many run;
- across processes (several agents' MCP servers, `corral run` in CI), a slot is one of
  `max_concurrent` lock files in CORRAL_HOME/slots, held with flock: the kernel frees
  it when its holder exits, however it exits. Between processes the order is not
  strict (a freed slot goes to whichever process looks first; they look every 50 ms).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio

from orchestrator.backends.admission import host_cores
from orchestrator.errors import SandboxBusy

POLL_SECONDS = 0.05
GiB = 1024**3


def default_max_concurrent(memory_bytes: int, cores: int) -> int:
    """Scripts that fit at once: 2 GiB each, 2 GiB kept for the rest of the machine, and at
    most four per core (pure)."""
    by_memory = (memory_bytes - 2 * GiB) // (2 * GiB)
    return max(1, min(by_memory, 4 * max(1, cores)))


def host_memory_bytes() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 4 * GiB


def host_default_max_concurrent() -> int:
    return default_max_concurrent(host_memory_bytes(), host_cores())


class ScriptSlots:
    def __init__(
        self,
        directory: Path,
        max_concurrent: int,
        *,
        max_queued: int,
        queue_timeout_seconds: float,
    ) -> None:
        self.directory = directory
        self.max_concurrent = max_concurrent
        self.max_queued = max_queued
        self.queue_timeout_seconds = queue_timeout_seconds
        self._semaphore = anyio.Semaphore(max_concurrent)  # FIFO: waiters are served in order
        self.running = 0

    def _busy(self, why: str) -> SandboxBusy:
        return SandboxBusy(
            f"busy: {self.running} script(s) running in this server and the limit on this "
            f"host is {self.max_concurrent} ([container.sandbox] max_concurrent); {why}. "
            "Try again in a little while."
        )

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one slot for the body; raise SandboxBusy when none comes within the bounds."""
        waiting = self._semaphore.statistics().tasks_waiting
        if self._semaphore.value == 0 and waiting >= self.max_queued:
            raise self._busy(f"{waiting} more are already waiting")
        deadline = time.monotonic() + self.queue_timeout_seconds
        with anyio.move_on_after(self.queue_timeout_seconds) as scope:
            await self._semaphore.acquire()
        if scope.cancelled_caught:
            raise self._busy(f"this call waited {self.queue_timeout_seconds:g} s")
        try:
            fd = await self._host_slot(deadline)
            self.running += 1
            try:
                yield
            finally:
                self.running -= 1
                os.close(fd)  # releases the flock
        finally:
            self._semaphore.release()

    async def _host_slot(self, deadline: float) -> int:
        await anyio.to_thread.run_sync(self._ensure_directory)
        while True:
            fd = await anyio.to_thread.run_sync(self._try_any_slot)
            if fd is not None:
                return fd
            if time.monotonic() >= deadline:
                raise self._busy(
                    f"every slot on this host is taken by other corral processes; this call "
                    f"waited {self.queue_timeout_seconds:g} s"
                )
            await anyio.sleep(POLL_SECONDS)

    def _ensure_directory(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)

    def _try_any_slot(self) -> int | None:
        for index in range(self.max_concurrent):
            path = self.directory / f"script-{index}.lock"
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return fd
        return None
