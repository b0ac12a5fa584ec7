"""UI trees of phones, pure: Android's `uiautomator dump` XML and WebDriverAgent's
`/source` XML in, a compact accessibility tree with element refs out (SPEC S4.1
`inspect`), plus the boxes of secret fields for screenshot masking.

Secret fields: Android nodes with `password="true"`, iOS `XCUIElementTypeSecureTextField`
(and any other `XCUIElementTypeSecure*` type), and every element inside one. Their text
never appears in the tree (shown as `sandboxes.secret_fields.WITHHELD`), nor does it
where another element repeats it (a parent's merged description, a preview label): each
secret value is withheld from the whole tree, by the same rule as the browser rig's
`extract`. Their boxes are what the screenshot mask blacks out. The XML comes from the
device, so it is untrusted: a size cap, no DTD or entities, and every piece of text in
the tree is later fenced.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from sandboxes.approval_rules import TEXT_ROLES
from sandboxes.masking import Rect
from sandboxes.withhold import WITHHELD, withhold

XML_MAX_BYTES = 8 * 1024 * 1024
MAX_ELEMENTS = 2000
LABEL_MAX_CHARS = 200
_BOUNDS_RE = re.compile(r"^\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]$")
IOS_SECRET_PREFIX = "XCUIElementTypeSecure"  # SecureTextField, and any secure type to come


class UiTreeError(ValueError):
    """The UI dump could not be read (too large, not XML, a DTD)."""


@dataclass(frozen=True, slots=True)
class Element:
    ref: str
    role: str
    label: str
    ident: str
    rect: Rect
    secret: bool
    depth: int
    actionable: bool
    focused: bool = False  # Android's focused="true" (WDA's source has no focus)

    @property
    def center(self) -> tuple[int, int]:
        x, y, w, h = self.rect
        return x + w // 2, y + h // 2


@dataclass(frozen=True, slots=True)
class UiTree:
    elements: tuple[Element, ...]
    truncated: bool = False
    withheld: int = 0  # secret values taken out of other elements' labels
    focus_known: bool = False  # the dump says, for its nodes, whether each has the focus
    # Every secret field's box in the whole dump, the elements past the cut included.
    secret_rects: tuple[Rect, ...] = ()

    def by_ref(self, ref: str) -> Element | None:
        return next((e for e in self.elements if e.ref == ref), None)

    def render(self) -> str:
        lines = []
        for e in self.elements:
            label = WITHHELD if e.secret else e.label
            parts = [f"{'  ' * e.depth}- {e.role}"]
            if label:
                parts.append(label if e.secret else f'"{label}"')
            if e.ident:
                parts.append(f"id={e.ident}")
            x, y, w, h = e.rect
            parts.append(f"[ref={e.ref}] at {x},{y} {w}x{h}")
            lines.append(" ".join(parts))
        if self.truncated:
            lines.append(f"(cut at {MAX_ELEMENTS} elements)")
        return "\n".join(lines) if lines else "(no elements)"


def _root(xml: str | bytes) -> ET.Element:
    data = xml.encode() if isinstance(xml, str) else xml
    if len(data) > XML_MAX_BYTES:
        raise UiTreeError(f"the UI dump is {len(data)} bytes; at most {XML_MAX_BYTES}")
    head = data[:4096].upper()
    if b"<!DOCTYPE" in head or b"<!ENTITY" in data.upper():
        raise UiTreeError("the UI dump carries a DTD or entities; refused")
    try:
        return ET.fromstring(data)
    except ET.ParseError as exc:
        raise UiTreeError(f"the UI dump is not XML ({exc})") from None


class _Collected:
    """A walk's findings: the elements kept (at most MAX_ELEMENTS, numbered as kept), and
    over the whole tree, past that cut too, every secret value and every secret box: the
    screenshot's mask never depends on where the cut fell."""

    def __init__(self) -> None:
        self.elements: list[Element] = []
        self.secrets: list[str] = []
        self.boxes: list[Rect] = []
        self.truncated = False
        self.focus_known = False

    def keep(self, element: Element) -> None:
        if element.secret:
            self.boxes.append(element.rect)
        if len(self.elements) >= MAX_ELEMENTS:
            self.truncated = True
            return
        self.elements.append(replace(element, ref=f"e{len(self.elements) + 1}"))

    def tree(self) -> UiTree:
        """The tree with every secret value taken out of every label (labels are still
        raw here, so a value is found before a label is cut), then each label shortened."""
        out, count = [], 0
        values = [s for s in self.secrets if s.strip()]
        for e in self.elements:
            label, found = withhold(e.label, values)
            out.append(replace(e, label="" if e.secret else _short(label)))
            count += found
        boxes = tuple(self.boxes)
        return UiTree(tuple(out), self.truncated, count, self.focus_known, boxes)


