"""What a click at a screen point would hit: the accessible name and role of the element
there (its nearest interactive ancestor), read from outside the page.

The browser answers, not the page: `DOM.getNodeForLocation` hit-tests in the renderer and
`Accessibility.getPartialAXTree` gives the node's accessible name and role as assistive
technology would read them. No script runs in the page's own world; the only script is
the probe's viewport read (window offset and zoom), in the probe's isolated world. A point
inside an out-of-process (cross-site) frame is followed into that frame's session, through
the box of the element that owns the frame (the same arithmetic as the probe's, frames.py).
"""

from __future__ import annotations

from typing import Any

from sandboxes.secret_fields import quad_box

from .browser import Browser
from .cdp import CDP, Call, CDPError
from .common import step_s
from .frames import FrameReader
from .viewport import VIEWPORT_JS, css_point, hit_params, main_viewport, viewport_and_hit

# The roles a click lands on as one control: the nearest of these above the hit element
# is the target.
INTERACTIVE_ROLES = frozenset(
    {
        "button",
        "link",
        "menuitem",
        "menuitemcheckbox",
        "menuitemradio",
        "tab",
        "checkbox",
        "radio",
        "switch",
        "option",
    }
)
MAX_FRAME_DEPTH = 8


def unknown(error: str) -> dict[str, Any]:
    return {"name": None, "role": None, "text": None, "href": None, "error": error}


def target(browser: Browser, x: int, y: int) -> dict[str, Any]:
    """The element a click at screen pixel (x, y) would hit, as
    `{"name", "role", "text", "href", "error", "node", "frame", "bounds"}`; name None with
    `error` when it cannot be told."""
    cdp = browser.live_cdp()
    sid = browser.page_session()
    view, hit = viewport_and_hit(browser, cdp, sid, x, y)
    point = css_point(view, x, y)
    if point is None:
        return unknown(f"{x},{y} is outside the page")
    reader = FrameReader(cdp, sid, browser.frame_state, VIEWPORT_JS, lambda _c, _s: [])
    return _resolve(reader, sid, *point, 0, hit)


