"""The warm pool of the script sandbox (issue 14): `[container.sandbox] warm = K`.

K containers are created ahead with the exact S1.2 spec (`build_script_spec` with no
language: only the command differs, a shell blocked reading one line on its stdin), each
with its own empty private workspace mounted read-only at /workspace. A call claims one,
writes its script into that workspace and sends the line (`warm_signal`): the shell
`exec`s the same hard-capped command a cold run starts with, so the timeout and the
600 s cap count from the claim. A container is used once and removed; the pool refills
in the background.

- Slots: an idle pool container is a blocked shell (a few hundred KiB), not a running
  script, so it holds no script slot; a call claims only once it holds a slot, so a warm
  container never runs a script outside the host-wide budget.
- Staleness, checked at each claim without waiting on a container: a container whose
  attach stream became readable (it ended, or wrote something it should not) or whose
  image id is not the configured image's id now (`corral images build` replaced it) is
  removed, never handed out; a changed image empties the whole pool.
- Ownership: pool containers carry the owner's labels like any other (agent label
  `warm-pool`, as the agent is not known until the claim; the audit names the agent), so
  the owner watchdog removes them if the owner is SIGKILLed and `corral reap` removes
  them if that fails too; `close` removes them when the owner stops.
- Owners: `corral mcp` (a long-lived server, one pool per process). One-shot `corral run`
  never opens one: filling a pool it cannot use would only cost it.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import uuid
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import TaskGroup

from orchestrator.docker_backend import DockerBackend, DockerRun
from orchestrator.errors import CorralError
from sandboxes.script_policy import build_script_spec, warm_signal

logger = logging.getLogger("corral.pool")
POOL_AGENT = "warm-pool"
RETRY_SECONDS = 5.0  # after a failed refill (engine down, image missing), or at a claim


@dataclass(frozen=True, slots=True)
class PoolSettings:
    image: str
    size: int
    work_dir: Path
    user: str
    tmp_size_mb: int
    runtime: str = "runc"


@dataclass(eq=False, slots=True)
class WarmContainer:
    """One pool container: `sandboxes.ports.WarmScript` once claimed."""

    run_: DockerRun
    workspace: str
    session: str
    pool: WarmPool
    _done: bool = field(default=False)

    @property
    def id(self) -> str:
        return self.run_.id

    @contextlib.asynccontextmanager
    async def run(self, language: str, hard_cap_seconds: int) -> AsyncIterator[DockerRun]:
        """Start the script. Left normally (the script's container has exited: the caller
        waited for it), the stopped container is removed in the background, off the
        caller's time; left by an error or a cancellation, it is removed before this
        returns, as a cold run's is."""
        await self.run_.send(warm_signal(language, hard_cap_seconds))
        try:
            yield self.run_
        except BaseException:
            await self.discard()
            raise
        if not self.pool._remove_later(self):
            await self.discard()  # the pool closed while this ran: remove it here

    async def discard(self) -> None:
        """Remove the container and its workspace (idempotent, shielded). An engine that
        fails the removal is logged, not raised: the pool's task group must live on, and
        the owner's watchdog or `corral reap` removes what is left."""
        with anyio.CancelScope(shield=True):
            if self._done:
                return
            self._done = True
            try:
                await self.run_._cleanup()
            except CorralError as exc:
                logger.warning("warm pool: could not remove %s: %s", self.id[:12], exc)
            finally:
                await anyio.to_thread.run_sync(shutil.rmtree, self.workspace, True)


def _make_workspace(work_dir: Path) -> str:
    work_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    workspace = Path(tempfile.mkdtemp(prefix="warm-", dir=work_dir))
    workspace.chmod(0o755)  # the sandbox user (uid 1000 when we are root) reads it
    return str(workspace)


