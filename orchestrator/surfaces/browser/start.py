"""The browser rig's start recipe: the shared start path (egress, the container's spec,
the private CA), then the rig's handshake on its CDP pipe, the bridge, Playwright's
connection and one blank tab of the rig's size (`open_browser`). Cold, all of it at the
rig's start; warm (`orchestrator.pools.warm`), `open_browser` ahead on a pool network and
only the egress at the claim (`claim_browser`). Everything started is removed again if a
step fails."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
from playwright.async_api import Browser, BrowserContext, Page, Playwright

from orchestrator.config import ComputerUseConfig
from orchestrator.pools.warm import Warm
from orchestrator.surfaces.base import opened
from orchestrator.surfaces.browser.cdp import CdpBridge, handshake
from orchestrator.surfaces.browser.rig import BrowserRig
from orchestrator.surfaces.start import Host, Release, claimed, extra_ca, rig_egress_and_spec
from orchestrator.surfaces.teardown import closed_on_failure
from sandboxes.events import CallEvents
from sandboxes.ports import AttachedContainer, ContainerSpec

START_DEADLINE = 60.0
CONNECT_MS = 30_000
WIDTH, HEIGHT = 1280, 800
Driver = Callable[[], Any]  # the gateway's one Playwright (awaited)


@dataclass(eq=False, slots=True)
class BrowserParts:
    """A started browser container and Playwright's connection to it, with one blank tab;
    `stack` closes all of it."""

    container: AttachedContainer
    bridge: CdpBridge
    browser: Browser
    context: BrowserContext
    chromium_sandbox: bool
    ignored: set[Page]  # Chromium's own UI surfaces: pages to Playwright, not tabs
    stack: contextlib.AsyncExitStack

    @property
    def id(self) -> str:
        return self.container.id

    @property
    def dead(self) -> bool:
        return self.bridge.closed_reason is not None or not self.browser.is_connected()

    async def close(self) -> None:
        await self.stack.aclose()


async def open_browser(
    host: Host, spec: ContainerSpec, proxy_url: str | None, playwright: Driver
) -> BrowserParts:
    """The container of `spec` started (its Chromium's proxy `proxy_url`), connected."""
    stack = contextlib.AsyncExitStack()
    async with closed_on_failure(stack):
        container = await host.backend.open_attached(spec)
        stack.push_async_callback(container.close)
        ca_pem = await extra_ca(host.config)
        ready, pending = await handshake(
            container,
            {"proxy": proxy_url, "ca_pem": ca_pem, "width": WIDTH, "height": HEIGHT},
            START_DEADLINE,
        )
        bridge = CdpBridge(container, pending)
        await bridge.start()
        stack.push_async_callback(bridge.close)
        driver: Playwright = await playwright()
        browser = await driver.chromium.connect_over_cdp(bridge.url, timeout=CONNECT_MS)
        stack.push_async_callback(_close_quietly, browser)
        context = browser.contexts[0] if browser.contexts else await browser.new_context()
        await context.grant_permissions(["clipboard-read", "clipboard-write"])
        ignored = await _first_tab(context)
    sandbox = bool(ready.get("chromium_sandbox", False))
    return BrowserParts(container, bridge, browser, context, sandbox, ignored, stack)


async def start_browser(
    host: Host,
    rig_id: str,
    agent: str,
    cfg: ComputerUseConfig,
    events: CallEvents,
    *,
    playwright: Driver,
    clock: Callable[[], float],
) -> BrowserRig:
    """A cold start: the rig's egress, then its browser."""
    stack = contextlib.AsyncExitStack()
    async with closed_on_failure(stack):
        image = host.config.container.rigs.browser_image
        egress, spec = await rig_egress_and_spec(
            stack, host, rig_id, agent, cfg, "browser", image, events
        )
        parts = await open_browser(host, spec, egress.proxy_url, playwright)
        stack.push_async_callback(parts.close)
    return await _rig(
        BrowserRig(**opened(rig_id, agent, cfg, clock(), egress), **_fields(parts, stack))
    )


async def claim_browser(
    host: Host,
    pooled: Warm[BrowserParts],
    agent: str,
    cfg: ComputerUseConfig,
    events: CallEvents,
    *,
    clock: Callable[[], float],
    release: Release,
) -> BrowserRig:
    """A warm start: a pool's browser given the rig's egress (its id is the pool
    network's session id)."""
    stack, egress = await claimed(host, pooled, agent, cfg, events, release)
    rig_id = pooled.session_id
    fields = _fields(pooled.body, stack)
    return await _rig(BrowserRig(**opened(rig_id, agent, cfg, clock(), egress), **fields))


def _fields(parts: BrowserParts, stack: contextlib.AsyncExitStack) -> dict[str, Any]:
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "stack": stack,
        "container": parts.container,
        "bridge": parts.bridge,
        "browser": parts.browser,
        "context": parts.context,
        "chromium_sandbox": parts.chromium_sandbox,
        "ignored": set(parts.ignored),
    }


async def _rig(rig: BrowserRig) -> BrowserRig:
    """The rig watching its tabs (the console messages of each, and of each new one)."""
    rig.context.on("page", rig.watch)
    for page in rig.context.pages:
        if page not in rig.ignored:
            rig.watch(page)
    await rig.page()
    return rig


async def _first_tab(context: BrowserContext) -> set[Page]:
    """Leave one blank tab of our own (Chromium may have opened others); the pages that
    are Chromium's own UI surfaces (chrome://*.top-chrome/, shown as chrome-error pages
    because the policy blocks chrome://), to be ignored as tabs."""
    ignored = {p for p in context.pages if p.url != "about:blank"}
    blank = [p for p in context.pages if p.url == "about:blank"]
    await context.new_page()
    for page in blank:
        with anyio.move_on_after(5):
            await page.close()
    return ignored


async def _close_quietly(browser: Any) -> None:
    with contextlib.suppress(Exception), anyio.move_on_after(5):
        await browser.close()
