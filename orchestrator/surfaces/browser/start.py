"""The browser rig's start recipe: the shared start path (egress, the container's spec,
the private CA), then the rig's handshake on its CDP pipe, the bridge, Playwright's
connection and one blank tab of the rig's size. Everything started is removed again if
a step fails."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import anyio
from playwright.async_api import Playwright

from orchestrator.config import ComputerUseConfig
from orchestrator.surfaces.base import opened
from orchestrator.surfaces.browser.cdp import CdpBridge, handshake
from orchestrator.surfaces.browser.rig import BrowserRig
from orchestrator.surfaces.start import Host, extra_ca, rig_egress_and_spec
from orchestrator.surfaces.teardown import closed_on_failure
from sandboxes.events import CallEvents

START_DEADLINE = 60.0
CONNECT_MS = 30_000
WIDTH, HEIGHT = 1280, 800


async def start_browser(
    host: Host,
    rig_id: str,
    agent: str,
    cfg: ComputerUseConfig,
    events: CallEvents,
    *,
    playwright: Callable[[], Any],
    clock: Callable[[], float],
) -> BrowserRig:
    stack = contextlib.AsyncExitStack()
    async with closed_on_failure(stack):
        image = host.config.container.rigs.browser_image
        egress, spec = await rig_egress_and_spec(
            stack, host, rig_id, agent, cfg, "browser", image, events
        )
        container = await host.backend.open_attached(spec)
        stack.push_async_callback(container.close)
        ca_pem = await extra_ca(host.config)
        ready, pending = await handshake(
            container,
            {"proxy": egress.proxy_url, "ca_pem": ca_pem, "width": WIDTH, "height": HEIGHT},
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
    rig = BrowserRig(
        **opened(rig_id, agent, cfg, clock(), egress),
        width=WIDTH,
        height=HEIGHT,
        stack=stack,
        container=container,
        bridge=bridge,
        browser=browser,
        context=context,
        chromium_sandbox=bool(ready.get("chromium_sandbox", False)),
    )
    await _first_tab(rig, context)
    return rig


async def _first_tab(rig: BrowserRig, context: Any) -> None:
    """Start from one blank tab of the rig's size (Chromium may have opened others).
    Chromium's own UI surfaces (chrome://*.top-chrome/, shown as chrome-error pages
    because the policy blocks chrome://) are pages to Playwright, not tabs: ignore
    them; close its first blank tab; start from a tab of our own, of the rig's size."""
    context.on("page", rig.watch)
    rig.ignored.update(p for p in context.pages if p.url != "about:blank")
    blank = [p for p in context.pages if p.url == "about:blank"]
    await context.new_page()
    for page in blank:
        with anyio.move_on_after(5):
            await page.close()
    await rig.page()


async def _close_quietly(browser: Any) -> None:
    with contextlib.suppress(Exception), anyio.move_on_after(5):
        await browser.close()
