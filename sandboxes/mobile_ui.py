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
from dataclasses import dataclass, replace

from sandboxes.masking import Rect
from sandboxes.secret_fields import WITHHELD, withhold

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

    @property
    def center(self) -> tuple[int, int]:
        x, y, w, h = self.rect
        return x + w // 2, y + h // 2


@dataclass(frozen=True, slots=True)
class UiTree:
    elements: tuple[Element, ...]
    truncated: bool = False
    withheld: int = 0  # secret values taken out of other elements' labels

    def by_ref(self, ref: str) -> Element | None:
        return next((e for e in self.elements if e.ref == ref), None)

    @property
    def secret_rects(self) -> tuple[Rect, ...]:
        return tuple(e.rect for e in self.elements if e.secret)

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


def _withheld(elements: list[Element], secrets: list[str], truncated: bool) -> UiTree:
    """The tree with every secret value taken out of every label (labels are still raw
    here, so a value is found before a label is cut), then each label shortened."""
    out, count = [], 0
    for e in elements:
        label, found = withhold(e.label, [s for s in secrets if s.strip()])
        out.append(replace(e, label="" if e.secret else _short(label)))
        count += found
    return UiTree(tuple(out), truncated, count)


def _short(text: str | None) -> str:
    value = " ".join((text or "").split())
    return value[:LABEL_MAX_CHARS] + ("..." if len(value) > LABEL_MAX_CHARS else "")


def parse_android(xml: str | bytes) -> UiTree:
    """`uiautomator dump` output: <hierarchy><node bounds="[x1,y1][x2,y2]" ...>."""
    root = _root(xml)
    out: list[Element] = []
    secrets: list[str] = []
    truncated = False

    def walk(node: ET.Element, depth: int, inside: bool) -> None:
        nonlocal truncated
        for child in node:
            if child.tag != "node":
                continue
            if len(out) >= MAX_ELEMENTS:
                truncated = True
                return
            attrs = child.attrib
            match = _BOUNDS_RE.match(attrs.get("bounds", ""))
            x1, y1, x2, y2 = (int(v) for v in match.groups()) if match else (0, 0, 0, 0)
            secret = inside or attrs.get("password") == "true"
            if secret:
                secrets.append(attrs.get("text", ""))
            label = (attrs.get("text") or "").strip() or (attrs.get("content-desc") or "")
            ident = _short(attrs.get("resource-id")).rpartition(":id/")[2]
            actionable = any(
                attrs.get(k) == "true" for k in ("clickable", "focusable", "scrollable")
            )
            keep = bool(label.strip() or ident or actionable or secret)
            role = attrs.get("class", "node").rpartition(".")[2] or "node"
            if keep:
                out.append(
                    Element(
                        ref=f"e{len(out) + 1}",
                        role=role,
                        label=label,
                        ident=ident,
                        rect=(x1, y1, max(0, x2 - x1), max(0, y2 - y1)),
                        secret=secret,
                        depth=depth,
                        actionable=actionable,
                    )
                )
            walk(child, depth + 1 if keep else depth, secret)

    walk(root, 0, False)
    return _withheld(out, secrets, truncated)


def parse_ios(xml: str | bytes) -> UiTree:
    """WebDriverAgent's `/source` (XML): elements XCUIElementType* with x/y/width/height
    in points, name/label/value attributes."""
    root = _root(xml)
    out: list[Element] = []
    secrets: list[str] = []
    truncated = False

    def visit(node: ET.Element, depth: int, inside: bool) -> None:
        nonlocal truncated
        if len(out) >= MAX_ELEMENTS:
            truncated = True
            return
        attrs = node.attrib
        kind = attrs.get("type", node.tag)
        secret = inside or kind.startswith(IOS_SECRET_PREFIX)
        if secret:
            secrets.append(attrs.get("value", ""))
        label = (attrs.get("label") or "").strip() or (attrs.get("name") or "").strip()
        if not label and not secret:
            label = attrs.get("value") or ""
        try:
            rect = tuple(int(float(attrs.get(k, "0"))) for k in ("x", "y", "width", "height"))
        except ValueError:
            rect = (0, 0, 0, 0)
        visible = attrs.get("visible", "true") != "false"
        keep = visible and (bool(label.strip()) or secret) and kind.startswith("XCUIElementType")
        if keep:
            out.append(
                Element(
                    ref=f"e{len(out) + 1}",
                    role=kind.removeprefix("XCUIElementType"),
                    label=label,
                    ident="",
                    rect=rect,  # type: ignore[arg-type]
                    secret=secret,
                    depth=depth,
                    actionable=attrs.get("enabled", "true") == "true",
                )
            )
        for child in node:
            visit(child, depth + 1 if keep else depth, secret)

    visit(root, 0, False)
    return _withheld(out, secrets, truncated)


def scale_rects(rects: tuple[Rect, ...], factor: float) -> tuple[Rect, ...]:
    """Point boxes (iOS) as screenshot pixels, rounded outwards."""
    scaled = []
    for x, y, w, h in rects:
        left, top = int(x * factor), int(y * factor)
        right, bottom = -int(-(x + w) * factor // 1), -int(-(y + h) * factor // 1)
        scaled.append((left, top, right - left, bottom - top))
    return tuple(scaled)
