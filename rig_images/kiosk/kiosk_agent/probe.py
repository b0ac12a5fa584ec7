"""What a screenshot must mask: password fields in screen pixels (the DOM over CDP, and
AT-SPI when the page has frames the DOM cannot see into), the top-level window count and
whether the focused window can be read. Every sub-step is bounded; a failed source is
reported in `error`."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from .atspi import Atspi
from .browser import Browser
from .cdp import CDP, CDPError
from .common import OpError, step_s
from .frames import FrameReader
from .probe_js import PROBE_JS
from .screen import Screen
from .shadow import closed_shadow_css


def probe(screen: Screen, browser: Browser, atspi: Atspi | None) -> dict[str, Any]:
    """Everything a screenshot's mask needs, read from outside the page where it can be:
    the page's own JavaScript never runs the probe (an isolated world does), and the
    browser, not the page, says how many tabs are open."""
    errors: list[str] = []
    out: dict[str, Any] = {
        "windows": 0,
        "pages": 0,
        "frame_urls": [],
        "zoom": 1.0,
        "focused_ok": False,
        "password_rects": [],
        "url": None,
        "title": None,
        "error": None,
    }
    clock = time.perf_counter()
    spent: dict[str, float] = {}

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        spent[name] = round((now - clock) * 1000, 2)
        clock = now

    tree, iframes = _read_targets(browser, out, errors)
    lap("targets")
    try:
        out["windows"] = screen.count_windows()
    except Exception as exc:
        errors.append(f"windows: {exc}")
    out["focused_ok"] = screen.focused_ok()
    lap("x11")
    # AT-SPI is a cross-check on every probe (a secret field either one finds is masked);
    # it runs on its own thread while the DOM is read.
    atspi_rects = _start_atspi(atspi)
    dom_errors = dom_probe(browser, out, tree, iframes)
    lap("dom")
    _add_atspi_rects(atspi_rects, out, dom_errors)
    errors += [f"dom: {e}" for e in dom_errors]
    lap("atspi")
    if out["url"] is None:
        try:
            info = browser.page_info(step_s())
            out["url"], out["title"] = info["url"], info["title"]
        except Exception as exc:
            errors.append(f"page: {exc}")
    out["error"] = "; ".join(errors) if errors else None
    out["ms"] = spent  # where the probe's time went (for the benchmark)
    return out


def _read_targets(
    browser: Browser, out: dict[str, Any], errors: list[str]
) -> tuple[dict[str, Any] | None, list[dict[str, Any]] | None]:
    """The page count and frame URLs into `out`; the frame tree and the out-of-process
    iframes (None where they could not be read)."""
    tree: dict[str, Any] | None = None
    iframes: list[dict[str, Any]] | None = None
    try:
        targets = browser.targets(step_s())
        out["pages"] = sum(1 for t in targets if t.get("type") == "page")
        iframes = [t for t in targets if t.get("type") == "iframe"]
        tree = browser.frame_tree(step_s())  # read once: frame URLs and the world's key
        out["frame_urls"] = browser.frame_urls(tree)
        out["frame_urls"] += [str(t["url"]) for t in iframes if t.get("url")]
    except Exception as exc:
        errors.append(f"pages: {exc}")
    return tree, iframes


def _start_atspi(atspi: Atspi | None) -> Callable[[float], list[list[int]]] | Exception:
    """AT-SPI's password rectangles, started on its own thread (or why they cannot be)."""
    try:
        assert atspi is not None, "no AT-SPI"
        return atspi.start_password_rects()
    except Exception as exc:
        return exc


def _add_atspi_rects(
    atspi_rects: Callable[[float], list[list[int]]] | Exception,
    out: dict[str, Any],
    dom_errors: list[str],
) -> None:
    """AT-SPI's rectangles added to the DOM's; its failure counts only when the DOM did
    not see everything either."""
    try:
        if isinstance(atspi_rects, Exception):
            raise atspi_rects
        rects = atspi_rects(step_s())
        known = out["password_rects"]
        out["password_rects"] = known + [r for r in rects if r not in known]
    except Exception as exc:
        if dom_errors:  # the DOM did not see everything either: nobody did
            dom_errors.append(f"atspi: {exc}")


