"""Which fields on a web page are secret, and where they are: the one probe of the kiosk
agent and the browser rig (docs/kiosk-internals.md §2, docs/security.md "Secrets").

A field is secret when it is an `<input type=password>`, carries a secret autocomplete
token (`SECRET_AUTOCOMPLETE`), or the browser draws its text as discs
(`-webkit-text-security`). Fields are read from outside the page's JavaScript world,
through CDP's DOM domain (`DOM.getDocument` with `pierce`: shadow roots, closed ones
included, and the documents of the frames in the same renderer; the computed style of
them all in one `DOM.getNodesForSubtreeByStyle`).

The steps are written once, free of I/O (sans-IO): each is a generator that yields the
CDP calls it needs (`Call`) and is sent their answers; a call that failed is thrown
into it as `CallFailed`. The kiosk agent drives them with its own blocking CDP client
(`run_blocking`, inside the kiosk container: this file is carried into the kiosk
image's `kiosk_agent` package by the build context, `SHARED_CONTEXT` in
`orchestrator/backends/docker/images.py`), the gateway's browser rig with a Playwright
CDP session (`run_async`). So this module imports nothing but the standard library, and
not `dataclasses` either: its import (with `inspect`, `ast`, `dis`) is ~1 MiB of every idle
kiosk agent (issue 23 item 7); the records below are NamedTuples and one plain class.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, NamedTuple, TypeVar

SECRET_AUTOCOMPLETE = frozenset(
    {"cc-number", "cc-csc", "cc-exp", "cc-exp-month", "cc-exp-year", "one-time-code"}
    | {"current-password", "new-password"}
)
TEXT_SECURITY = "-webkit-text-security"
DOCUMENT = {"depth": -1, "pierce": True}  # DOM.getDocument: every node, shadow roots and frames
OBJECT_GROUP = "corral-secrets"  # the handles `values` makes, for Runtime.releaseObjectGroup
SECURED = ("disc", "circle", "square")  # its values other than none
BROWSERS = "user-agent"  # the type of a shadow root the browser made
MAX_FIELDS = 500  # fields a page may have before the probe gives up (and all is masked)
# The live text of a field, read in an isolated world (the page's own globals unused):
# an input's or text area's value, a contenteditable's text as the DOM and layout give it.
# All the fields of one frame in one call: `this` is the first, the arguments are all.
VALUE_JS = (
    "function(...fields) { return fields.flatMap(f => (f.tagName === 'INPUT' ||"
    " f.tagName === 'TEXTAREA') ? [String(f.value)]"
    " : [String(f.textContent || ''), String(f.innerText || '')]); }"
)
Node = dict[str, Any]
Rect = list[float]  # x, y, width, height in the session's root-frame CSS pixels
T = TypeVar("T")


class Call(NamedTuple):
    """One CDP call a step needs: method and parameters (`{}` for none: no default, so
    no dict is shared between calls)."""

    method: str
    params: dict[str, Any]


class ProbeError(Exception):
    """The secret fields could not be told (what a caller treats as: mask, withhold all)."""


class CallFailed(ProbeError):
    """A CDP call answered with an error (thrown into the step that made it)."""


class Batch(NamedTuple):
    """Calls that do not depend on each other: a runner may have them all in flight at
    once. The step is sent one outcome per call, in order: its answer, or the
    `CallFailed` it raised (the step decides what a failure means)."""

    calls: tuple[Call, ...]


Outcome = dict[str, Any] | CallFailed
# A step yields a Call (and is sent its answer, or has CallFailed thrown in) or a Batch
# (and is sent its outcomes).
Steps = Generator[Call | Batch, Any, T]


class Field(NamedTuple):
    """An editable element the walk found: its ids, its frame, whether it is secret."""

    node_id: int
    backend_id: int
    frame_id: str
    secret: bool  # by its attributes alone (the style may still make it secret)


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
        if prop.get("name") == TEXT_SECURITY:
            return str(prop.get("value", "none")) != "none"
    return False


def fields(
    root: Node, frame_id: str, closed_only: bool, browsers: list[Node] | None = None
) -> list[Field]:
    """Every field in a pierced document (only those inside closed shadow roots when
    `closed_only`: the kiosk's in-page probe sees the rest), with its frame. The shadow
    roots the browser made itself (an input's inner editor, a video's controls: no page's
    field is in one) are not walked: they go to `browsers` when given."""
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
        shadows = node.get("shadowRoots") or []
        browsers = [] if browsers is None else browsers
        browsers += [shadow for shadow in shadows if shadow.get("shadowRootType") == BROWSERS]
        inner: list[tuple[Node, str, bool]] = [
            (shadow, frame, closed or shadow.get("shadowRootType") == "closed")
            for shadow in shadows
            if shadow.get("shadowRootType") != BROWSERS
        ]
        inner += [(child, frame, closed) for child in node.get("children") or []]
        if node.get("contentDocument"):
            inner.append((node["contentDocument"], str(node.get("frameId") or frame), closed))
        pending += reversed(inner)  # so the walk is in document order
    if len(found) > MAX_FIELDS:
        raise ProbeError(f"more than {MAX_FIELDS} fields on the page")
    return found


class Walk(NamedTuple):
    """A session's documents as one probe walked them. A caller may use it again while
    the session's DOM domain sent no event that `sandboxes.kept_walk.stales` (its node
    ids then name the same nodes, the fields and their attributes are unchanged); their
    style is asked again each time (`kept_walk.styled_again`: a pseudo-class such as
    `:placeholder-shown` or a changed style sheet may draw a field as discs without any
    DOM event)."""

    root: int
    root_backend: int  # the document's own id: another document has another
    frame_id: str
    fields: tuple[Field, ...]
    frames: int  # frames whose documents the walk holds (the root's included)
    browsers: tuple[Node, ...] = ()  # the shadow roots the browser made (not walked)


def count_frames(tree: dict[str, Any]) -> int:
    return 1 + sum(count_frames(child) for child in tree.get("childFrames") or [])


def walk(frame_id: str | None, *, closed_only: bool) -> Steps[Walk]:
    """Every field of a session's documents (see `fields`). A `frame_id` of None: the
    session's root frame, asked together with the document (and the frames it holds)."""
    # The style query needs the DOM domain enabled (the document alone does not enable it
    # in every case: a renderer swapped by a navigation starts with it off); a session
    # handles its calls in order, so the enable comes first even inside a batch.
    first = [Call("DOM.enable", {}), Call("DOM.getDocument", DOCUMENT)]
    answers = yield Batch(
        tuple(first + ([Call("Page.getFrameTree", {})] if frame_id is None else []))
    )
    doc = ok(answers[1])
    frames = 0
    if frame_id is None:
        tree = ok(answers[2])["frameTree"]
        frame_id, frames = str(tree["frame"]["id"]), count_frames(tree)
    ok(answers[0])
    root, browsers = doc["root"], list[Node]()
    found = tuple(fields(root, frame_id, closed_only, browsers))
    ids = int(root["nodeId"]), int(root["backendNodeId"])
    return Walk(*ids, frame_id, found, frames, tuple(browsers))