Visit = Callable[[ET.Element, int, bool, _Collected], "tuple[bool, bool] | None"]


def _walk(starts: list[ET.Element], visit: Visit) -> UiTree:
    """Visit the nodes from `starts` down in document order, without recursion (a device's
    tree can nest deeper than Python's stack): `visit(node, depth, inside, found)` answers
    (kept, secret), which give its children's depth and whether they are inside a secret
    field, or None to skip its subtree."""
    found = _Collected()
    stack = [(node, 0, False) for node in reversed(starts)]
    while stack:
        node, depth, inside = stack.pop()
        seen = visit(node, depth, inside, found)
        if seen is None:
            continue
        kept, secret = seen
        below = depth + 1 if kept else depth
        stack.extend((child, below, secret) for child in reversed(node))
    return found.tree()


def _short(text: str | None) -> str:
    value = " ".join((text or "").split())
    return value[:LABEL_MAX_CHARS] + ("..." if len(value) > LABEL_MAX_CHARS else "")


def parse_android(xml: str | bytes) -> UiTree:
    """`uiautomator dump` output: <hierarchy><node bounds="[x1,y1][x2,y2]" ...>."""
    return _walk(list(_root(xml)), _android_node)


def _android_node(
    node: ET.Element, depth: int, inside: bool, found: _Collected
) -> tuple[bool, bool] | None:
    if node.tag != "node":
        return None
    attrs = node.attrib
    match = _BOUNDS_RE.match(attrs.get("bounds", ""))
    x1, y1, x2, y2 = (int(v) for v in match.groups()) if match else (0, 0, 0, 0)
    secret = inside or attrs.get("password") == "true"
    if secret and not match:
        # the device's own text is not echoed: it is untrusted, and this is a secret field
        raise UiTreeError("a secret field's box cannot be read (bounds not [x1,y1][x2,y2])")
    if secret:
        found.secrets.append(attrs.get("text", ""))
    label = (attrs.get("text") or "").strip() or (attrs.get("content-desc") or "")
    ident = _short(attrs.get("resource-id")).rpartition(":id/")[2]
    actionable = any(attrs.get(k) == "true" for k in ("clickable", "focusable", "scrollable"))
    focused = attrs.get("focused") == "true"
    found.focus_known = found.focus_known or "focused" in attrs
    keep = bool(label.strip() or ident or actionable or secret or focused)
    if keep:
        role = attrs.get("class", "node").rpartition(".")[2] or "node"
        rect = (x1, y1, max(0, x2 - x1), max(0, y2 - y1))
        found.keep(Element("", role, label, ident, rect, secret, depth, actionable, focused))
    return keep, secret


def parse_ios(xml: str | bytes) -> UiTree:
    """WebDriverAgent's `/source` (XML): elements XCUIElementType* with x/y/width/height
    in points, name/label/value attributes."""
    return _walk([_root(xml)], _ios_node)


def _ios_node(
    node: ET.Element, depth: int, inside: bool, found: _Collected
) -> tuple[bool, bool] | None:
    attrs = node.attrib
    kind = attrs.get("type", node.tag)
    secret = inside or kind.startswith(IOS_SECRET_PREFIX)
    if secret:
        found.secrets.append(attrs.get("value", ""))
    label = (attrs.get("label") or "").strip() or (attrs.get("name") or "").strip()
    if not label and not secret:
        label = attrs.get("value") or ""
    try:
        rect = tuple(int(float(attrs.get(k, "0"))) for k in ("x", "y", "width", "height"))
    except (ValueError, OverflowError):  # not a number, NaN, infinity
        if secret:
            raise UiTreeError("a secret field's box cannot be read") from None
        rect = (0, 0, 0, 0)
    visible = attrs.get("visible", "true") != "false"
    keep = visible and (bool(label.strip()) or secret) and kind.startswith("XCUIElementType")
    if keep:
        role = kind.removeprefix("XCUIElementType")
        enabled = attrs.get("enabled", "true") == "true"
        found.keep(Element("", role, label, "", rect, secret, depth, enabled))  # type: ignore[arg-type]
    return keep, secret