def _resolve(
    reader: FrameReader,
    sid: str,
    x: float,
    y: float,
    depth: int,
    hit: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What is at CSS point (x, y) of session `sid`'s frame; `hit`: the hit test there, when
    asked already."""
    cdp = reader.cdp
    if hit is None:
        hit = reader.call("DOM.getNodeForLocation", hit_params(x, y), sid)
    backend = int(hit["backendNodeId"])
    # The node and its accessibility tree asked at once (one wait, not two): the tree is
    # not used when the node owns another renderer's frame.
    described, tree = _all(
        cdp,
        ("DOM.describeNode", {"backendNodeId": backend}, sid),
        ("Accessibility.getPartialAXTree", _ax_params(backend), sid),
    )
    node = _ok(described)["node"]
    frame_id = str(node.get("frameId") or "")
    is_owner = str(node.get("nodeName", "")).upper() in ("IFRAME", "FRAME")
    if is_owner and frame_id and frame_id in _iframe_targets(cdp):
        # An out-of-process frame: this renderer only knows its owner element.
        if depth >= MAX_FRAME_DEPTH:
            return unknown("frames nested too deep")
        return _into_frame(reader, sid, frame_id, backend, (x, y), depth)
    return _describe(reader, sid, backend, str(hit.get("frameId") or ""), _ok(tree))


def _ax_params(backend: int) -> dict[str, Any]:
    return {"backendNodeId": backend, "fetchRelatives": True}


def _all(cdp: CDP, *calls: Call) -> list[dict[str, Any] | CDPError]:
    return cdp.call_all(calls, timeout=step_s())


def _ok(answer: dict[str, Any] | CDPError) -> dict[str, Any]:
    if isinstance(answer, CDPError):
        raise answer
    return answer


def _iframe_targets(cdp: CDP) -> set[str]:
    infos = cdp.call("Target.getTargets", timeout=step_s()).get("targetInfos", [])
    return {str(t["targetId"]) for t in infos if t.get("type") == "iframe"}


def _into_frame(
    reader: FrameReader,
    parent: str,
    frame_id: str,
    owner: int,
    point: tuple[float, float],
    depth: int,
) -> dict[str, Any]:
    """Follow a point into an out-of-process frame: into the owner's content box, scaled
    when the box is not the frame's size (a CSS transform)."""
    box = reader.call("DOM.getBoxModel", {"backendNodeId": owner}, parent)
    left, top, right, bottom = quad_box(box["model"]["content"])
    x, y = point
    if not (left <= x < right and top <= y < bottom):
        return _describe(reader, parent, owner, "")  # the frame's border: its owner element
    child = reader.attach(frame_id)
    tree = reader.call("Page.getFrameTree", {}, child)
    view = reader.evaluate(child, tree["frameTree"]["frame"])
    inner_w, inner_h = float(view.get("vw") or 0), float(view.get("vh") or 0)
    if inner_w <= 0 or inner_h <= 0:
        return unknown("a frame with no viewport")
    local_x = (x - left) * inner_w / (right - left)
    local_y = (y - top) * inner_h / (bottom - top)
    return _resolve(reader, child, local_x, local_y, depth + 1)


def _describe(
    reader: FrameReader,
    sid: str,
    backend: int,
    frame_id: str,
    tree: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The nearest interactive ancestor-or-self of a hit node (or the node itself), its
    accessible name, role, visible text and, inside a link, the link's URL. `tree`: the
    node's partial accessibility tree when asked already."""
    cdp = reader.cdp
    if tree is None:
        tree = reader.call("Accessibility.getPartialAXTree", _ax_params(backend), sid)
    nodes: dict[str, dict[str, Any]] = {str(n["nodeId"]): n for n in tree.get("nodes") or []}
    hit = next((n for n in nodes.values() if n.get("backendDOMNodeId") == backend), None)
    if hit is None:
        return unknown("the element there has no accessibility node")
    chain = _ancestors(hit, nodes)
    chosen = next((n for n in chain if _role(n) in INTERACTIVE_ROLES), None)
    if chosen is None:
        chosen = next((n for n in chain if not n.get("ignored")), hit)
    link = next((n for n in chain if _role(n) == "link"), None)
    element = int(chosen.get("backendDOMNodeId") or backend)
    href = None
    if link is not None and link.get("backendDOMNodeId"):
        href = _href(reader, sid, int(link["backendDOMNodeId"]), frame_id)
    role = _role(chosen)
    # Its box and its subtree asked at once. A click on no element in particular (the
    # page's background) has no text of its own.
    box_call: Call = ("DOM.getBoxModel", {"backendNodeId": element}, sid)
    if role == "RootWebArea":
        box, text = _all(cdp, box_call)[0], ""
    else:
        box, subtree = _all(cdp, box_call, _subtree_call(sid, element))
        text = _text(_ok(subtree)["node"])
    return {
        "name": _value(chosen.get("name")),
        "role": role,
        "text": text,
        "href": href,
        "error": None,
        # Which element it is, beyond what the rules judge (an approval binds these, so a
        # look-alike put in its place is another element): its DOM node, frame and box.
        "node": element,
        "frame": frame_id or None,
        "bounds": _bounds(box),
    }


def _bounds(box: dict[str, Any] | CDPError) -> list[int] | None:
    """The element's border box in its frame's CSS pixels, [left, top, width, height]
    (None: it has no box of its own)."""
    if isinstance(box, CDPError):
        return None
    left, top, right, bottom = quad_box(box["model"]["border"])
    return [round(left), round(top), round(right - left), round(bottom - top)]


def _ancestors(node: dict[str, Any], nodes: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    chain = [node]
    while (parent := nodes.get(str(chain[-1].get("parentId")))) is not None:
        if len(chain) > 256 or parent in chain:
            break
        chain.append(parent)
    return chain


def _value(prop: Any) -> str | None:
    if isinstance(prop, dict) and prop.get("value") is not None:
        return str(prop["value"])
    return None


def _role(node: dict[str, Any]) -> str | None:
    return _value(node.get("role"))


MAX_TEXT = 500


def _subtree_call(sid: str, backend: int) -> Call:
    return ("DOM.describeNode", {"backendNodeId": backend, "depth": -1, "pierce": True}, sid)


def _text(root: dict[str, Any]) -> str:
    """The text inside an element (its DOM subtree as `_subtree_call` describes it, shadow
    roots included, hidden text too: more text can only make a rule match more),
    whitespace collapsed, bounded."""
    parts: list[str] = []
    size = 0
    pending = [root]
    while pending and size < MAX_TEXT:
        node = pending.pop()
        if node.get("nodeType") == 3:  # a text node
            text = " ".join(str(node.get("nodeValue", "")).split())
            if text:
                parts.append(text)
                size += len(text) + 1
        if str(node.get("nodeName", "")).upper() in ("HEAD", "SCRIPT", "STYLE", "TEMPLATE"):
            continue
        children = list(node.get("shadowRoots") or []) + list(node.get("children") or [])
        pending += reversed(children)
    return " ".join(parts)[:MAX_TEXT]


HREF_JS = "function() { return typeof this.href === 'string' ? this.href : null; }"


def _href(reader: FrameReader, sid: str, backend: int, frame_id: str) -> str | None:
    """The link's URL as the browser resolves it (`href` read in the isolated world of the
    link's frame, where the page cannot replace the getter)."""
    tree = reader.call("Page.getFrameTree", {}, sid)
    frame = _find_frame(tree["frameTree"], frame_id) if frame_id else tree["frameTree"]["frame"]
    if frame is None:
        frame = tree["frameTree"]["frame"]
    context = reader.world(sid, frame)
    obj = reader.call(
        "DOM.resolveNode", {"backendNodeId": backend, "executionContextId": context}, sid
    )["object"]
    try:
        res = reader.call(
            "Runtime.callFunctionOn",
            {"objectId": obj["objectId"], "functionDeclaration": HREF_JS, "returnByValue": True},
            sid,
        )
    finally:
        release = {"objectId": obj["objectId"]}
        reader.call("Runtime.releaseObject", release, sid)
    value = res.get("result", {}).get("value")
    return str(value) if isinstance(value, str) else None


def _find_frame(node: dict[str, Any], frame_id: str) -> dict[str, Any] | None:
    pending = [node]
    while pending:
        current = pending.pop()
        frame = current.get("frame") or {}
        if str(frame.get("id")) == frame_id:
            return frame
        pending += current.get("childFrames") or []
    return None


# The focused element, read in the probe's isolated world (the page cannot replace
# `activeElement` there): through open shadow roots and same-origin frames to the deepest
# focus. A frame whose document cannot be reached answers itself: the caller holds it.
FOCUSED_JS = r"""
(() => {
  let el = document.activeElement;
  for (let i = 0; el && i < 64; i++) {
    const inner = el.shadowRoot && el.shadowRoot.activeElement;
    if (inner) { el = inner; continue; }
    if (el.tagName === 'IFRAME' || el.tagName === 'FRAME') {
      let doc = null;
      try { doc = el.contentDocument; } catch (e) { doc = null; }
      if (doc && doc.activeElement) { el = doc.activeElement; continue; }
    }
    break;
  }
  return el || document.body;
})()
"""

# A text field's form's default button (the first submit control in tree order, as the
# browser's implicit submission picks), or the form itself when it has none.
SUBMIT_JS = r"""function() {
  const form = this.form;
  if (!form) return null;
  for (const e of form.elements) { if (e.type === 'submit' || e.type === 'image') return e; }
  return form;
}"""


def focused(browser: Browser) -> dict[str, Any]:
    """The element a key press would act on, read like a click's target; a text field's
    `submit` is its form's submit control (or the form), None outside a form."""
    cdp = browser.live_cdp()
    sid = browser.page_session()
    main_viewport(browser, cdp, sid)  # fresh isolated world for the document now shown
    reader = FrameReader(cdp, sid, browser.frame_state, VIEWPORT_JS, lambda _c, _s: [])
    res = reader.call(
        "Runtime.evaluate",
        {"expression": FOCUSED_JS, "contextId": browser.probe_world(step_s())},
        sid,
    )
    obj = res.get("result", {})
    if "objectId" not in obj:
        return unknown("no focused element could be read")
    try:
        node = reader.call("DOM.describeNode", {"objectId": obj["objectId"]}, sid)["node"]
        if str(node.get("nodeName", "")).upper() in ("IFRAME", "FRAME"):
            return unknown("the focus is inside a frame the kiosk cannot read")
        out = _describe(reader, sid, int(node["backendNodeId"]), str(node.get("frameId") or ""))
        out["submit"] = _submit(reader, sid, obj["objectId"])
    finally:
        cdp.call("Runtime.releaseObject", {"objectId": obj["objectId"]}, session=sid)
    return out


def _submit(reader: FrameReader, sid: str, object_id: str) -> dict[str, Any] | None:
    cdp = reader.cdp
    res = reader.call(
        "Runtime.callFunctionOn", {"objectId": object_id, "functionDeclaration": SUBMIT_JS}, sid
    )
    obj = res.get("result", {})
    if "objectId" not in obj:
        return None
    try:
        node = reader.call("DOM.describeNode", {"objectId": obj["objectId"]}, sid)["node"]
        return _describe(reader, sid, int(node["backendNodeId"]), str(node.get("frameId") or ""))
    finally:
        cdp.call("Runtime.releaseObject", {"objectId": obj["objectId"]}, session=sid)
