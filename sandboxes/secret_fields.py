"""Which fields on a web page are secret, and where they are: the one probe of the kiosk
agent and the browser rig (docs/kiosk-internals.md §2, docs/security.md "Secrets").

A field is secret when it is an `<input type=password>`, carries a secret autocomplete
token (`SECRET_AUTOCOMPLETE`), or the browser draws its text as discs
(`-webkit-text-security`). Fields are read from outside the page's JavaScript world,
through CDP's DOM domain (`DOM.getDocument` with `pierce`: shadow roots, closed ones
included, and the documents of the frames in the same renderer) and its CSS domain
(the computed style).

The steps are written once, free of I/O (sans-IO): each is a generator that yields the
CDP calls it needs (`Call`) and is sent their answers; a call that failed is thrown
into it as `CallFailed`. The kiosk agent drives them with its own blocking CDP client
(`run_blocking`, inside the kiosk container: this file is carried into the kiosk
image's `kiosk_agent` package by the build context, `SHARED_CONTEXT` in
`orchestrator/backends/docker/images.py`), the gateway's browser rig with a Playwright
CDP session (`run_async`). So this module imports nothing but the standard library.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

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
WITHHELD = "[secret field: value withheld]"
MAX_FIELDS = 500  # fields a page may have before the probe gives up (and all is masked)
# The live text of a field, read in an isolated world (the page's own globals unused):
# an input's or text area's value, a contenteditable's text as the DOM and layout give it.
VALUE_JS = (
    "function() { const n = this.tagName; return (n === 'INPUT' || n === 'TEXTAREA')"
    " ? [String(this.value)] : [String(this.textContent || ''), String(this.innerText || '')]; }"
)
Node = dict[str, Any]
Rect = list[float]  # x, y, width, height in the session's root-frame CSS pixels
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Call:
    """One CDP call a step needs: method and parameters."""

    method: str
    params: dict[str, Any] = field(default_factory=dict)


class ProbeError(Exception):
    """The secret fields could not be told (what a caller treats as: mask, withhold all)."""


class CallFailed(ProbeError):
    """A CDP call answered with an error (thrown into the step that made it)."""


Steps = Generator[Call, dict[str, Any], T]


@dataclass(frozen=True, slots=True)
class Field:
    """An editable element the walk found: its ids, its frame, whether it is secret."""

    node_id: int
    backend_id: int
    frame_id: str
    secret: bool  # by its attributes alone (the style may still make it secret)


@dataclass(frozen=True, slots=True)
class Found:
    """The secret fields of one CDP session, and whether its CSS domain is enabled now."""

    fields: tuple[Field, ...]
    css_ready: bool


def attributes(node: Node) -> dict[str, str]:
    flat = node.get("attributes") or []
    return {str(flat[i]).lower(): str(flat[i + 1]) for i in range(0, len(flat) - 1, 2)}


def is_field(node: Node) -> bool:
    """An element whose text a person types: an input, a text area, a contenteditable."""
    name = str(node.get("nodeName", "")).upper()
    if name in ("INPUT", "TEXTAREA"):
        return True
    editable = attributes(node).get("contenteditable")
    return editable is not None and editable.lower() != "false"


def secret_by_attributes(node: Node) -> bool:
    attrs = attributes(node)
    password = str(node.get("nodeName", "")).upper() == "INPUT" and (
        attrs.get("type", "").lower() == "password"
    )
    tokens = set(attrs.get("autocomplete", "").lower().split())
    return password or bool(SECRET_AUTOCOMPLETE & tokens)


def text_security(computed: list[dict[str, Any]]) -> bool:
    """Whether a computed style (CSS.getComputedStyleForNode) draws text as discs."""
    for prop in computed:
        if prop.get("name") == "-webkit-text-security":
            return str(prop.get("value", "none")) != "none"
    return False


def fields(root: Node, frame_id: str, closed_only: bool) -> list[Field]:
    """Every field in a pierced document (only those inside closed shadow roots when
    `closed_only`: the kiosk's in-page probe sees the rest), with its frame."""
    found: list[Field] = []
    pending: list[tuple[Node, str, bool]] = [(root, frame_id, False)]
    while pending:
        node, frame, closed = pending.pop()
        if (closed or not closed_only) and is_field(node):
            found.append(
                Field(
                    int(node["nodeId"]),
                    int(node["backendNodeId"]),
                    frame,
                    secret_by_attributes(node),
                )
            )
        inner: list[tuple[Node, str, bool]] = [
            (shadow, frame, closed or shadow.get("shadowRootType") == "closed")
            for shadow in node.get("shadowRoots") or []
        ]
        inner += [(child, frame, closed) for child in node.get("children") or []]
        if node.get("contentDocument"):
            inner.append((node["contentDocument"], str(node.get("frameId") or frame), closed))
        pending += reversed(inner)  # so the walk is in document order
    if len(found) > MAX_FIELDS:
        raise ProbeError(f"more than {MAX_FIELDS} fields on the page")
    return found


def find_secret(frame_id: str, *, closed_only: bool, css_ready: bool) -> Steps[Found]:
    """The secret fields of a session's documents: by attributes, else by computed style
    (the CSS domain is enabled the first time a style is needed)."""
    doc = yield Call("DOM.getDocument", {"depth": -1, "pierce": True})
    secret: list[Field] = []
    for found in fields(doc["root"], frame_id, closed_only):
        if not found.secret:
            if not css_ready:
                yield Call("DOM.enable")
                yield Call("CSS.enable")
                css_ready = True
            style = yield Call("CSS.getComputedStyleForNode", {"nodeId": found.node_id})
            if not text_security(style.get("computedStyle", [])):
                continue
        secret.append(found)
    return Found(tuple(secret), css_ready)


def boxes(found: tuple[Field, ...]) -> Steps[list[Rect]]:
    """Each secret field's border box, unclipped; a field not rendered has none."""
    rects: list[Rect] = []
    for one in found:
        try:
            box = yield Call("DOM.getBoxModel", {"nodeId": one.node_id})
        except CallFailed:
            continue  # not rendered (display: none): nothing on screen to mask
        left, top, right, bottom = quad_box(box["model"]["border"])
        rects.append([left, top, right - left, bottom - top])
    return rects


def values(found: tuple[Field, ...]) -> Steps[list[str]]:
    """Each secret field's live text, read in an isolated world of its own frame."""
    worlds: dict[str, int] = {}
    out: list[str] = []
    for one in found:
        if one.frame_id not in worlds:
            world = yield Call(
                "Page.createIsolatedWorld", {"frameId": one.frame_id, "worldName": "corral-secrets"}
            )
            worlds[one.frame_id] = int(world["executionContextId"])
        node = yield Call(
            "DOM.resolveNode",
            {"backendNodeId": one.backend_id, "executionContextId": worlds[one.frame_id]},
        )
        result = yield Call(
            "Runtime.callFunctionOn",
            {
                "objectId": node["object"]["objectId"],
                "functionDeclaration": VALUE_JS,
                "returnByValue": True,
            },
        )
        texts = result.get("result", {}).get("value")
        if not isinstance(texts, list):
            raise ProbeError("a secret field's value could not be read")
        out += [t for t in texts if isinstance(t, str) and t.strip()]
    return out


Quad = tuple[float, float, float, float]  # left, top, right, bottom


def quad_box(quad: list[float]) -> Quad:
    """A CDP quad (x1, y1, ... x4, y4) as left, top, right, bottom."""
    xs, ys = quad[0::2], quad[1::2]
    return min(xs), min(ys), max(xs), max(ys)


def carry(rect: Rect, box: Quad, inner: tuple[float, float]) -> Rect | None:
    """`rect`, in a frame's viewport of size `inner`, in the coordinates of the box that
    shows the frame (scaled when the box is not the frame's size), clipped to the box."""
    left, top, right, bottom = box
    width, height = inner
    if width <= 0 or height <= 0:
        return None
    sx, sy = (right - left) / width, (bottom - top) / height
    x1, y1 = max(left, left + rect[0] * sx), max(top, top + rect[1] * sy)
    x2 = min(right, left + (rect[0] + rect[2]) * sx)
    y2 = min(bottom, top + (rect[1] + rect[3]) * sy)
    if x2 <= x1 or y2 <= y1:
        return None
    return [x1, y1, x2 - x1, y2 - y1]


def withhold(text: str, secrets: list[str]) -> tuple[str, int]:
    """`text` with every secret value (as written, and as a JSON or YAML string spells it)
    replaced by `WITHHELD`; how many were replaced. Longest first, so a value inside a
    longer one cannot leave the rest of it behind."""
    spellings: set[str] = set()
    for value in secrets:
        quoted = json.dumps(value)
        spellings |= {value, quoted, quoted[1:-1], " ".join(value.split())}
    count = 0
    for spelling in sorted((s for s in spellings if s.strip()), key=len, reverse=True):
        count += text.count(spelling)
        text = text.replace(spelling, WITHHELD)
    return text, count


def _advance(
    steps: Steps[T], answer: dict[str, Any] | None, failure: CallFailed | None
) -> tuple[Call | None, T | None]:
    """The step's next call, or (None, its result) once it has returned."""
    try:
        return (steps.throw(failure) if failure else steps.send(answer)), None  # type: ignore[arg-type]
    except StopIteration as done:
        return None, done.value


def run_blocking(steps: Steps[T], send: Callable[[Call], dict[str, Any]]) -> T:
    """Drive a step with a blocking CDP client; `send` raises CallFailed on an error."""
    call, result = _advance(steps, None, None)
    while call is not None:
        try:
            answer = send(call)
        except CallFailed as exc:
            call, result = _advance(steps, None, exc)
        else:
            call, result = _advance(steps, answer, None)
    return result  # type: ignore[return-value]


async def run_async(steps: Steps[T], send: Callable[[Call], Awaitable[dict[str, Any]]]) -> T:
    """Drive a step with an asynchronous CDP client; `send` raises CallFailed on an error."""
    call, result = _advance(steps, None, None)
    while call is not None:
        try:
            answer = await send(call)
        except CallFailed as exc:
            call, result = _advance(steps, None, exc)
        else:
            call, result = _advance(steps, answer, None)
    return result  # type: ignore[return-value]