def scale_rects(rects: tuple[Rect, ...], factor: float) -> tuple[Rect, ...]:
    """Point boxes (iOS) as screenshot pixels, rounded outwards."""
    scaled = []
    for x, y, w, h in rects:
        left, top = int(x * factor), int(y * factor)
        right, bottom = -int(-(x + w) * factor // 1), -int(-(y + h) * factor // 1)
        scaled.append((left, top, right - left, bottom - top))
    return tuple(scaled)


# ------------------------------------------------------------------ what an input acts on
# (issue 22 item 2): the element under a tap and the focused element, in the shape the
# approval rules read (`sandboxes.approval_rules.click_hold` / `focus_hold`).


def _unread(error: str) -> dict[str, Any]:
    return {"name": None, "role": None, "text": None, "href": None, "error": error}


def _inside(e: Element, x: int, y: int) -> bool:
    ex, ey, w, h = e.rect
    return ex <= x < ex + w and ey <= y < ey + h


def _subtree(tree: UiTree, index: int) -> list[Element]:
    """The element at `index` and the ones under it (tree order, deeper until back up)."""
    top = tree.elements[index]
    out = [top]
    for e in tree.elements[index + 1 :]:
        if e.depth <= top.depth:
            break
        out.append(e)
    return out


def _described(tree: UiTree, index: int) -> dict[str, Any]:
    """One element as the rules judge it: its label (none for a secret field), its role,
    and the labels under it as its text (a clickable row that says "Delete" in a child)."""
    parts = _subtree(tree, index)
    text = " ".join(e.label for e in parts if e.label and not e.secret)[:500]
    top = parts[0]
    name = "" if top.secret else top.label
    return {"name": name, "role": top.role, "text": text, "href": None, "error": None}


def tap_target(tree: UiTree, x: int, y: int) -> dict[str, Any]:
    """What a tap at (x, y) lands on: of the elements whose box holds the point, the
    deepest that acts (clickable, focusable, enabled), else the deepest (later ones are
    drawn on top, so they win a tie); nothing at all is a tap on no element. A tree cut
    at MAX_ELEMENTS may have lost it: unread, whatever it holds at the point."""
    if tree.truncated:  # what is on top may be among the elements left out
        return _unread(f"the UI tree was cut at {MAX_ELEMENTS} elements")
    hits = [i for i, e in enumerate(tree.elements) if _inside(e, x, y)]
    if not hits:
        return {"name": "", "role": None, "text": "", "href": None, "error": None}
    acting = [i for i in hits if tree.elements[i].actionable] or hits
    best = max(acting, key=lambda i: (tree.elements[i].depth, i))
    return _described(tree, best)


def focused_target(tree: UiTree) -> dict[str, Any] | None:
    """The element a key acts on (Android's focused node); for a text field, `submit` is
    the first button after it in tree order (what its IME action most likely submits).
    None when the dump does not tell the focus; unread when a tree cut at MAX_ELEMENTS may
    have lost the focused element or that button."""
    if not tree.focus_known:
        return None
    index = next((i for i, e in enumerate(tree.elements) if e.focused), None)
    if index is None and tree.truncated:  # the focused one may be among those left out
        return _unread(f"the UI tree was cut at {MAX_ELEMENTS} elements")
    if index is None:
        return {"name": "", "role": None, "text": "", "href": None, "error": None}
    out = _described(tree, index)
    out["submit"] = None
    if tree.elements[index].role in TEXT_ROLES:
        after = range(index + 1, len(tree.elements))
        button = next((i for i in after if "Button" in tree.elements[i].role), None)
        if button is None and tree.truncated:  # it may be among the elements left out
            return _unread(f"the UI tree was cut at {MAX_ELEMENTS} elements")
        out["submit"] = _described(tree, button) if button is not None else None
    return out
