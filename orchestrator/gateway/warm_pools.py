"""The gateway's warm pools (issue 23): kiosks, browser rigs and desktop rigs started
ahead (`orchestrator.pools.warm`), each kind's pool as large as `sandboxes.warm_sizes`
says: config.toml's `warm`, or where it sets none 1 ($CORRAL_WARM_DEFAULT) for a kind an
agent may start and 0 for one no agent may. The sizes follow the agents' files while the
gateway runs (`follow_sizes`): turning browser_use on for the first agent fills the
browser pool, turning it off for the last empties it. None on a backend without pools
(Kubernetes). Each member that joins a pool is audited (`kiosk_pool_ready`, or
`rig_pool_ready` with the surface; with how many wait)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from orchestrator.agents.view import agent_and_view, agent_names
from orchestrator.audit import AuditLog
from orchestrator.config import CorralConfig
from orchestrator.home import CorralHome
from orchestrator.pools.kiosks import KioskPool, KioskPoolSettings, open_kiosk_pool
from orchestrator.pools.warm import WarmPool, WarmSettings, open_warm_pool
from orchestrator.surfaces.rig_start import RIG_PREFIX, RigStarts
from orchestrator.surfaces.start import read_text
from sandboxes.ports import ContainerBackend
from sandboxes.warm_sizes import kinds_in_use, warm_sizes

FOLLOW_SECONDS = 2.0  # how often the sizes are checked against the agents' files


@dataclass
class WarmPools:
    kiosk: KioskPool
    rigs: dict[str, WarmPool[Any]] = field(default_factory=dict)

    def all(self) -> dict[str, WarmPool[Any]]:
        return {"kiosk": self.kiosk, **self.rigs}


async def wanted_sizes(home: CorralHome, config: CorralConfig) -> dict[str, int]:
    """Each kind's pool size now (`sandboxes.warm_sizes`), from the agents' files."""
    names = await anyio.to_thread.run_sync(agent_names, home)
    views = [(await agent_and_view(home, name))[0] for name in names]
    configured = config.container.warm_configured()
    return warm_sizes(configured, kinds_in_use(views), home.env.warm_default)


@contextlib.asynccontextmanager
async def warm_pools(
    home: CorralHome,
    config: CorralConfig,
    backend: ContainerBackend,
    audit: AuditLog,
    starts: RigStarts,
) -> AsyncIterator[WarmPools | None]:
    """Every kind's pool, running while the block runs (`starts.pools` set meanwhile);
    every idle member is removed when it ends."""
    if not backend.supports_pools:
        yield None
        return
    sizes = await wanted_sizes(home, config)
    kiosk = config.container.kiosk
    ca_pem = None
    if kiosk.extra_ca_file:
        ca_pem = await anyio.to_thread.run_sync(read_text, kiosk.extra_ca_file)
    opened: dict[str, WarmPool[Any]] = {}

    def ready(kind: str) -> Callable[[int], None]:
        def joined(idle: int) -> None:
            size = opened[kind].size if kind in opened else sizes[kind]
            if kind == "kiosk":
                audit.record("kiosk_pool_ready", None, {"idle": idle, "size": size})
            else:
                details = {"surface": kind, "idle": idle, "size": size}
                audit.record("rig_pool_ready", None, details)

        return joined

    async with contextlib.AsyncExitStack() as stack:
        settings = KioskPoolSettings(kiosk.image, sizes["kiosk"], ca_pem, kiosk.proxy_image)
        opened["kiosk"] = await stack.enter_async_context(
            open_kiosk_pool(backend, settings, ready("kiosk"))
        )
        for surface in ("browser", "desktop"):
            image = getattr(config.container.rigs, f"{surface}_image")
            warm = WarmSettings(surface, image, sizes[surface], kiosk.proxy_image, RIG_PREFIX)
            pool = open_warm_pool(backend, warm, starts.start_on(surface), ready(surface))
            opened[surface] = await stack.enter_async_context(pool)
        pools = WarmPools(opened["kiosk"], {k: p for k, p in opened.items() if k != "kiosk"})
        starts.pools = pools.rigs
        try:
            yield pools
        finally:
            starts.pools = {}


async def follow_sizes(home: CorralHome, config: CorralConfig, pools: WarmPools) -> None:
    """Keep each pool's size what the agents' files say (checked every FOLLOW_SECONDS;
    the files are read again only when they changed, `agents.view`)."""
    while True:
        await anyio.sleep(FOLLOW_SECONDS)
        sizes = await wanted_sizes(home, config)
        for kind, pool in pools.all().items():
            if pool.size != sizes[kind]:
                pool.resize(sizes[kind])
