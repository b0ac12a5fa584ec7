"""Warm surfaces (issue 23): kiosks, browser rigs and desktop rigs started ahead, each on
its own session network with its egress proxy made with it, armed, on the one pool base
(`orchestrator.pools.ready`) the script pool shares.

A member is started by its kind's recipe (`start_on(network)`: the kiosk's in
`orchestrator.pools.kiosks`, the rigs' in the surfaces room) on a network made ahead
(`ContainerBackend.prepare_network`: on Docker an internal network with its INPUT drop
rule and an armed `corral-proxy` holding no pins). Until a claim it has no way out at all:
the network is `internal`, the rule drops what it sends to the host, and the proxy refuses
every request. A claim takes the oldest member and gives it its session's egress: with
an allowlist, the pins are resolved and the armed proxy is pinned over its control
channel (one round trip; `SessionEgress(network=...)`); with none, the surface leaves the
network (loopback only) and the network goes, proxy and all, in the background
(`release`).

- Used once: a claimed member is its session's; it is removed when the session ends.
- Staleness, checked at each claim (`ReadyPool.claim`): a member whose channel broke,
  whose container no longer runs, or whose image id is not the configured image's now
  is removed, never handed out (a changed image empties the pool).
- Ownership: members and their networks and proxies carry the gateway's owner labels
  (agent label `warm-pool`), so the owner watchdog removes the containers if the gateway
  is SIGKILLed, and `corral reap` (or the next gateway's start) the networks and rules;
  closing the pool removes them when the gateway stops.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

import anyio

from orchestrator.backends.admission import boot_slot
from orchestrator.backends.channel import KioskChannel, load_seccomp
from orchestrator.errors import CorralError
from orchestrator.pools.ready import ReadyPool, running
from sandboxes.isolation import POOL_CPU_SHARES, SESSION_CPU_SHARES, kiosk_spec
from sandboxes.ports import ContainerBackend, ContainerSpec, PreparedNetwork

logger = logging.getLogger("corral.pool")
POOL_AGENT = "warm-pool"
# A claim wakes the refill this long after it: starting a surface costs about a CPU-second
# (Chromium), which would otherwise slow the session that just claimed one on a small
# machine (its claim and first screenshot). Another claim meanwhile restarts the wait.
REFILL_DELAY_SECONDS = 2.0


class WarmBody(Protocol):
    """What a kind's recipe started on the pool's network."""

    @property
    def id(self) -> str:
        """The container's id (the claim asks the engine whether it still runs)."""
        ...

    @property
    def dead(self) -> bool:
        """Known gone without asking the engine (its channel broke)."""
        ...

    async def close(self) -> None:
        """Remove the container and what the recipe opened with it."""
        ...


B = TypeVar("B", bound=WarmBody)


@dataclass(eq=False, slots=True)
class ChannelBody:
    """A member driven over its agent's channel (a kiosk, a desktop rig)."""

    channel: KioskChannel

    @property
    def id(self) -> str:
        return self.channel.id

    @property
    def dead(self) -> bool:
        return self.channel.broken is not None

    async def close(self) -> None:
        await self.channel.close()


@dataclass(eq=False, slots=True)
class Warm(Generic[B]):
    """One started surface waiting for a session (`ready.PoolEntry`)."""

    network: PreparedNetwork
    image_id: str
    body: B
    _done: bool = field(default=False)

    @property
    def id(self) -> str:
        return self.body.id

    @property
    def session_id(self) -> str:
        return self.network.session_id

    @property
    def dead(self) -> bool:
        return self.body.dead

    async def discard(self) -> None:
        """Remove the surface, then its network (its armed proxy, the rule): shielded,
        idempotent; an engine failure is logged (the watchdog or `corral reap` removes
        what is left)."""
        with anyio.CancelScope(shield=True):
            if self._done:
                return
            self._done = True
            try:
                await self.body.close()
            except CorralError as exc:
                logger.warning("warm pool: could not remove %s: %s", self.id[:12], exc)
            await self.network.remove(raise_errors=False)


@dataclass(frozen=True, slots=True)
class WarmSettings:
    """`kind` names the pool (kiosk, browser, desktop: the log and the audit); `prefix`
    starts each member's session id (a rig's id starts with `r`)."""

    kind: str
    image: str
    size: int
    proxy_image: str | None
    prefix: str = ""