class WarmPool:
    """`sandboxes.ports.ScriptPool` on Docker. Open with `open_pool`."""

    def __init__(self, backend: DockerBackend, settings: PoolSettings) -> None:
        self.backend = backend
        self.settings = settings
        self._ready: deque[WarmContainer] = deque()
        self._wake = anyio.Event()
        self._tg: TaskGroup | None = None
        self.created = 0  # how many containers this pool made (tests, benchmarks)
        self.discarded = 0  # how many it removed unused as stale

    def idle_ids(self) -> set[str]:
        return {c.id for c in self._ready}

    async def claim(self) -> WarmContainer | None:
        self._wake.set()  # a claim (hit or miss) is when the pool refills
        while self._ready:
            entry = self._ready.popleft()
            if entry.run_.ended():
                await self._drop(entry)
                continue
            try:
                current, running = await self._look(entry)
            except BaseException:  # the call was cancelled: the entry is no one's now
                await self._drop(entry)
                raise
            if not running:
                await self._drop(entry)
                continue
            if current != entry.run_.image_id:
                await self._drop(entry)
                while self._ready:
                    await self._drop(self._ready.popleft())
                return None
            return entry
        return None

    async def _look(self, entry: WarmContainer) -> tuple[str | None, bool]:
        return await engine_look(self.backend, self.settings.image, entry.id)

    async def _drop(self, entry: WarmContainer) -> None:
        self.discarded += 1
        if not self._remove_later(entry):
            await entry.discard()

    def _remove_later(self, entry: WarmContainer) -> bool:
        """Remove `entry` in the pool's task group, which `close` waits for (the removal is
        shielded); False if the pool is closed (the caller removes it then)."""
        if self._tg is None:
            return False
        self._tg.start_soon(entry.discard)
        return True

    async def _create(self) -> WarmContainer:
        workspace = await anyio.to_thread.run_sync(_make_workspace, self.settings.work_dir)
        session = uuid.uuid4().hex[:12]
        spec = build_script_spec(
            image=self.settings.image,
            language=None,
            workspace_dir=workspace,
            user=self.settings.user,
            labels=self.backend.labels(
                kind="script", agent=POOL_AGENT, session=uuid.uuid4().hex[:12]
            ),
            tmp_size_mb=self.settings.tmp_size_mb,
            runtime=self.settings.runtime,
        )
        run = DockerRun(self.backend, spec)
        try:
            await run.open()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(shutil.rmtree, workspace, True)
            raise
        self.created += 1
        return WarmContainer(run, workspace, session, self)

    async def _refill(self) -> None:
        while True:
            while len(self._ready) < self.settings.size:
                try:
                    entry = await self._create()
                except (CorralError, OSError) as exc:
                    logger.warning("warm pool: could not create a container: %s", exc)
                    self._wake = anyio.Event()
                    with anyio.move_on_after(RETRY_SECONDS):
                        await self._wake.wait()
                    continue
                self._ready.append(entry)
            self._wake = anyio.Event()
            await self._wake.wait()

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            while self._ready:
                await self._ready.popleft().discard()


@contextlib.asynccontextmanager
async def open_pool(backend: DockerBackend, settings: PoolSettings) -> AsyncIterator[WarmPool]:
    """A pool refilling in the background while the block runs; every idle container is
    removed when it ends (shielded). A claimed container is its claimer's to remove."""
    pool = WarmPool(backend, settings)
    try:
        async with anyio.create_task_group() as tg:
            pool._tg = tg
            tg.start_soon(pool._refill)
            try:
                yield pool
            finally:
                tg.cancel_scope.cancel()
    finally:
        pool._tg = None
        await pool.close()


async def engine_look(
    backend: DockerBackend, image: str, container_id: str
) -> tuple[str | None, bool]:
    """A pool's check before it hands a container out: the configured image's id now
    (None: unknown) and whether the container still runs, asked of the engine side by
    side (two short calls, one round trip's time). Shared by the script and kiosk pools."""
    found: dict[str, object] = {}

    async def image_now() -> None:
        with contextlib.suppress(CorralError):
            found["image"] = await backend.image_id(image)

    async def state() -> None:
        with contextlib.suppress(CorralError):
            found["running"] = await backend.is_running(container_id)

    async with anyio.create_task_group() as tg:
        tg.start_soon(image_now)
        tg.start_soon(state)
    image_id = found.get("image")
    return (image_id if isinstance(image_id, str) else None), found.get("running") is True
