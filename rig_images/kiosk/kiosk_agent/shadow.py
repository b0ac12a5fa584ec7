"""Secret inputs inside closed shadow roots, which no JavaScript world can reach: read
through CDP's DOM domain (the browser's view of the tree, closed roots included) and the
CSS domain (-webkit-text-security), for the probe and for every frame it reads."""

from __future__ import annotations

from typing import Any

from .cdp import CDP, CDPError
from .common import PROBE_STEP_S
from .frames import quad_box

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


def _closed_inputs(node: dict[str, Any], in_closed: bool = False) -> list[tuple[int, bool]]:
    """Inputs inside closed shadow roots (no JavaScript world can reach those), each with
    whether its attributes already make it secret."""
    found: list[tuple[int, bool]] = []
    if in_closed and str(node.get("nodeName", "")).upper() == "INPUT":
        found.append((int(node["nodeId"]), _is_secret_node(node)))
    for root in node.get("shadowRoots") or []:
        closed = in_closed or root.get("shadowRootType") == "closed"
        found += _closed_inputs(root, closed)
    for child in node.get("children") or []:
        found += _closed_inputs(child, in_closed)
    if node.get("contentDocument"):
        found += _closed_inputs(node["contentDocument"], in_closed)
    return found


_CSS_ON: set[str] = set()  # sessions whose CSS domain is enabled


def _text_security(cdp: CDP, sid: str, node_id: int) -> bool:
    """Whether the browser draws this input's text as discs (-webkit-text-security), from
    its computed style (CSS domain, enabled for the session the first time it is needed)."""
    if sid not in _CSS_ON:
        cdp.call("DOM.enable", session=sid, timeout=PROBE_STEP_S)
        cdp.call("CSS.enable", session=sid, timeout=PROBE_STEP_S)
        _CSS_ON.add(sid)
    style = cdp.call(
        "CSS.getComputedStyleForNode", {"nodeId": node_id}, session=sid, timeout=PROBE_STEP_S
    )
    for prop in style.get("computedStyle", []):
        if prop.get("name") == "-webkit-text-security":
            return str(prop.get("value", "none")) != "none"
    return False


def closed_shadow_css(cdp: CDP, sid: str) -> list[list[float]]:
    """Secret inputs inside closed shadow roots of a session's frames (its own renderer's
    frames, cross-origin ones included), from CDP's DOM domain (the browser's view of the
    tree, closed roots included), in the session's root-frame CSS pixels, unclipped."""
    doc = cdp.call(
        "DOM.getDocument", {"depth": -1, "pierce": True}, session=sid, timeout=PROBE_STEP_S
    )
    rects: list[list[float]] = []
    for node_id, secret in _closed_inputs(doc["root"]):
        if not secret and not _text_security(cdp, sid, node_id):
            continue  # (a failure to tell is an error: the whole image is masked)
        try:
            box = cdp.call(
                "DOM.getBoxModel", {"nodeId": node_id}, session=sid, timeout=PROBE_STEP_S
            )
        except CDPError:
            continue  # not rendered (display: none): nothing on screen to mask
        left, top, right, bottom = quad_box(box["model"]["border"])
        rects.append([left, top, right - left, bottom - top])
    return rects
