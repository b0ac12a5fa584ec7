"""codrive's api actions on Chromium (open_url, reload, back) and the page's URL, over the
DevTools pipe of the Chromium codrive started (`Codrive._spawn`): mixed into Codrive."""

from __future__ import annotations

import contextlib
import json
import queue
from typing import Any

from kiosk_agent.cdp import CDP
from kiosk_agent.common import OpError
from kiosk_agent.shadow import SECRET_AUTOCOMPLETE

LOAD_S = 10.0  # a navigation's wait for the tab to stop loading
UI_SCHEMES = ("chrome://", "chrome-untrusted://", "chrome-error://", "devtools://")
# Whether the page's focused element (through open shadow roots) is a secret field: a
# password input, an autocomplete secret (the kiosk probe's tokens), or CSS-masked text.
FOCUSED_SECRET_JS = """((SECRET) => {
  let el = document.activeElement;
  while (el && el.shadowRoot && el.shadowRoot.activeElement) el = el.shadowRoot.activeElement;
  if (!el || el === document.body) return false;
  if ((el.getAttribute('type') || '').toLowerCase() === 'password') return true;
  const tokens = (el.getAttribute('autocomplete') || '').toLowerCase().split(/\\s+/);
  if (tokens.some((t) => SECRET.includes(t))) return true;
  const masked = getComputedStyle(el).getPropertyValue('-webkit-text-security');
  return !!masked && masked !== 'none';
})"""


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
        """Whether the tab's focused element is a secret field (None: cannot say)."""
        if self.cdp is None or self.cdp.closed:
            return None
        secret = json.dumps(sorted(SECRET_AUTOCOMPLETE))
        expression = f"{FOCUSED_SECRET_JS}({secret})"
        with contextlib.suppress(OpError):
            found = self._page_call("Runtime.evaluate", {"expression": expression})
            value = found.get("result", {}).get("value")
            return value if isinstance(value, bool) else None
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
