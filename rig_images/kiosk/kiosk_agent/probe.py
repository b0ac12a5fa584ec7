"""What a screenshot must mask: password fields in screen pixels (the DOM over CDP, and
AT-SPI when the page has frames the DOM cannot see into), the top-level window count and
whether the focused window can be read. Every sub-step is bounded; a failed source is
reported in `error`."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from .atspi import Atspi
from .browser import Browser
from .cdp import CDPError
from .common import PROBE_STEP_S, OpError
from .screen import Screen

# Password fields (type=password, or masked with -webkit-text-security) in the page, open
# shadow roots and same-origin frames, clipped to the viewport, in screen pixels.
PROBE_JS = r"""
(() => {
  const dpr = window.devicePixelRatio || 1;
  const offX = window.screenX + Math.max(0, window.outerWidth - window.innerWidth);
  const offY = window.screenY + Math.max(0, window.outerHeight - window.innerHeight);
  const vw = window.innerWidth, vh = window.innerHeight;
  const rects = [];
  let frames = 0, blocked = 0;
  const SECRET_AUTOCOMPLETE = ['cc-number', 'cc-csc', 'cc-exp', 'cc-exp-month',
    'cc-exp-year', 'one-time-code', 'current-password', 'new-password'];
  const isSecret = (el) => {
    if (el.tagName === 'INPUT' && (el.type || '').toLowerCase() === 'password') return true;
    const ac = (el.getAttribute('autocomplete') || '').toLowerCase().split(/\s+/);
    if (ac.some((token) => SECRET_AUTOCOMPLETE.includes(token))) return true;
    try {
      const s = getComputedStyle(el);
      const t = s.webkitTextSecurity || s.getPropertyValue('-webkit-text-security');
      return !!t && t !== 'none';
    } catch (e) { return false; }
  };
  const visit = (root, ox, oy, depth) => {
    if (depth > 8) return;
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_ELEMENT);
    let el = root.nodeType === 1 ? root : walker.nextNode();
    while (el) {
      if (el.shadowRoot) visit(el.shadowRoot, ox, oy, depth + 1);
      if ((el.tagName === 'INPUT' || el.isContentEditable) && isSecret(el)) {
        const r = el.getBoundingClientRect();
        const s = getComputedStyle(el);
        if (r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && s.display !== 'none') {
          const x1 = Math.max(0, ox + r.left), y1 = Math.max(0, oy + r.top);
          const x2 = Math.min(vw, ox + r.right), y2 = Math.min(vh, oy + r.bottom);
          if (x2 > x1 && y2 > y1) rects.push([x1, y1, x2 - x1, y2 - y1]);
        }
      }
      if (el.tagName === 'IFRAME' || el.tagName === 'FRAME') {
        frames++;
        try {
          const doc = el.contentDocument;
          if (doc && doc.documentElement) {
            const r = el.getBoundingClientRect();
            const fx = ox + r.left + el.clientLeft, fy = oy + r.top + el.clientTop;
            visit(doc.documentElement, fx, fy, depth + 1);
          } else { blocked++; }
        } catch (e) { blocked++; }
      }
      el = walker.nextNode();
    }
  };
  if (document.documentElement) visit(document.documentElement, 0, 0, 0);
  return {
    rects: rects.map(([x, y, w, h]) => [
      Math.floor((offX + x) * dpr), Math.floor((offY + y) * dpr),
      Math.ceil(w * dpr), Math.ceil(h * dpr)]),
    frames, blocked, url: location.href, title: document.title, dpr, offX, offY, vw, vh,
  };
})()
"""


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

    tree: dict[str, Any] | None = None
    try:
        out["pages"] = browser.page_count(PROBE_STEP_S)
        tree = browser.frame_tree(PROBE_STEP_S)  # read once: frame URLs and the world's key
        out["frame_urls"] = browser.frame_urls(tree)
    except Exception as exc:
        errors.append(f"pages: {exc}")
    lap("targets")
    try:
        out["windows"] = screen.count_windows()
    except Exception as exc:
        errors.append(f"windows: {exc}")
    out["focused_ok"] = screen.focused_ok()
    lap("x11")
    dom_errors = dom_probe(browser, out, tree)
    lap("dom")
    # AT-SPI is a cross-check on every probe (a secret field either one finds is masked),
    # and the only eyes inside cross-origin frames, which the DOM probe cannot enter.
    try:
        assert atspi is not None, "no AT-SPI"
        rects = atspi.password_rects(PROBE_STEP_S)
        known = out["password_rects"]
        out["password_rects"] = known + [r for r in rects if r not in known]
        dom_errors = [e for e in dom_errors if not e.endswith(BLOCKED_FRAMES)]
    except Exception as exc:
        if dom_errors:  # the DOM did not see everything either: nobody did
            dom_errors.append(f"atspi: {exc}")
    errors += [f"dom: {e}" for e in dom_errors]
    lap("atspi")
    if out["url"] is None:
        try:
            info = browser.page_info(PROBE_STEP_S)
            out["url"], out["title"] = info["url"], info["title"]
        except Exception as exc:
            errors.append(f"page: {exc}")
    out["error"] = "; ".join(errors) if errors else None
    out["ms"] = spent  # where the probe's time went (for the benchmark)
    return out


BLOCKED_FRAMES = "cross-origin frame(s) not inspectable"


def dom_probe(browser: Browser, out: dict[str, Any], tree: dict[str, Any] | None) -> list[str]:
    """Secret fields, URL, title and zoom from the page's DOM, read in an isolated world,
    plus closed shadow roots through CDP's DOM domain; the problems met, if any."""
    try:
        sid = browser.page_session()

        def evaluate(frames: dict[str, Any] | None) -> dict[str, Any]:
            result: dict[str, Any] = browser.live_cdp().call(
                "Runtime.evaluate",
                {
                    "expression": PROBE_JS,
                    "returnByValue": True,
                    "timeout": 1000,
                    # Our own world: the page's scripts cannot replace the DOM APIs it calls.
                    "contextId": browser.probe_world(PROBE_STEP_S, frames),
                },
                session=sid,
                timeout=PROBE_STEP_S,
            )
            return result

        try:
            res = evaluate(tree)
        except CDPError:
            browser.forget_world()  # the document changed under the cached world
            res = evaluate(None)  # and read the frame tree again
        if "exceptionDetails" in res:
            raise OpError(res["exceptionDetails"].get("text", "exception"))
        value = res.get("result", {}).get("value") or {}
        out["password_rects"] = [[int(v) for v in r] for r in value.get("rects", [])]
        out["url"], out["title"] = value.get("url"), value.get("title")
        out["zoom"] = float(value.get("dpr") or 1.0)
        view = Viewport(
            float(value.get("offX") or 0),
            float(value.get("offY") or 0),
            float(value.get("vw") or 0),
            float(value.get("vh") or 0),
            out["zoom"],
        )
        known = out["password_rects"]
        for rect in closed_shadow_rects(browser, view):
            if rect not in known:
                known.append(rect)
        if value.get("blocked"):
            return [f"{value['blocked']} {BLOCKED_FRAMES}"]
    except Exception as exc:
        return [str(exc)]
    return []


