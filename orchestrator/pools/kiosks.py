"""The kiosk warm pool (issue 14): `[container.kiosk] warm = K` kiosks started ahead.

A pool kiosk is a kiosk container exactly as a session's (`sandboxes.isolation.kiosk_spec`,
Chromium's seccomp profile, the same image), already through its `start` op at
`POOL_WIDTH`x`POOL_HEIGHT`: Xvfb, x11vnc, D-Bus, Chromium on about:blank with the proxy
address every session's kiosk uses (`http://proxy:3128`). It sits on its own session
network, made ahead (`ContainerBackend.prepare_network`: on Docker an internal network
with its INPUT drop rule, `orchestrator.backends.docker.networks.SessionNetwork`), with
no proxy on it: until a claim it has no way out at all (the network is `internal`, and
the rule drops what it sends to the host).

A claim (`SessionManager.start`) takes the oldest pool kiosk and gives it the session's
egress: with pinned hosts, the session's proxy joins the kiosk's network under the alias
`proxy` (`SessionEgress(network=...)`); with none, the kiosk is disconnected from the
network and keeps only loopback, and the empty network is removed in the background
(`release`). Then the kiosk's `claim` op: every other page is closed, the
page is navigated to about:blank (a new document) and its history reset, cookies and
cache are cleared, and the answer comes once the new page is drawn, so a claimed kiosk
never shows anything from before the claim (tests/integration/test_kiosk_pool.py plants
a page in a pool kiosk and proves it); another screen size starts Xvfb and Chromium
afresh inside the claimed container.

- Used once: a claimed kiosk is the session's; it is removed when the session ends.
- Staleness, checked at each claim: a kiosk whose channel broke, whose container no
  longer runs, or whose image id is not the configured image's id now is removed, never
  handed out (a changed image empties the pool).
- Ownership: pool kiosks and their networks carry the gateway's owner labels (agent label
  `warm-pool`), so the owner watchdog removes the containers if the gateway is
  SIGKILLed, and `corral reap` (or the next gateway's start) the networks and their
  rules; `close` removes them when the gateway stops.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import anyio

from orchestrator.channel import KioskChannel, load_seccomp
from orchestrator.errors import CorralError
from orchestrator.pools.ready import ReadyPool, running
from sandboxes.isolation import kiosk_spec
from sandboxes.ports import ContainerBackend, PreparedNetwork

logger = logging.getLogger("corral.kiosk_pool")
POOL_AGENT = "warm-pool"
POOL_WIDTH, POOL_HEIGHT = 1280, 800  # computer_session_start's default size
# A claim wakes the refill this long after it: starting a kiosk costs about a CPU-second
# (Chromium), which would otherwise slow the session that just claimed one on a small
# machine (its claim and first screenshot). Another claim meanwhile restarts the wait.
REFILL_DELAY_SECONDS = 2.0
START_DEADLINE = 60.0


@dataclass(frozen=True, slots=True)
class KioskPoolSettings:
    image: str
    size: int
    ca_pem: str | None = None


@dataclass(eq=False, slots=True)
class PoolKiosk:
    """One started kiosk waiting for a session."""

    session_id: str
    channel: KioskChannel
    network: PreparedNetwork
    image_id: str
    chromium_sandbox: bool
    _done: bool = field(default=False)

    @property
    def id(self) -> str:
        return self.channel.id

    @property
    def dead(self) -> bool:
        return self.channel.broken is not None

    async def discard(self) -> None:
        """Remove the container, then its network and rule (shielded, idempotent; an
        engine failure is logged: the watchdog or `corral reap` removes what is left)."""
        with anyio.CancelScope(shield=True):
            if self._done:
                return
            self._done = True
            try:
                await self.channel.close()
            except CorralError as exc:
                logger.warning("kiosk pool: could not remove %s: %s", self.id[:12], exc)
            await self.network.remove(raise_errors=False)


class KioskPool(ReadyPool[PoolKiosk]):
    """Open with `open_kiosk_pool`."""

    what = "kiosk"

    def __init__(
        self,
        backend: ContainerBackend,
        settings: KioskPoolSettings,
        on_ready: Callable[[int], None] | None = None,
    ) -> None:
        super().__init__(backend, settings.image, settings.size)
        self.settings = settings
        self._on_ready = on_ready  # told how many wait, each time a started kiosk joins
        self._last_claim = -1e9

    def _claimed(self) -> None:
        self._last_claim = anyio.current_time()

    def _refill_wait(self) -> float:
        return self._last_claim + REFILL_DELAY_SECONDS - anyio.current_time()

    def _joined(self) -> None:
        if self._on_ready is not None:
            self._on_ready(len(self._ready))

    async def release(self, network: PreparedNetwork) -> None:
        """Remove a claimed kiosk's network once it has left it (a session without an
        allowlist), in the background: off the session's start, and its address back in
        the engine's pool before the session ends."""
        if self._tg is None:
            await network.remove(raise_errors=False)
        else:
            self._tg.start_soon(partial(network.remove, raise_errors=False))

    async def _create(self) -> PoolKiosk:
        backend = self.backend
        image_id = await backend.image_id(self.settings.image)
        network = await backend.prepare_network(POOL_AGENT)
        session_id = network.session_id
        channel: KioskChannel | None = None
        try:
            channel = await KioskChannel.open(
                backend,
                kiosk_spec(
                    image=self.settings.image,
                    labels=backend.labels(kind="kiosk", agent=POOL_AGENT, session=session_id),
                    network=network.name,
                    seccomp=load_seccomp(),
                    dns=[network.gateway] if network.gateway else [],
                ),
            )
            await channel.request(
                "start",
                START_DEADLINE,
                stage="display",
                width=POOL_WIDTH,
                height=POOL_HEIGHT,
                ca_pem=self.settings.ca_pem,
            )
            ready = await channel.request(
                "start", START_DEADLINE, stage="browser", proxy=network.proxy_url, url=None
            )
        except BaseException:
            with anyio.CancelScope(shield=True):
                if channel is not None:
                    with contextlib.suppress(CorralError):
                        await channel.close()
                await network.remove(raise_errors=False)
            raise
        return PoolKiosk(
            session_id, channel, network, image_id, bool(ready.get("chromium_sandbox", False))
        )


def open_kiosk_pool(
    backend: ContainerBackend,
    settings: KioskPoolSettings,
    on_ready: Callable[[int], None] | None = None,
) -> contextlib.AbstractAsyncContextManager[KioskPool]:
    """A pool refilling in the background while the block runs; every idle kiosk (and its
    network) is removed when it ends, shielded. A claimed kiosk is its claimer's."""
    return running(KioskPool(backend, settings, on_ready))
