"""corral's own accessibility snapshot of a browser rig's page (`extract a11y`), and what
its refs point at.

The snapshot is taken by `aria_snapshot.js` in an isolated world of the gateway's own in
each frame (`Page.createIsolatedWorld` on the sessions of `browser/direct.py`): the page's
scripts cannot see that code, its refs or its state, nor replace the DOM functions it
calls. One call covers a frame's document, its open shadow roots and every frame in the
same renderer; a frame of another renderer (another site's) is taken on its own session
and spliced in where its iframe is, its refs prefixed `f1`, `f2`, ... Refs stay the same
for an element across snapshots of one document; a new document has new ones.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio

from orchestrator.errors import CdpCallFailed, RefGone, RigError
from orchestrator.surfaces.browser.direct import DirectSession
from orchestrator.surfaces.browser.secrets import Up, carrier, unmoved

T = TypeVar("T")
SOURCE = Path(__file__).with_name("aria_snapshot.js").read_text(encoding="utf-8")
ACTIONS = Path(__file__).with_name("aria_actions.js").read_text(encoding="utf-8")
READ_S = 3.0  # how long the approval rules' read of a target may wait
RETRY_S = (0.0, 0.02, 0.05, 0.1, 0.1, 0.5)  # between asks while a target is not actionable
WORLD = "corral-aria"
MAX_NODES = 20_000  # elements with a role or a pointer cursor, per frame
NO_CONTEXT = "Cannot find context"  # Chromium: the world's document is gone
FRAME_MARK = "- \0frame "  # a text of the page cannot hold it: JSON quoting escapes \0
MAX_FRAME_DEPTH = 16
MOVED = "the frame of this ref is no longer where the snapshot found it"


@dataclass
class Worlds:
    """Our isolated world in each session's frame: its execution context, made on first
    use and again once its document is gone."""

    frame_of: dict[str, str] = field(default_factory=dict)  # session id -> its frame id
    context_of: dict[str, int] = field(default_factory=dict)  # session id -> context id
    # another renderer's frame: its session's ref prefix (kept, so its refs stay the
    # same), the session of each prefix, and the session its iframe element is in
    prefix_of: dict[str, str] = field(default_factory=dict)
    framed: dict[str, DirectSession] = field(default_factory=dict)
    parent_of: dict[str, DirectSession] = field(default_factory=dict)
    owner_of: dict[str, str] = field(default_factory=dict)  # its iframe's ref in the parent

    def prefix(self, session: DirectSession) -> str:
        if session.id not in self.prefix_of:
            self.prefix_of[session.id] = f"f{len(self.prefix_of) + 1}"
        prefix = self.prefix_of[session.id]
        self.framed[prefix] = session
        return prefix

    async def evaluate(
        self, session: DirectSession, expression: str, *, awaited: bool = False
    ) -> Any:
        """`expression`'s value (JSON) in our world of `session`'s frame (awaited, when
        it is a promise and `awaited`)."""
        for attempt in (1, 2):
            context = await self.context(session)
            try:
                result = await session.send(
                    "Runtime.evaluate",
                    {
                        "expression": expression,
                        "contextId": context,
                        "returnByValue": True,
                        "awaitPromise": awaited,
                    },
                )
            except CdpCallFailed as exc:
                if NO_CONTEXT in str(exc) and attempt == 1:
                    self.context_of.pop(session.id, None)
                    continue
                raise
            if "exceptionDetails" in result:
                details = result["exceptionDetails"]
                text = details.get("exception", {}).get("description") or details.get("text", "")
                raise RigError(f"the page could not be read: {str(text).splitlines()[0][:200]}")
            return result.get("result", {}).get("value")
        raise RigError("the page could not be read: its document changed twice")

    async def context(self, session: DirectSession) -> int:
        context = self.context_of.get(session.id)
        if context is not None:
            return context
        made = await session.send(
            "Page.createIsolatedWorld",
            {"frameId": await self.frame(session), "worldName": WORLD, "grantUniveralAccess": True},
        )
        context = self.context_of[session.id] = int(made["executionContextId"])
        return context

    async def frame(self, session: DirectSession) -> str:
        """The id of `session`'s frame (its target's main frame), asked once."""
        frame = self.frame_of.get(session.id)
        if frame is None:
            tree = await session.send("Page.getFrameTree")
            frame = self.frame_of[session.id] = str(tree["frameTree"]["frame"]["id"])
        return frame


@dataclass(frozen=True)
class FramePart:
    """One session's part of a snapshot: its text, and the refs of the iframes in it whose
    documents are in another renderer (left for their own sessions)."""

    text: str
    frames: tuple[str, ...]


async def frame_part(worlds: Worlds, session: DirectSession, prefix: str) -> FramePart:
    options = json.dumps({"prefix": prefix, "maxNodes": MAX_NODES})
    value = await worlds.evaluate(session, f"({SOURCE})({options})")
    if not isinstance(value, dict) or not isinstance(value.get("text"), str):
        raise RigError("the page could not be read: an unexpected snapshot")
    frames = value.get("frames") or []
    return FramePart(value["text"], tuple(str(f) for f in frames))


def splice(text: str, parts: dict[str, str], depth: int = 0) -> str:
    """`text` with each other-renderer frame's placeholder line replaced by that frame's
    snapshot (indented as the placeholder was; its own placeholders spliced too), or by
    a note that it could not be read."""
    out: list[str] = []
    for line in text.split("\n"):
        at = line.find(FRAME_MARK)
        if at < 0 or line[:at].strip():
            out.append(line)
            continue
        ref, indent = line[at + len(FRAME_MARK) :], line[:at]
        inner = parts.get(ref)
        if inner is None or depth > MAX_FRAME_DEPTH:
            out.append(f'{indent}- text: "(this frame could not be read)"')
            continue
        out.extend(indent + piece for piece in splice(inner, parts, depth + 1).split("\n") if piece)
    return "\n".join(out)


async def element_object(worlds: Worlds, session: DirectSession, ref: str) -> str | None:
    """A remote object of the element `ref` names in our world of `session` (None when the
    ref is not of this document)."""
    context = await worlds.context(session)
    result = await session.send(
        "Runtime.evaluate",
        {
            "expression": f"globalThis.__corralAria?.byRef.get({json.dumps(_local(ref))}) ?? null",
            "contextId": context,
        },
    )
    object_id = result.get("result", {}).get("objectId")
    return str(object_id) if object_id else None


async def snapshot(worlds: Worlds, main: DirectSession, others: list[DirectSession]) -> str:
    """The page's snapshot: `main`'s frames, then each other-renderer frame's from the one
    of `others` (the page's out-of-process frame sessions) that shows it, spliced in."""
    part = await frame_part(worlds, main, "")
    if not part.frames:
        return part.text
    by_frame: dict[str, DirectSession] = {}
    for other in others:
        by_frame[await worlds.frame(other)] = other
    parts: dict[str, str] = {}
    pending = [(main, part)]
    while pending:
        session, taken = pending.pop()
        for ref in taken.frames:
            shown = by_frame.get(await _frame_shown(worlds, session, ref))
            if shown is None:  # not (yet) a frame of its own: said so where it is
                continue
            worlds.parent_of[shown.id], worlds.owner_of[shown.id] = session, ref
            inner = await frame_part(worlds, shown, worlds.prefix(shown))
            parts[ref] = inner.text
            pending.append((shown, inner))
    return splice(part.text, parts)


async def _frame_shown(worlds: Worlds, session: DirectSession, ref: str) -> str:
    """The frame id of the document `ref`'s iframe element shows ("" when unknown)."""
    object_id = await element_object(worlds, session, ref)
    if object_id is None:
        return ""
    try:
        node = (await session.send("DOM.describeNode", {"objectId": object_id}))["node"]
    finally:
        await session.send("Runtime.releaseObject", {"objectId": object_id})
    return str(node.get("frameId", ""))


async def _until_ready(ask: Callable[[], Awaitable[T | str]], ref: str, deadline_s: float) -> T:
    """`ask()` again while it answers why not yet (a str), at the RETRY_S pace, until
    `deadline_s`; then the last reason, as an error."""
    waited = "it did not answer"
    with anyio.move_on_after(deadline_s):
        for attempt in itertools.count():
            answer = await ask()
            if not isinstance(answer, str):
                return answer
            waited = answer
            await anyio.sleep(RETRY_S[min(attempt, len(RETRY_S) - 1)])
    raise RigError(f"ref {ref}: {waited} (waited {deadline_s:.0f} s)")


async def on_ref(
    worlds: Worlds, session: DirectSession, request: dict[str, Any], deadline_s: float
) -> dict[str, Any]:
    """One op of `aria_actions.js` on the element of `request["ref"]`, asked again while
    the element is not actionable (`wait`), until `deadline_s`."""
    ref = str(request["ref"])
    expression = f"({ACTIONS})({json.dumps({**request, 'ref': _local(ref)})})"

    async def ask() -> dict[str, Any] | str:
        answer = await worlds.evaluate(session, expression, awaited=True)
        if not isinstance(answer, dict):
            raise RigError("the page could not be read: an unexpected answer")
        if answer.get("error") == "gone":
            raise RefGone(ref)
        return str(answer["wait"]) if "wait" in answer else answer

    return await _until_ready(ask, ref, deadline_s)


async def click(
    worlds: Worlds, main: DirectSession, ref: str, *, double: bool, deadline_s: float
) -> None:
    """A left click (or double) at the centre of `ref`'s element once it is visible,
    enabled, still and the one a click there reaches, in its frame and in every frame
    above (`_aimed`); sent to the page (`main`) at that point in the page's pixels."""
    x, y = await _until_ready(lambda: _aimed(worlds, main, ref, deadline_s), ref, deadline_s)
    await _press(main, x, y, double=double)


async def _aimed(
    worlds: Worlds, main: DirectSession, ref: str, deadline_s: float
) -> tuple[float, float] | str:
    """The page point a click on `ref` goes to, or why not yet: the point in its frame's
    renderer, then carried up one renderer at a time, where the iframe showing the one
    below must be what a click there reaches (not a page's element laid over it)."""
    session = session_of(worlds, main, ref)
    point = await on_ref(worlds, session, {"op": "point", "ref": ref, "enabled": True}, deadline_s)
    x, y = float(point["x"]), float(point["y"])
    while session is not main:
        parent, owner = worlds.parent_of.get(session.id), worlds.owner_of.get(session.id)
        if parent is None or owner is None:
            raise RigError(MOVED)
        carried = (await carrier(parent, unmoved, session))([x - 0.5, y - 0.5, 1.0, 1.0])
        if carried is None:
            return "it is outside the part of its frame the page shows"
        x, y = carried[0] + carried[2] / 2, carried[1] + carried[3] / 2
        hit = await on_ref(worlds, parent, {"op": "hit", "ref": owner, "x": x, "y": y}, 3.0)
        if not hit.get("hits"):
            return "another element would receive the click"
        session = parent
    return x, y


async def _press(main: DirectSession, x: float, y: float, *, double: bool) -> None:
    await main.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
    for count in (1, 2) if double else (1,):
        for kind in ("mousePressed", "mouseReleased"):
            await main.send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": x, "y": y, "button": "left", "clickCount": count},
            )