def styled(walked: Walk) -> Steps[tuple[Field, ...]]:
    """The walk's secret fields: by their attributes, else by their computed style, all
    asked in one call (`DOM.getNodesForSubtreeByStyle`, pierced like the walk: the nodes
    whose `-webkit-text-security` draws discs, circles or squares) instead of one
    computed style per field."""
    if all(one.secret for one in walked.fields):
        return walked.fields
    return secret_of(walked, (yield style_call(walked)))


def style_call(walked: Walk) -> Call:
    return Call(
        "DOM.getNodesForSubtreeByStyle",
        {
            "nodeId": walked.root,
            "computedStyles": [{"name": TEXT_SECURITY, "value": v} for v in SECURED],
            "pierce": True,
        },
    )


def secret_of(walked: Walk, answer: dict[str, Any]) -> tuple[Field, ...]:
    drawn = {int(node_id) for node_id in answer.get("nodeIds") or []}
    return tuple(one for one in walked.fields if one.secret or one.node_id in drawn)


def find_secret(frame_id: str | None, *, closed_only: bool) -> Steps[tuple[Field, ...]]:
    """The secret fields of a session's documents, walked afresh (`walk`, `styled`)."""
    walked = yield from walk(frame_id, closed_only=closed_only)
    return (yield from styled(walked))


def boxes(found: tuple[Field, ...]) -> Steps[list[Rect]]:
    """Each secret field's border box, unclipped; a field not rendered has none. All
    asked at once."""
    if not found:
        return []
    models = yield Batch(tuple(Call("DOM.getBoxModel", {"nodeId": f.node_id}) for f in found))
    rects: list[Rect] = []
    for model in models:
        if isinstance(model, CallFailed):
            continue  # not rendered (display: none): nothing on screen to mask
        left, top, right, bottom = quad_box(model["model"]["border"])
        rects.append([left, top, right - left, bottom - top])
    return rects


