"""Where the page's main frame is on the screen, and a click target's hit test asked in the
same wait as that read when nothing has changed since the last one.

A target read turns a screen pixel into the main frame's CSS pixels with the frame's
viewport (read by a script in the probe's isolated world: the page cannot change what it
answers), then hit-tests there. Read one after another that is three waits for the browser
(the frame tree, which says whether the cached isolated world is still the document's;
the viewport; the hit test), each a wait for a CPU when the machine is busy. The viewport
changes rarely (a resize, a zoom, another document), so the three are asked at once, the
hit test at the point the last viewport read in the same world gives. Nothing guessed is
used unchecked: the answers count only when the frame tree names the cached world's
document, the viewport was read in that world, and the fresh viewport puts the point on
the same CSS pixel the hit test was asked at. Otherwise the viewport is read as before
(a new world when the document changed) and the caller asks the hit test itself.
"""

from __future__ import annotations

from typing import Any

from .browser import Browser, WorldKey
from .cdp import CDP, CDPError
from .common import step_s

# The probe's viewport read (probe.PROBE_JS uses the same formula), in a frame's isolated
# world: where the frame's viewport is on the screen, its size and its zoom.
VIEWPORT_JS = r"""
(() => ({
  offX: window.screenX + Math.max(0, window.outerWidth - window.innerWidth),
  offY: window.screenY + Math.max(0, window.outerHeight - window.innerHeight),
  vw: window.innerWidth, vh: window.innerHeight, dpr: window.devicePixelRatio || 1,
}))()
"""


def css_point(view: dict[str, Any], x: int, y: int) -> tuple[float, float] | None:
    """Screen pixel (x, y) in the main frame's CSS pixels, by `view`; None outside it."""
    zoom = float(view.get("dpr") or 1.0)
    css_x = x / zoom - float(view.get("offX") or 0)
    css_y = y / zoom - float(view.get("offY") or 0)
    width, height = float(view.get("vw") or 0), float(view.get("vh") or 0)
    if not (0 <= css_x < width and 0 <= css_y < height):
        return None
    return css_x, css_y


def hit_params(x: float, y: float) -> dict[str, Any]:
    """`DOM.getNodeForLocation`'s parameters for the CSS point (x, y)."""
    return {"x": int(x), "y": int(y), "includeUserAgentShadowDOM": False}


def main_viewport(
    browser: Browser, cdp: CDP, sid: str, tree: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The main frame's viewport, read in the probe's world for the document now shown (a
    new world when the document changed), and kept for the next read's guess. `tree`: the
    frame tree, when the caller has just read it."""
    for attempt in (0, 1):
        context = browser.probe_world(step_s(), tree)
        try:
            res = cdp.call("Runtime.evaluate", _read(context), session=sid, timeout=step_s())
            break
        except CDPError:
            if attempt:
                raise
            browser.forget_world()  # the document changed under the cached world
            tree = None  # and maybe since the tree was read: read it again
    value: dict[str, Any] = res.get("result", {}).get("value") or {}
    browser.viewport = (context, value)
    return value


def viewport_and_hit(
    browser: Browser, cdp: CDP, sid: str, x: int, y: int
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The main frame's viewport and, when the last viewport still holds, the hit test at
    screen pixel (x, y) from the same wait (None: the caller asks it at the fresh point)."""
    guess = _guess(browser, sid, x, y)
    if guess is None:
        return main_viewport(browser, cdp, sid), None
    key, context, point = guess
    tree, read, hit = cdp.call_all(
        (
            ("Page.getFrameTree", {}, sid),
            ("Runtime.evaluate", _read(context), sid),
            ("DOM.getNodeForLocation", hit_params(*point), sid),
        ),
        timeout=step_s(),
    )
    if isinstance(tree, CDPError):
        return main_viewport(browser, cdp, sid), None
    if isinstance(read, CDPError) or browser.world_key(sid, tree) != key:
        browser.forget_world()  # gone, or another document's: a world for the one now shown
        return main_viewport(browser, cdp, sid, tree), None
    view: dict[str, Any] = read.get("result", {}).get("value") or {}
    browser.viewport = (context, view)
    fresh = css_point(view, x, y)
    if fresh is None or hit_params(*fresh) != hit_params(*point) or isinstance(hit, CDPError):
        return view, None
    return view, hit


def _guess(
    browser: Browser, sid: str, x: int, y: int
) -> tuple[WorldKey, int, tuple[float, float]] | None:
    """The cached world's key and context and the CSS point by the viewport last read in
    it, when there are both for this page session."""
    world, seen = browser.cached_world(), browser.viewport
    if world is None or seen is None or world[0][0] != sid or seen[0] != world[1]:
        return None
    point = css_point(seen[1], x, y)
    return None if point is None else (world[0], world[1], point)


def _read(context: int) -> dict[str, Any]:
    return {"expression": VIEWPORT_JS, "returnByValue": True, "contextId": context}