async def fill(
    worlds: Worlds, main: DirectSession, ref: str, text: str, *, deadline_s: float
) -> None:
    """`ref`'s field focused, its content selected and replaced by `text` (typed in as
    one insertion, as Playwright's fill does; a date, colour or range set outright)."""
    session = session_of(worlds, main, ref)
    done = await on_ref(worlds, session, {"op": "fill", "ref": ref, "text": text}, deadline_s)
    if "error" in done:
        raise RigError(f"fill: ref {ref}: {done['error']}")
    if not done.get("type"):
        return
    if text:
        await session.send("Input.insertText", {"text": text})
        return
    for kind in ("rawKeyDown", "keyUp"):
        await session.send(
            "Input.dispatchKeyEvent",
            {"type": kind, "key": "Delete", "code": "Delete", "windowsVirtualKeyCode": 46},
        )


async def select(
    worlds: Worlds, main: DirectSession, ref: str, option: str, *, deadline_s: float
) -> int:
    """The option of `ref`'s select whose label is `option` chosen (input and change
    sent, as a person's choice sends them); how many were chosen."""
    session = session_of(worlds, main, ref)
    done = await on_ref(worlds, session, {"op": "select", "ref": ref, "option": option}, deadline_s)
    if "error" in done:
        raise RigError(f"select: ref {ref}: {done['error']}")
    return int(done.get("chosen", 0))


