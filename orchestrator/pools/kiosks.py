"""The kiosk warm pool (issue 14; on the warm pool of issue 23, `orchestrator.pools.warm`):
kiosks started ahead.

A pool kiosk is a kiosk container exactly as a session's (`sandboxes.isolation.kiosk_spec`,
Chromium's seccomp profile, the same image), already through its `start` op at
`POOL_WIDTH`x`POOL_HEIGHT`: Xvfb, D-Bus, Chromium on about:blank with the proxy
address every session's kiosk uses (`http://proxy:3128`), on its own session network with
an armed proxy (`pools.warm`). It joins the pool once settled (the `settle` op, out of its
boot slot): Chromium opens its HTTP cache about 2 s after its start, and the claim's cache
clear would otherwise wait for it.

A claim (`SessionManager.start`, `surfaces.kiosk.start.KioskStart.warm`) gives it the
session's egress (the armed proxy pinned, or no network), then the kiosk's `claim` op:
every other page is closed, the page is navigated to about:blank (a new document) and its
history reset, cookies and cache are cleared, and the answer comes once the new page is
drawn, so a claimed kiosk never shows anything from before the claim
(tests/integration/test_kiosk_pool.py plants a page in a pool kiosk and proves it);
another screen size starts Xvfb and Chromium afresh inside the claimed container.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import anyio

from orchestrator.backends.channel import KioskChannel
from orchestrator.errors import CorralError
from orchestrator.pools.warm import (
    ChannelBody,
    Warm,
    WarmPool,
    WarmSettings,
    open_warm_pool,
    pool_spec,
)
from sandboxes.ports import ContainerBackend, PreparedNetwork

POOL_WIDTH, POOL_HEIGHT = 1280, 800  # computer_session_start's default size
START_DEADLINE = 60.0


@dataclass(frozen=True, slots=True)
class KioskPoolSettings:
    image: str
    size: int
    ca_pem: str | None = None
    proxy_image: str | None = None  # the armed proxy made with each kiosk's network


@dataclass(eq=False, slots=True)
class KioskBody(ChannelBody):
    """A started kiosk: its channel, and whether its Chromium runs sandboxed."""

    chromium_sandbox: bool = False


PoolKiosk = Warm[KioskBody]
KioskPool = WarmPool[KioskBody]


async def start_pool_kiosk(
    backend: ContainerBackend, settings: KioskPoolSettings, network: PreparedNetwork
) -> KioskBody:
    """A kiosk started on `network` (its display, then Chromium on about:blank)."""
    channel = await KioskChannel.open(backend, pool_spec(backend, settings.image, "kiosk", network))
    try:
        await channel.request(
            "start",
            START_DEADLINE,
            stage="display",
            width=POOL_WIDTH,
            height=POOL_HEIGHT,
            ca_pem=settings.ca_pem,
        )
        ready = await channel.request(
            "start", START_DEADLINE, stage="browser", proxy=network.proxy_url, url=None
        )
    except BaseException:
        with anyio.CancelScope(shield=True), contextlib.suppress(CorralError):
            await channel.close()
        raise
    return KioskBody(channel, bool(ready.get("chromium_sandbox", False)))


async def settle_pool_kiosk(body: KioskBody) -> None:
    """Wait until the kiosk's Chromium has opened its HTTP cache (the agent's `settle`):
    it does so about 2 s after its start, and a claim's cache clear would wait for it
    (a claim right after a refill took 2 s instead of 50-90 ms, measured)."""
    await body.channel.request("settle", START_DEADLINE)


def open_kiosk_pool(
    backend: ContainerBackend,
    settings: KioskPoolSettings,
    on_ready: Callable[[int], None] | None = None,
) -> contextlib.AbstractAsyncContextManager[KioskPool]:
    """A kiosk pool refilling in the background while the block runs; every idle kiosk
    (and its network) is removed when it ends, shielded. A claimed kiosk is its
    claimer's."""
    warm = WarmSettings("kiosk", settings.image, settings.size, settings.proxy_image)
    start = partial(start_pool_kiosk, backend, settings)
    return open_warm_pool(backend, warm, start, on_ready, settle_pool_kiosk)
