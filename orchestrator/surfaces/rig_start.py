"""Starting a browser or desktop rig: from its kind's warm pool when a started one waits
(`orchestrator.pools.warm`: only the egress is left to do at the claim), else cold. Also
the pools' recipes (`start_on`: what a pool starts ahead on its network) and the
gateway's one Playwright, which every browser rig and every pool browser shares."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from playwright.async_api import Playwright, async_playwright

from orchestrator.backends.admission import boot_slot
from orchestrator.config import ComputerUseConfig
from orchestrator.pools.warm import WarmPool, pool_spec
from orchestrator.surfaces.browser.rig import BrowserRig
from orchestrator.surfaces.browser.start import claim_browser, open_browser, start_browser
from orchestrator.surfaces.desktop import DesktopRig, claim_desktop, open_desktop, start_desktop
from orchestrator.surfaces.start import Host
from sandboxes.events import CallEvents
from sandboxes.ports import PreparedNetwork

Clock = Callable[[], float]
ContainerRig = BrowserRig | DesktopRig
KIND_LABELS = {"browser": "rig-browser", "desktop": "rig-desktop"}
RIG_PREFIX = "r"  # a rig's id starts with it, a pool rig's too (its network's session id)


class RigStarts:
    """`pools` ({"browser": ..., "desktop": ...}) is set by the gateway while its pools
    run; a kind without a pool starts cold."""

    def __init__(self, host: Host, clock: Clock) -> None:
        self.host = host
        self.clock = clock
        self.pools: dict[str, WarmPool[Any]] = {}
        self._playwright: Playwright | None = None
        self._playwright_cm: Any = None
        self._playwright_lock = anyio.Lock()

    async def driver(self) -> Playwright:
        async with self._playwright_lock:
            if self._playwright is None:
                self._playwright_cm = async_playwright()
                self._playwright = await self._playwright_cm.start()
            return self._playwright

    async def start(
        self, surface: str, rig_id: str, agent: str, cfg: ComputerUseConfig, events: CallEvents
    ) -> tuple[ContainerRig, bool]:
        """A started rig of `surface` (browser, desktop), and whether it came from the pool
        (then its id is the pool's, not `rig_id`)."""
        host, pool = self.host, self.pools.get(surface)
        pooled = await pool.claim() if pool is not None else None
        if pooled is not None:
            assert pool is not None
            await events.progress(surface, f"taking a started {surface} rig")
            if surface == "desktop":
                desktop = await claim_desktop(
                    host, pooled, agent, cfg, events, self.clock(), pool.release
                )
                return desktop, True
            browser = await claim_browser(
                host, pooled, agent, cfg, events, clock=self.clock, release=pool.release
            )
            return browser, True
        async with boot_slot(events, f"{surface} rig"):
            if surface == "desktop":
                return await start_desktop(host, rig_id, agent, cfg, events, self.clock()), False
            browser = await start_browser(
                host, rig_id, agent, cfg, events, playwright=self.driver, clock=self.clock
            )
        return browser, False

    def start_on(self, surface: str) -> Callable[[PreparedNetwork], Awaitable[Any]]:
        """The recipe of `surface`'s pool: its rig started on a pool network, its apps'
        proxy the one that network's armed proxy answers as."""
        host = self.host
        rigs = host.config.container.rigs
        image = rigs.desktop_image if surface == "desktop" else rigs.browser_image

        async def start(network: PreparedNetwork) -> Any:
            spec = pool_spec(host.backend, image, KIND_LABELS[surface], network)
            if surface == "desktop":
                return await open_desktop(host, spec, network.proxy_url)
            return await open_browser(host, spec, network.proxy_url, self.driver)

        return start

    async def close(self) -> None:
        """Stop the Playwright driver (after every rig and pool browser is closed)."""
        if self._playwright_cm is not None:
            with contextlib.suppress(Exception):
                await self._playwright_cm.__aexit__(None, None, None)
            self._playwright = self._playwright_cm = None