async def read(worlds: Worlds, main: DirectSession, ref: str) -> dict[str, Any]:
    """What the approval rules read of `ref`'s element now (aria_actions.js, op read),
    its bounds carried into the page's pixels."""
    session = session_of(worlds, main, ref)
    got = await on_ref(worlds, session, {"op": "read", "ref": ref}, READ_S)
    bounds = got.get("bounds")
    if isinstance(bounds, list) and len(bounds) == 4:
        carried = (await _up(worlds, main, session, 0))([float(b) for b in bounds])
        got["bounds"] = None if carried is None else [round(v) for v in carried]
    return got


def prefix_of(ref: str) -> str:
    """`f2` of `f2e14`; "" for a ref of the page's own renderer."""
    return ref[: ref.index("e")] if ref.startswith("f") and "e" in ref else ""


def _local(ref: str) -> str:
    """`e14` of `f2e14`: the ref as its frame's world keeps it (no prefix there)."""
    return ref[len(prefix_of(ref)) :]


def session_of(worlds: Worlds, main: DirectSession, ref: str) -> DirectSession:
    """The session whose world holds `ref` (the page's, or its frame's of another site)."""
    prefix = prefix_of(ref)
    if not prefix:
        return main
    session = worlds.framed.get(prefix)
    if session is None:
        raise RefGone(ref)
    return session


async def _up(worlds: Worlds, main: DirectSession, session: DirectSession, depth: int) -> Up:
    """How `session`'s renderer's points reach the page's (through the box of each iframe
    element on the way: `secrets.carrier`)."""
    if session is main:
        return unmoved
    parent = worlds.parent_of.get(session.id)
    if parent is None or depth > MAX_FRAME_DEPTH:
        raise RigError(MOVED)
    return await carrier(parent, await _up(worlds, main, parent, depth + 1), session)