class WarmPool(ReadyPool[Warm[B]]):
    """Open with `open_warm_pool`."""

    def __init__(
        self,
        backend: ContainerBackend,
        settings: WarmSettings,
        start_on: Callable[[PreparedNetwork], Awaitable[B]],
        on_ready: Callable[[int], None] | None = None,
        settle: Callable[[B], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(backend, settings.image, settings.size)
        self.what = settings.kind
        self.settings = settings
        self._start_on = start_on
        self._settle = settle
        self._on_ready = on_ready  # told how many wait, each time a started member joins
        self._last_claim = -1e9

    def _claimed(self) -> None:
        self._last_claim = anyio.current_time()

    async def claim(self) -> Warm[B] | None:
        """The oldest live member (`ReadyPool.claim`) at a session's CPU weight: it booted
        and waited at the pool's. One the engine could not reweigh is handed out as it is
        if it still runs (an engine that cannot weigh containers at all), else dropped for
        the next, or None: start cold."""
        while (warm := await super().claim()) is not None:
            try:
                await self.backend.set_cpu_shares(warm.id, SESSION_CPU_SHARES)
            except CorralError as exc:
                logger.info("a pool %s could not take a session's CPU weight: %s", self.what, exc)
                if await self._runs(warm):
                    return warm
                await self._drop(warm)
                continue
            except BaseException:  # cancelled: the member is no one's now
                await self._drop(warm)
                raise
            return warm
        return None

    async def _runs(self, warm: Warm[B]) -> bool:
        try:
            return await self.backend.is_running(warm.id)
        except CorralError:
            return False

    def _refill_wait(self) -> float:
        return self._last_claim + REFILL_DELAY_SECONDS - anyio.current_time()

    def _joined(self) -> None:
        if self._on_ready is not None:
            self._on_ready(len(self._ready))

    async def release(self, network: PreparedNetwork) -> None:
        """Remove a claimed member's network once it has left it (a session without an
        allowlist), in the background and `REFILL_DELAY_SECONDS` later: off the session's
        start and its first screenshot (removing the network's proxy costs the engine
        about as much as the claim), and its address back in the engine's pool before the
        session ends."""
        if self._tg is None:
            await network.remove(raise_errors=False)
        else:
            self._tg.start_soon(_remove_later, network)

    async def _create(self) -> Warm[B]:
        async with boot_slot():  # a member boots as a surface does: in turn with them
            warm = await self._booted()
        if self._settle is not None:  # what the member waits for after its boot (it
            try:  # uses little CPU), outside the slot: a session's start need not wait
                await self._settle(warm.body)
            except BaseException:
                await warm.discard()  # shielded
                raise
        return warm

    async def _booted(self) -> Warm[B]:
        settings = self.settings
        image_id = await self.backend.image_id(settings.image)
        network = await self.backend.prepare_network(
            POOL_AGENT, settings.proxy_image, settings.prefix
        )
        try:
            body = await self._start_on(network)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await network.remove(raise_errors=False)
            raise
        return Warm(network, image_id, body)


async def _remove_later(network: PreparedNetwork) -> None:
    """Remove `network` after the delay; at once if the pool closes meanwhile."""
    try:
        await anyio.sleep(REFILL_DELAY_SECONDS)
    finally:
        await network.remove(raise_errors=False)  # shielded inside


def pool_spec(
    backend: ContainerBackend, image: str, kind: str, network: PreparedNetwork
) -> ContainerSpec:
    """The locked-down spec of a pool member of `kind` (its container label) on `network`,
    exactly a session's but for its owner labels (agent `warm-pool`) and its CPU weight
    until claimed (`POOL_CPU_SHARES`: a refill yields to the sessions being driven)."""
    return kiosk_spec(
        image=image,
        labels=backend.labels(kind=kind, agent=POOL_AGENT, session=network.session_id),
        network=network.name,
        seccomp=load_seccomp(),
        dns=[network.gateway] if network.gateway else [],
        cpu_shares=POOL_CPU_SHARES,
    )


def open_warm_pool(
    backend: ContainerBackend,
    settings: WarmSettings,
    start_on: Callable[[PreparedNetwork], Awaitable[B]],
    on_ready: Callable[[int], None] | None = None,
    settle: Callable[[B], Awaitable[None]] | None = None,
) -> contextlib.AbstractAsyncContextManager[WarmPool[B]]:
    """A pool refilling in the background while the block runs; every idle member (and its
    network) is removed when it ends, shielded. A claimed member is its claimer's.
    `settle`: what a started member still waits for, out of its boot slot, before it
    joins (a kiosk's Chromium opening its cache)."""
    return running(WarmPool(backend, settings, start_on, on_ready, settle))