class Handles:
    """The isolated worlds and field handles `values` made, for the next `values` of the
    same walk (they live as long as their document; `OBJECT_GROUP` releases them)."""

    __slots__ = ("objects", "worlds")

    def __init__(self) -> None:
        self.worlds: dict[str, int] = {}  # frame id -> context id
        self.objects: dict[int, str] = {}  # backend node id -> object id


def values(found: tuple[Field, ...], kept: Handles | None = None) -> Steps[list[str]]:
    """Each secret field's live text, read in an isolated world of its own frame: the
    worlds and the fields' handles not in `kept` yet (made and kept there), then the
    texts, one call per frame; each step's calls asked at once."""
    if not found:
        return []
    kept = Handles() if kept is None else kept
    frames = [f for f in dict.fromkeys(one.frame_id for one in found) if f not in kept.worlds]
    made = yield Batch(
        tuple(
            Call("Page.createIsolatedWorld", {"frameId": f, "worldName": "corral-secrets"})
            for f in frames
        )
    )
    for frame, world in zip(frames, made, strict=True):
        kept.worlds[frame] = int(ok(world)["executionContextId"])
    missing = [one for one in found if one.backend_id not in kept.objects]
    nodes = yield Batch(
        tuple(
            Call(
                "DOM.resolveNode",
                {
                    "backendNodeId": one.backend_id,
                    "executionContextId": kept.worlds[one.frame_id],
                    "objectGroup": OBJECT_GROUP,
                },
            )
            for one in missing
        )
    )
    for one, node in zip(missing, nodes, strict=True):
        kept.objects[one.backend_id] = str(ok(node)["object"]["objectId"])
    handles = {
        f: [kept.objects[one.backend_id] for one in found if one.frame_id == f] for f in kept.worlds
    }
    read = yield Batch(
        tuple(
            Call(
                "Runtime.callFunctionOn",
                {
                    "objectId": objects[0],
                    "functionDeclaration": VALUE_JS,
                    "arguments": [{"objectId": o} for o in objects],
                    "returnByValue": True,
                },
            )
            for objects in handles.values()
            if objects
        )
    )
    out: list[str] = []
    for result in read:
        texts = ok(result).get("result", {}).get("value")
        if not isinstance(texts, list):
            raise ProbeError("a secret field's value could not be read")
        out += [t for t in texts if isinstance(t, str) and t.strip()]
    return out


def ok(outcome: Outcome) -> dict[str, Any]:
    """A batch call's answer; its failure fails the step."""
    if isinstance(outcome, CallFailed):
        raise outcome
    return outcome


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


def _advance(steps: Steps[T], sent: Any, failure: CallFailed | None) -> tuple[Any, T | None]:
    """The step's next Call or Batch, or (None, its result) once it has returned."""
    try:
        return (steps.throw(failure) if failure else steps.send(sent)), None
    except StopIteration as done:
        return None, done.value


def run_blocking(steps: Steps[T], send: Callable[[Call], dict[str, Any]]) -> T:
    """Drive a step with a blocking CDP client (a batch's calls one after the other);
    `send` raises CallFailed on an error."""

    def outcome(call: Call) -> Outcome:
        try:
            return send(call)
        except CallFailed as exc:
            return exc

    need, result = _advance(steps, None, None)
    while need is not None:
        if isinstance(need, Batch):
            need, result = _advance(steps, [outcome(c) for c in need.calls], None)
            continue
        answer = outcome(need)
        failure = answer if isinstance(answer, CallFailed) else None
        need, result = _advance(steps, None if failure else answer, failure)
    return result  # type: ignore[return-value]


async def run_async(steps: Steps[T], send: Callable[[Call], Awaitable[dict[str, Any]]]) -> T:
    """Drive a step with an asynchronous CDP client, a batch's calls all in flight at
    once; `send` raises CallFailed on an error (any other error ends the step)."""
    # Here, not at the top: the kiosk and desktop agents import this module and drive it
    # synchronously; asyncio (and the ssl it imports) would be ~5 MiB of each idle agent.
    import asyncio

    async def outcome(call: Call) -> Outcome:
        try:
            return await send(call)
        except CallFailed as exc:
            return exc

    need, result = _advance(steps, None, None)
    while need is not None:
        if isinstance(need, Batch):
            outcomes = await asyncio.gather(*(outcome(c) for c in need.calls))
            need, result = _advance(steps, list(outcomes), None)
            continue
        answer = await outcome(need)
        failure = answer if isinstance(answer, CallFailed) else None
        need, result = _advance(steps, None if failure else answer, failure)
    return result  # type: ignore[return-value]
