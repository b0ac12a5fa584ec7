"""CDP sessions the gateway drives itself on a browser rig's bridge (`cdp.CdpBridge.call`),
not through Playwright: the secret-field probe's and the screenshots'. Each call then
crosses the attach stream only, not Playwright's driver process and its WebSocket too.

As Playwright does for its own CDP sessions, the gateway first opens a browser session
of its own (`Target.attachToBrowserTarget`) and attaches to pages and frames from it
(`Target.attachToTarget`, flat): the events those attaches cause reach that session, not
Playwright's. Which target a Playwright page or frame is, Playwright says once (a session
of its own asked `Target.getTargetInfo`); the target id is then kept with the session.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import anyio
from playwright.async_api import BrowserContext, Frame, Page

from orchestrator.errors import CdpCallFailed
from orchestrator.surfaces.browser.cdp import CdpBridge

Handler = Callable[[dict[str, Any]], None]
DETACH_S = 2.0  # how long letting a session go may wait for its answer
GONE = "the page or frame of this CDP session is gone"


class DirectSession:
    """One flat CDP session of the gateway's own: `send`, `on` and `detach`, as a
    Playwright `CDPSession` has, but failing with `CdpCallFailed`."""

    def __init__(self, bridge: CdpBridge, browser: str, session_id: str) -> None:
        self._bridge, self._browser, self.id = bridge, browser, session_id
        self._handlers: dict[str, list[Handler]] = {}
        bridge.listen(session_id, self._event)

    async def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self._bridge.call(method, params, session=self.id)

    def on(self, event: str, handler: Handler) -> None:
        self._handlers.setdefault(event, []).append(handler)

    def _event(self, method: str, params: dict[str, Any]) -> None:
        for handler in self._handlers.get(method, ()):
            handler(params)

    async def detach(self) -> None:
        """Let the session go (bounded, even when cancelled); one gone already is fine."""
        self._bridge.ended(self.id, GONE)
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(DETACH_S),
            contextlib.suppress(CdpCallFailed),
        ):
            await self._bridge.call(
                "Target.detachFromTarget", {"sessionId": self.id}, session=self._browser
            )


class DirectSessions:
    """A rig's sessions of its own: the browser session they are attached from (opened
    on first use) and the target of each Playwright page or frame asked so far."""

    def __init__(self, bridge: CdpBridge, context: BrowserContext) -> None:
        self._bridge, self._context = bridge, context
        self._browser: str | None = None
        self._opening = anyio.Lock()

    async def attach(self, target: Page | Frame) -> DirectSession:
        """A new session of our own on `target`'s CDP target. Playwright's errors (a
        frame with no target of its own among them) pass through unchanged."""
        browser = await self._browser_session()
        helper = await self._context.new_cdp_session(target)
        try:
            info = await helper.send("Target.getTargetInfo")
        finally:
            await helper.detach()
        target_id = info["targetInfo"]["targetId"]
        answer = await self._bridge.call(
            "Target.attachToTarget", {"targetId": target_id, "flatten": True}, session=browser
        )
        return DirectSession(self._bridge, browser, answer["sessionId"])

    async def _browser_session(self) -> str:
        async with self._opening:
            if self._browser is None:
                answer = await self._bridge.call("Target.attachToBrowserTarget")
                self._browser = str(answer["sessionId"])
                self._bridge.listen(self._browser, self._browser_event)
            return self._browser

    def _browser_event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Target.detachedFromTarget" and "sessionId" in params:
            self._bridge.ended(str(params["sessionId"]), GONE)