SECRET_AUTOCOMPLETE = frozenset(
    {
        "cc-number",
        "cc-csc",
        "cc-exp",
        "cc-exp-month",
        "cc-exp-year",
        "one-time-code",
        "current-password",
        "new-password",
    }
)


@dataclass(frozen=True, slots=True)
class Viewport:
    """The page's place on the screen: content offset, size (CSS px) and zoom."""

    off_x: float
    off_y: float
    width: float
    height: float
    zoom: float


def _attrs(node: dict[str, Any]) -> dict[str, str]:
    flat = node.get("attributes") or []
    return {str(flat[i]).lower(): str(flat[i + 1]) for i in range(0, len(flat) - 1, 2)}


def _is_secret_node(node: dict[str, Any]) -> bool:
    if str(node.get("nodeName", "")).upper() != "INPUT":
        return False
    attrs = _attrs(node)
    if attrs.get("type", "").lower() == "password":
        return True
    return bool(SECRET_AUTOCOMPLETE & set(attrs.get("autocomplete", "").lower().split()))


def _closed_secret_nodes(node: dict[str, Any], in_closed: bool = False) -> list[int]:
    """Secret inputs inside closed shadow roots (no JavaScript world can reach those)."""
    found: list[int] = []
    if in_closed and _is_secret_node(node):
        found.append(int(node["nodeId"]))
    for root in node.get("shadowRoots") or []:
        closed = in_closed or root.get("shadowRootType") == "closed"
        found += _closed_secret_nodes(root, closed)
    for child in node.get("children") or []:
        found += _closed_secret_nodes(child, in_closed)
    if node.get("contentDocument"):
        found += _closed_secret_nodes(node["contentDocument"], in_closed)
    return found


def closed_shadow_rects(browser: Browser, view: Viewport) -> list[list[int]]:
    """Screen rectangles of secret inputs inside closed shadow roots, from CDP's DOM domain
    (the browser's view of the tree, closed roots included), clipped to the viewport."""
    cdp = browser.live_cdp()
    sid = browser.page_session()
    doc = cdp.call(
        "DOM.getDocument", {"depth": -1, "pierce": True}, session=sid, timeout=PROBE_STEP_S
    )
    rects: list[list[int]] = []
    for node_id in _closed_secret_nodes(doc["root"]):
        try:
            box = cdp.call(
                "DOM.getBoxModel", {"nodeId": node_id}, session=sid, timeout=PROBE_STEP_S
            )
        except CDPError:
            continue  # not rendered (display: none): nothing on screen to mask
        quad = box["model"]["border"]
        xs, ys = quad[0::2], quad[1::2]
        x1, y1 = max(0.0, min(xs)), max(0.0, min(ys))
        x2, y2 = min(view.width, max(xs)), min(view.height, max(ys))
        if x2 > x1 and y2 > y1:
            rects.append(
                [
                    math.floor((view.off_x + x1) * view.zoom),
                    math.floor((view.off_y + y1) * view.zoom),
                    math.ceil((x2 - x1) * view.zoom),
                    math.ceil((y2 - y1) * view.zoom),
                ]
            )
    return rects


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