def dom_probe(
    browser: Browser,
    out: dict[str, Any],
    tree: dict[str, Any] | None,
    iframes: list[dict[str, Any]] | None,
) -> list[str]:
    """Secret fields, URL, title and zoom from the page's DOM, read in isolated worlds of
    the main frame and of every frame its script cannot enter, plus closed shadow roots
    through CDP's DOM domain; the problems met, if any."""
    if iframes is None:
        return ["the browser's targets could not be listed"]
    try:
        sid = browser.page_session()
        cdp = browser.live_cdp()
        value, tree = _main_frame(browser, cdp, sid, tree)
        out["url"], out["title"] = value.get("url"), value.get("title")
        out["zoom"] = float(value.get("dpr") or 1.0)
        view = Viewport(
            float(value.get("offX") or 0),
            float(value.get("offY") or 0),
            float(value.get("vw") or 0),
            float(value.get("vh") or 0),
            out["zoom"],
        )
        css: list[list[float]] = [[float(v) for v in r] for r in value.get("rects", [])]
        css += closed_shadow_css(cdp, sid)
        reader = FrameReader(cdp, sid, browser.frame_state, PROBE_JS, closed_shadow_css)
        reading = reader.read(iframes, tree)
        css += reading.rects
        out["password_rects"] = view.on_screen(css)
        errors = list(reading.errors)
        blocked = int(value.get("blocked") or 0)
        if blocked > reading.frames_read:
            errors.append(f"{blocked - reading.frames_read} frame(s) not inspectable")
        return errors
    except Exception as exc:
        return [str(exc)]


def _main_frame(
    browser: Browser, cdp: CDP, sid: str, tree: dict[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """PROBE_JS's answer in the main frame's isolated world, and the frame tree still
    valid (None when the document changed under the cached world and must be re-read)."""

    def evaluate(frames: dict[str, Any] | None) -> dict[str, Any]:
        result: dict[str, Any] = cdp.call(
            "Runtime.evaluate",
            {
                "expression": PROBE_JS,
                "returnByValue": True,
                "timeout": 1000,
                # Our own world: the page's scripts cannot replace the DOM APIs it calls.
                "contextId": browser.probe_world(step_s(), frames),
            },
            session=sid,
            timeout=step_s(),
        )
        return result

    try:
        res = evaluate(tree)
    except CDPError:
        browser.forget_world()  # the document changed under the cached world
        tree = None  # so did its frame tree: read it again
        res = evaluate(tree)
    if "exceptionDetails" in res:
        raise OpError(res["exceptionDetails"].get("text", "exception"))
    value: dict[str, Any] = res.get("result", {}).get("value") or {}
    return value, tree


class Viewport(NamedTuple):
    """The page's place on the screen: content offset, size (CSS px) and zoom."""

    off_x: float
    off_y: float
    width: float
    height: float
    zoom: float

    def to_screen(self, rect: list[float]) -> list[int] | None:
        """A main-frame CSS rectangle in screen pixels, clipped to the viewport."""
        x, y, w, h = rect
        x1, y1 = max(0.0, x), max(0.0, y)
        x2, y2 = min(self.width, x + w), min(self.height, y + h)
        if x2 <= x1 or y2 <= y1:
            return None
        return [
            math.floor((self.off_x + x1) * self.zoom),
            math.floor((self.off_y + y1) * self.zoom),
            math.ceil((x2 - x1) * self.zoom),
            math.ceil((y2 - y1) * self.zoom),
        ]

    def on_screen(self, css: list[list[float]]) -> list[list[int]]:
        """Main-frame CSS rectangles in screen pixels, clipped, each once."""
        known: list[list[int]] = []
        for rect in css:
            screen_rect = self.to_screen(rect)
            if screen_rect is not None and screen_rect not in known:
                known.append(screen_rect)
        return known


PAD = 2  # the same margin as sandboxes.masking.PAD (this package cannot import corral)


def padded(rects: list[list[int]], width: int, height: int) -> list[list[int]]:
    """The rectangles to paint: each with a PAD-pixel margin, clipped to the screen (the
    same arithmetic as sandboxes.masking, so the gateway recognises them)."""
    out: list[list[int]] = []
    for x, y, w, h in rects:
        left, top = max(0, x - PAD), max(0, y - PAD)
        right, bottom = min(width, x + w + PAD), min(height, y + h + PAD)
        if right > left and bottom > top and [left, top, right - left, bottom - top] not in out:
            out.append([left, top, right - left, bottom - top])
    return out


def merge(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The probe for an image taken between two probes: mask whatever either saw."""
    probe = dict(after)
    rects = list(before["password_rects"])
    rects += [r for r in after["password_rects"] if r not in rects]
    probe["password_rects"] = rects
    probe["windows"] = max(before["windows"], after["windows"])
    probe["pages"] = max(before.get("pages", 0), after.get("pages", 0))
    frames = list(before.get("frame_urls", []))
    probe["frame_urls"] = frames + [u for u in after.get("frame_urls", []) if u not in frames]
    zooms = [p.get("zoom", 1.0) for p in (before, after)]
    probe["zoom"] = max(zooms, key=lambda z: abs(z - 1.0))
    probe["focused_ok"] = before["focused_ok"] and after["focused_ok"]
    probe["error"] = before["error"] or after["error"]
    if before["url"] != after["url"] and not probe["error"]:
        probe["error"] = "the page changed while the screenshot was taken"
    return probe
