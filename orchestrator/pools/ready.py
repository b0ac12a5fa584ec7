"""What every warm pool shares (scripts; kiosks and rigs through `pools.warm`): entries
made ahead in the background, handed out once each, checked against the engine at every
claim, their number changeable while it runs (`resize`).

A subclass says how to make an entry (`_create`) and may delay a refill (`_refill_wait`)
or be told when one joins (`_joined`). The base holds the queue, the claim's staleness
checks and the background removal:

- a claim takes the oldest entry; one known dead (`entry.dead`), no longer running, or
  of another image than the configured one now is removed, never handed out; a changed
  image empties the whole queue (the rest were made from the same old image);
- a removal runs in the pool's task group, off the claimer's time (shielded by the
  entry's own `discard`); once the pool is closed, in the caller's;
- every claim, hit or miss, wakes the refill; a failed refill waits `RETRY_SECONDS` or
  the next claim.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator
from typing import Generic, Protocol, TypeVar

import anyio
from anyio.abc import TaskGroup

from orchestrator.errors import CorralError
from sandboxes.ports import ContainerBackend

logger = logging.getLogger("corral.pool")
RETRY_SECONDS = 5.0  # after a failed refill (engine down, image missing), or at a claim


class PoolEntry(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def image_id(self) -> str: ...

    @property
    def dead(self) -> bool:
        """Known gone without asking the engine (its stream ended or broke)."""
        ...

    async def discard(self) -> None:
        """Remove it and what it holds (idempotent, shielded, never raises)."""
        ...


E = TypeVar("E", bound=PoolEntry)
P = TypeVar("P", bound="ReadyPool")  # type: ignore[type-arg]


class ReadyPool(Generic[E]):
    """Open with `running(pool)`."""

    what = "entry"  # for the log: "could not start a <what>"

    def __init__(self, backend: ContainerBackend, image: str, size: int) -> None:
        self.backend = backend
        self.image = image
        self.size = size
        self._ready: deque[E] = deque()
        self._wake = anyio.Event()
        self._tg: TaskGroup | None = None
        self.created = 0  # how many entries this pool made (tests, benchmarks)
        self.discarded = 0  # how many it removed unused as stale

    def idle(self) -> list[E]:
        return list(self._ready)

    async def claim(self) -> E | None:
        """The oldest live entry of the current image, or None (then start cold). The
        caller owns what it gets."""
        self._claimed()
        self._wake.set()
        while self._ready:
            entry = self._ready.popleft()
            if entry.dead:
                await self._drop(entry)
                continue
            try:
                current, running = await engine_look(self.backend, self.image, entry.id)
            except BaseException:  # the call was cancelled: the entry is no one's now
                await self._drop(entry)
                raise
            if not running:
                await self._drop(entry)
                continue
            if current != entry.image_id:
                await self._drop(entry)
                while self._ready:
                    await self._drop(self._ready.popleft())
                return None
            return entry
        return None

    def resize(self, size: int) -> None:
        """Keep `size` entries from now: more are made in the background, or the newest
        idle ones beyond it are removed (in the pool's task group)."""
        self.size = size
        while len(self._ready) > size and self._tg is not None:
            self.discarded += 1
            self.remove_later(self._ready.pop())
        self._wake.set()

    async def _create(self) -> E:
        raise NotImplementedError

    def _claimed(self) -> None:
        """Hook: a claim happened (before the queue is looked at)."""

    def _refill_wait(self) -> float:
        """Hook: seconds to hold the next refill back (0: now)."""
        return 0.0

    def _joined(self) -> None:
        """Hook: an entry joined the queue."""

    async def _drop(self, entry: E) -> None:
        self.discarded += 1
        if not self.remove_later(entry):
            await entry.discard()

    def remove_later(self, entry: E) -> bool:
        """Remove `entry` in the pool's task group, which closing waits for (the removal is
        shielded); False if the pool is closed (the caller removes it then)."""
        if self._tg is None:
            return False
        self._tg.start_soon(entry.discard)
        return True

    async def _refill(self) -> None:
        while True:
            while len(self._ready) < self.size:
                wait = self._refill_wait()
                if wait > 0:
                    await anyio.sleep(wait)
                    continue
                try:
                    entry = await self._create()
                except (CorralError, OSError) as exc:
                    logger.warning("%s pool: could not start a %s: %s", self.what, self.what, exc)
                    self._wake = anyio.Event()
                    with anyio.move_on_after(RETRY_SECONDS):
                        await self._wake.wait()
                    continue
                self.created += 1
                if len(self._ready) >= self.size:  # resized down while it was being made
                    self.discarded += 1
                    self.remove_later(entry)
                    continue
                self._ready.append(entry)
                self._joined()
            self._wake = anyio.Event()
            await self._wake.wait()

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            while self._ready:
                await self._ready.popleft().discard()


@contextlib.asynccontextmanager
async def running(pool: P) -> AsyncIterator[P]:
    """`pool` refilling in the background while the block runs; every idle entry is
    removed when it ends (shielded). A claimed entry is its claimer's to remove."""
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
    backend: ContainerBackend, image: str, container_id: str
) -> tuple[str | None, bool]:
    """A pool's check before it hands a container out: the configured image's id now
    (None: unknown) and whether the container still runs, asked of the engine side by
    side (two short calls, one round trip's time)."""
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
