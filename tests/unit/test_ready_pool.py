"""The warm pools' base (`orchestrator.pools.ready`): resizing while it runs, including
while an entry is being made. The real pools on the real engine: tests/integration/
test_kiosk_pool.py, test_rig_pool.py, test_script_pool.py; sizes following the agents'
files in a real gateway: tests/e2e/test_warm_pools.py. This fake stands below those."""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio
import pytest

from orchestrator.pools.ready import ReadyPool, running

pytestmark = pytest.mark.anyio


@dataclass(eq=False)
class Entry:
    id: str
    image_id: str = "sha256:img"
    dead: bool = False
    discarded: bool = False

    async def discard(self) -> None:
        self.discarded = True


@dataclass
class Engine:
    """Enough of a backend for a claim's checks: every entry runs, the image is `img`."""

    running: set[str] = field(default_factory=set)

    async def image_id(self, image: str) -> str:
        return "sha256:img"

    async def is_running(self, container_id: str) -> bool:
        return container_id in self.running


class Pool(ReadyPool[Entry]):
    def __init__(self, engine: Engine, size: int) -> None:
        super().__init__(engine, "img", size)  # type: ignore[arg-type]
        self.engine = engine
        self.made: list[Entry] = []
        self.gate: anyio.Event | None = None  # set: `_create` waits for it
        self.making = anyio.Event()

    async def _create(self) -> Entry:
        self.making.set()
        if self.gate is not None:
            await self.gate.wait()
        entry = Entry(f"c{len(self.made)}")
        self.made.append(entry)
        self.engine.running.add(entry.id)
        return entry


async def until(check: object) -> None:
    with anyio.fail_after(5):
        while not check():  # type: ignore[operator]
            await anyio.sleep(0)


async def test_a_pool_grows_and_shrinks_to_its_new_size() -> None:
    async with running(Pool(Engine(), 0)) as pool:
        assert pool.idle() == []
        pool.resize(2)
        await until(lambda: len(pool.idle()) == 2)
        kept, dropped = pool.idle()
        pool.resize(1)
        assert pool.idle() == [kept]  # the newest idle one goes
        await until(lambda: dropped.discarded)
        assert (await pool.claim()) is kept


async def test_an_entry_made_while_the_pool_shrank_to_zero_is_removed_not_kept() -> None:
    async with running(Pool(Engine(), 1)) as pool:
        pool.gate = anyio.Event()
        await pool.making.wait()  # the refill is making one
        pool.resize(0)
        pool.gate.set()
        await until(lambda: pool.made and pool.made[0].discarded)
        assert pool.idle() == []
