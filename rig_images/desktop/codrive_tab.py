"""codrive's api actions on Chromium (open_url, reload, back) and the page's URL, over the
DevTools pipe of the Chromium codrive started (`Codrive._spawn`): mixed into Codrive."""

from __future__ import annotations

import contextlib
import queue
from typing import Any

from kiosk_agent.cdp import CDP
from kiosk_agent.common import OpError

from sandboxes.secret_fields import secret_by_attributes, text_security

LOAD_S = 10.0  # a navigation's wait for the tab to stop loading
UI_SCHEMES = ("chrome://", "chrome-untrusted://", "chrome-error://", "devtools://")


class ChromiumTab:
    """The tab codrive drives: `cdp` is the pipe of the Chromium it started (None until
    then), `cdp_session` the attached tab's session."""

    desktop: Any
    cdp: CDP | None
    cdp_session: str | None

    def page_url(self) -> str:
        """The tab's URL ("" when Chromium was not started by codrive or cannot say): its
        navigation entry's, which is the page asked for also when Chromium shows an error
        page in its place (whose own location is chrome-error://)."""
        if self.cdp is None or self.cdp.closed:
            return ""
        with contextlib.suppress(OpError, KeyError, IndexError, TypeError):
            history = self._page_call("Page.getNavigationHistory", {})
            return str(history["entries"][int(history["currentIndex"])]["url"])
        with contextlib.suppress(OpError):
            return str(
                self._page_call("Runtime.evaluate", {"expression": "location.href"})
                .get("result", {})
                .get("value", "")
            )
        return ""

    def focused_secret(self) -> bool | None:
        """Whether the tab's focused element is a secret field, by corral's one rule
        (`sandboxes.secret_fields`: a password input, an autocomplete secret, CSS-masked
        text). The focus is read from the accessibility tree, which sees into closed shadow
        roots where `document.activeElement` stops at the host. None: cannot say."""
        if self.cdp is None or self.cdp.closed:
            return None
        try:
            tree = self._page_call("Accessibility.getFullAXTree", {})
            focused = [
                n
                for n in tree.get("nodes", [])
                if any(
                    p.get("name") == "focused" and (p.get("value") or {}).get("value")
                    for p in n.get("properties", [])
                )
                and n.get("backendDOMNodeId")
                and (n.get("role") or {}).get("value") not in ("RootWebArea", "WebArea")
            ]
            if not focused:
                return False  # nothing in the page has the focus
            backend = int(focused[-1]["backendDOMNodeId"])
            node = self._page_call("DOM.describeNode", {"backendNodeId": backend})["node"]
            if secret_by_attributes(node):
                return True
            self._page_call("DOM.enable", {})
            self._page_call("DOM.getDocument", {"depth": 0})
            pushed = self._page_call(
                "DOM.pushNodesByBackendIdsToFrontend", {"backendNodeIds": [backend]}
            )
            self._page_call("CSS.enable", {})
            computed = self._page_call(
                "CSS.getComputedStyleForNode", {"nodeId": pushed["nodeIds"][0]}
            )
            return text_security(computed.get("computedStyle", []))
        except (OpError, KeyError, IndexError, TypeError, ValueError):
            return None

    def _page_call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        cdp = self.cdp
        if cdp is None or cdp.closed:
            raise OpError("Chromium was not started by codrive (no CDP pipe)")
        if self.cdp_session is None:
            targets = cdp.call("Target.getTargets", timeout=5)
            # Tabs only: Chromium's own UI surfaces (chrome://..., e.g. a page the managed
            # policy blocked) are pages to CDP too.
            pages = [
                t
                for t in targets.get("targetInfos", [])
                if t.get("type") == "page" and not str(t.get("url", "")).startswith(UI_SCHEMES)
            ]
            if not pages:
                raise OpError("Chromium has no tab")
            self.cdp_session = cdp.call(
                "Target.attachToTarget", {"targetId": pages[0]["targetId"], "flatten": True}
            )["sessionId"]
            cdp.call("Page.enable", session=self.cdp_session, timeout=10)
        return cdp.call(method, params, session=self.cdp_session, timeout=10)

    def _navigate(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A navigation, answered once the tab stopped loading (at most LOAD_S): a second
        navigation while an error page is still committing can end Chromium."""
        self._page_call("Page.getFrameTree", {})  # attached, with Page events on
        cdp, sid = self.cdp, self.cdp_session
        assert cdp is not None
        waiter = cdp.expect(
            lambda m: m.get("sessionId") == sid and m.get("method") == "Page.frameStoppedLoading"
        )
        try:
            result = self._page_call(method, params)
            with contextlib.suppress(queue.Empty):
                waiter.events.get(timeout=LOAD_S)
        finally:
            cdp.unexpect(waiter)
        return result

    def op_browser(self, req: dict[str, Any]) -> dict[str, Any]:
        self.desktop._require()
        what = str(req.get("what"))
        if what == "open_url":
            result = self._navigate("Page.navigate", {"url": str(req["url"])})
            if result.get("errorText"):
                raise OpError(f"open_url: {result['errorText']}")
        elif what == "reload":
            self._navigate("Page.reload", {})
        elif what == "back":
            history = self._page_call("Page.getNavigationHistory", {})
            index = int(history.get("currentIndex", 0))
            if index <= 0:
                raise OpError("back: no earlier page in this tab")
            entry = history["entries"][index - 1]
            self._navigate("Page.navigateToHistoryEntry", {"entryId": entry["id"]})
        else:
            raise OpError(f"unknown browser action {what!r}")
        return {"done": True}
