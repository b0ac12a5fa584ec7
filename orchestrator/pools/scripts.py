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
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from orchestrator.errors import CorralError
from orchestrator.pools.ready import ReadyPool, running
from sandboxes.ports import ContainerBackend, WaitingContainer
from sandboxes.script_policy import build_script_spec, warm_signal

logger = logging.getLogger("corral.pool")
POOL_AGENT = "warm-pool"


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

    run_: WaitingContainer
    workspace: str
    session: str
    pool: WarmPool
    _done: bool = field(default=False)

    @property
    def id(self) -> str:
        return self.run_.id

    @property
    def image_id(self) -> str:
        return self.run_.image_id

    @property
    def dead(self) -> bool:
        return self.run_.ended()

    @contextlib.asynccontextmanager
    async def run(
        self, language: str, hard_cap_seconds: int, exit_mark: str
    ) -> AsyncIterator[WaitingContainer]:
        """Start the script. Left normally (the caller read its exit line, or waited for
        the container's exit), the container is removed in the background, off the
        caller's time; left by an error or a cancellation, it is removed before this
        returns, as a cold run's is."""
        await self.run_.send(warm_signal(language, hard_cap_seconds, exit_mark))
        try:
            yield self.run_
        except BaseException:
            await self.discard()
            raise
        if not self.pool.remove_later(self):
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
                await self.run_.remove()
            except CorralError as exc:
                logger.warning("warm pool: could not remove %s: %s", self.id[:12], exc)
            finally:
                await anyio.to_thread.run_sync(shutil.rmtree, self.workspace, True)


def _make_workspace(work_dir: Path) -> str:
    work_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    workspace = Path(tempfile.mkdtemp(prefix="warm-", dir=work_dir))
    workspace.chmod(0o755)  # the sandbox user (uid 1000 when we are root) reads it
    return str(workspace)


class WarmPool(ReadyPool[WarmContainer]):
    """`sandboxes.ports.ScriptPool` on Docker. Open with `open_pool`."""

    what = "script container"

    def __init__(self, backend: ContainerBackend, settings: PoolSettings) -> None:
        super().__init__(backend, settings.image, settings.size)
        self.settings = settings

    def idle_ids(self) -> set[str]:
        return {c.id for c in self._ready}

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
        try:
            run = await self.backend.open_waiting(spec)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(shutil.rmtree, workspace, True)
            raise
        return WarmContainer(run, workspace, session, self)


def open_pool(
    backend: ContainerBackend, settings: PoolSettings
) -> contextlib.AbstractAsyncContextManager[WarmPool]:
    """A pool refilling in the background while the block runs; every idle container is
    removed when it ends (shielded). A claimed container is its claimer's to remove."""
    return running(WarmPool(backend, settings))
