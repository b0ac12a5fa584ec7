"""The scripts the probe runs in the page's isolated world ("corral-probe"): the secret
fields' tracker, installed when each document starts, and the probe's read.

Why a tracker: the screen lags the DOM. A frame the X server shows was drawn from the DOM
as it was a frame or more before, longer on a loaded machine, so a field that moved just
before a probe can still be on the screen where the probe no longer finds it. The
tracker follows every secret field from the document's start (a sample in the animation
frame after any DOM change, scroll, resize, load, animation or transition, every frame
while an animation runs, and every 250 ms regardless), and the probe masks each place a
field held until LINGER_MS have passed and LINGER_FRAMES frames were drawn since it left.
"""

from __future__ import annotations

import json

from sandboxes.secret_fields import SECRET_AUTOCOMPLETE

from .cdp import CDP
from .common import step_s

LINGER_MS = 1000
LINGER_FRAMES = 10
SAMPLE_EVERY_MS = 250

# Installs (once per document and world) and returns the tracker: `collect()` finds the
# secret fields (type=password, a token of sandboxes.secret_fields.SECRET_AUTOCOMPLETE, the
# one list, or masked with -webkit-text-security) in this frame, its open shadow roots
# and the frames of its own origin, clipped to the frame's viewport, in the frame's CSS
# pixels; `places(now)` is every place a field is in or left within the linger.
TRACKER_JS = r"""
(() => {
  if (window.__corralSecrets) return window.__corralSecrets;
  const SECRET_AUTOCOMPLETE = __SECRET_AUTOCOMPLETE__;
  const LINGER_MS = __LINGER_MS__, LINGER_FRAMES = __LINGER_FRAMES__;
  const seen = new Map();  // "x,y,w,h" -> {rect, left: ms or null, frames since it left}
  const watched = new WeakSet();
  let pending = false, quiet = 0;
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
  const collect = () => {
    const vw = window.innerWidth, vh = window.innerHeight;
    const rects = [];
    let frames = 0, blocked = 0;
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
              watch(doc);
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
    return {rects, frames, blocked};
  };
  const note = (rects, now, frame) => {
    const here = new Set();
    for (const r of rects) {
      const key = r.join(',');
      here.add(key);
      seen.set(key, {rect: r, left: null, frames: 0});
    }
    for (const [key, place] of seen) {
      if (here.has(key)) continue;
      if (place.left === null) { place.left = now; continue; }
      if (frame) place.frames++;
      // A page drawing no frames shows no new place either: past a thousand places, the
      // frame count no longer keeps one that left more than LINGER_MS ago.
      const old = now - place.left > LINGER_MS;
      if (old && (place.frames >= LINGER_FRAMES || seen.size > 1000)) seen.delete(key);
    }
  };
  const lingering = () => [...seen.values()].some((p) => p.left !== null);
  const tick = () => {
    pending = false;
    try { note(collect().rects, performance.now(), true); } catch (e) {}
    let moving = false;
    try { moving = document.getAnimations().some((a) => a.playState === 'running'); }
    catch (e) {}
    if (moving || lingering() || quiet++ < 2) schedule(false);
  };
  const schedule = (changed) => {
    if (changed) quiet = 0;
    if (!pending) { pending = true; requestAnimationFrame(tick); }
  };
  const watch = (doc) => {
    if (watched.has(doc)) return;
    watched.add(doc);
    new MutationObserver(() => schedule(true)).observe(doc, {
      subtree: true, childList: true, attributes: true, characterData: true});
    const win = doc.defaultView;
    if (!win) return;
    for (const type of ['scroll', 'resize', 'load', 'animationstart', 'transitionrun',
                        'focus', 'input', 'pointerdown', 'keydown']) {
      win.addEventListener(type, () => schedule(true), {capture: true, passive: true});
    }
  };
  const places = (now) => {
    const out = [];
    for (const place of seen.values()) {
      if (place.left === null || now - place.left <= LINGER_MS
          || place.frames < LINGER_FRAMES) out.push(place.rect);
    }
    return out;
  };
  const api = {collect, note, places};
  window.__corralSecrets = api;
  watch(document);
  setInterval(() => { try { note(collect().rects, performance.now(), false); } catch (e) {} },
              __SAMPLE_EVERY_MS__);
  schedule(true);
  return api;
})()
"""
TRACKER_JS = (
    TRACKER_JS.replace("__SECRET_AUTOCOMPLETE__", json.dumps(sorted(SECRET_AUTOCOMPLETE)))
    .replace("__LINGER_MS__", str(LINGER_MS))
    .replace("__LINGER_FRAMES__", str(LINGER_FRAMES))
    .replace("__SAMPLE_EVERY_MS__", str(SAMPLE_EVERY_MS))
)

# The probe's read, in an isolated world of each frame it is given (frames.py), never in
# the page's own world: the fields now and every place they left within the linger, the
# frame counts, and the viewport's place on the screen (viewport.VIEWPORT_JS: same formula).
PROBE_JS = (
    r"""
(() => {
  const tracker = """
    + TRACKER_JS
    + r""";
  const now = performance.now();
  const found = tracker.collect();
  tracker.note(found.rects, now, false);
  const offX = window.screenX + Math.max(0, window.outerWidth - window.innerWidth);
  const offY = window.screenY + Math.max(0, window.outerHeight - window.innerHeight);
  return {rects: tracker.places(now), frames: found.frames, blocked: found.blocked,
          url: location.href, title: document.title, dpr: window.devicePixelRatio || 1,
          offX, offY, vw: window.innerWidth, vh: window.innerHeight};
})()
"""
)


def track_secrets(cdp: CDP, sid: str) -> None:
    """Have every document of session `sid` (its frames included) start the tracker in the
    probe's world as it is created, and the documents already there start it now."""
    cdp.call(
        "Page.addScriptToEvaluateOnNewDocument",
        {"source": TRACKER_JS, "worldName": "corral-probe", "runImmediately": True},
        session=sid,
        timeout=step_s(),
    )
