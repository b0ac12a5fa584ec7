"""A warm pool member's settle (`orchestrator.pools.warm`): what a started member still
waits for before it joins the pool (a kiosk's Chromium opening its HTTP cache), out of its
boot slot; and its CPU weight at the claim. The real path on the real engine:
tests/integration/test_kiosk_pool.py (every pool kiosk there settles before its claim, and
its weight is read back). This fake backend stands below it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import anyio
import pytest

from orchestrator.backends.admission import admission, boot_slot
from orchestrator.errors import CorralError
from orchestrator.pools.warm import WarmPool, WarmSettings, open_warm_pool
from sandboxes.isolation import SESSION_CPU_SHARES
from tests.helpers import wait_until

pytestmark = pytest.mark.anyio


@dataclass(eq=False)
class Network:
    session_id: str
    removed: bool = False
    name: str = "net"
    gateway: str | None = None
    proxy_url: str = "http://proxy:3128"

    async def disconnect(self, container_id: str) -> None:
        pass

    async def remove(self, *, raise_errors: bool = True) -> None:
        self.removed = True


@dataclass(eq=False)
class Body:
    id: str
    closed: bool = False
    dead: bool = False

    async def close(self) -> None:
        self.closed = True


class Engine:
    """Enough of a backend for the pool: every member runs, the image is `img`."""

    def __init__(self) -> None:
        self.networks: list[Network] = []
        self.cpu_shares: dict[str, int] = {}  # each member's weight, once set
        self.cannot_reweigh: set[str] = set()  # members whose weight the engine refuses
        self.gone: set[str] = set()  # members the engine has lost
        self.vanish_on_reweigh: set[str] = set()  # lost just before their reweigh

    async def set_cpu_shares(self, container_id: str, shares: int) -> None:
        if container_id in self.vanish_on_reweigh:
            self.gone.add(container_id)
        if container_id in self.cannot_reweigh | self.gone:
            raise CorralError(f"the engine could not update {container_id}")
        self.cpu_shares[container_id] = shares

    async def image_id(self, image: str) -> str:
        return "sha256:img"

    async def is_running(self, container_id: str) -> bool:
        return container_id not in self.gone

    async def prepare_network(self, agent: str, proxy_image: str | None, prefix: str) -> Network:
        network = Network(f"s{len(self.networks)}")
        self.networks.append(network)
        return network


SETTINGS = WarmSettings("kiosk", "img", 1, None)


def starter(bodies: list[Body]) -> Callable[[Network], Awaitable[Body]]:
    """A recipe that starts a member and keeps it in `bodies`."""

    async def start(network: Network) -> Body:
        bodies.append(Body(f"c{len(bodies)}"))
        return bodies[-1]

    return start


async def test_a_member_joins_only_once_settled_and_settles_out_of_its_boot_slot() -> None:
    bodies: list[Body] = []
    settling: list[Body] = []
    release = anyio.Event()

    async def settle(body: Body) -> None:
        settling.append(body)
        await release.wait()

    engine = Engine()
    async with open_warm_pool(engine, SETTINGS, starter(bodies), settle=settle) as pool:  # type: ignore[arg-type]
        await wait_until(lambda: settling)
        assert pool.idle() == []  # started, not yet settled: not handed out
        # Every boot slot is free while it settles: a session's start need not wait.
        with anyio.fail_after(5):
            async with contextlib.AsyncExitStack() as slots:
                for _ in range(admission().boots.max_value):
                    await slots.enter_async_context(boot_slot())
        release.set()
        await wait_until(lambda: len(pool.idle()) == 1)
        claimed = await pool.claim()
        assert claimed is not None and claimed.body is settling[0]


async def test_a_member_whose_settle_fails_is_removed_with_its_network() -> None:
    bodies: list[Body] = []
    failed = anyio.Event()

    async def settle(body: Body) -> None:
        if len(bodies) == 1:
            failed.set()
            raise CorralError("the kiosk did not settle")

    engine = Engine()
    async with open_warm_pool(engine, SETTINGS, starter(bodies), settle=settle) as pool:  # type: ignore[arg-type]
        with anyio.fail_after(5):
            await failed.wait()
        await wait_until(lambda: bodies[0].closed and engine.networks[0].removed)
        assert all(entry.body is not bodies[0] for entry in pool.idle())


@contextlib.asynccontextmanager
async def one_member_waiting(engine: Engine, bodies: list[Body]) -> AsyncIterator[WarmPool[Body]]:
    """A pool of one, once its member waits in it."""
    async with open_warm_pool(engine, SETTINGS, starter(bodies)) as pool:  # type: ignore[arg-type]
        await wait_until(lambda: len(pool.idle()) == 1)
        yield pool


async def test_a_claimed_member_takes_a_session_s_cpu_weight() -> None:
    bodies: list[Body] = []
    engine = Engine()
    async with one_member_waiting(engine, bodies) as pool:
        assert engine.cpu_shares == {}  # waiting: the weight it was created with
        claimed = await pool.claim()
        assert claimed is not None
        assert engine.cpu_shares == {claimed.id: SESSION_CPU_SHARES}


async def test_a_member_gone_before_its_reweigh_is_removed_and_not_handed_out() -> None:
    bodies: list[Body] = []
    engine = Engine()
    async with one_member_waiting(engine, bodies) as pool:
        # Gone between the pool's own look at it and the reweigh.
        engine.vanish_on_reweigh.add(bodies[0].id)
        assert await pool.claim() is None  # no other member yet: the session starts cold
        await wait_until(lambda: bodies[0].closed and engine.networks[0].removed)
        await wait_until(lambda: len(pool.idle()) == 1)  # refilled: the next one is given
        claimed = await pool.claim()
        assert claimed is not None and claimed.body is bodies[1]
        assert engine.cpu_shares == {bodies[1].id: SESSION_CPU_SHARES}


async def test_a_running_member_the_engine_cannot_reweigh_is_handed_out_as_it_is() -> None:
    bodies: list[Body] = []
    engine = Engine()
    async with one_member_waiting(engine, bodies) as pool:
        engine.cannot_reweigh.add(bodies[0].id)
        claimed = await pool.claim()
        assert claimed is not None and claimed.body is bodies[0] and not bodies[0].closed
