"""Secret fields in frames the page's own probe cannot enter: cross-origin frames in the
page's renderer and out-of-process iframes (site isolation puts each cross-site frame in a
renderer of its own, reached over CDP as a target of type "iframe").

Each such frame is read the same way as the main frame, from outside the page: the probe
script runs in an isolated world created in that frame (the frame's own scripts cannot
touch it), and closed shadow roots come from CDP's DOM domain. A frame's rectangles are in
its own viewport; they are carried up to the main frame through the box of the element
that owns the frame (`DOM.getFrameOwner` + `DOM.getBoxModel`), which also scales them
when the frame sits under a CSS transform. Whatever cannot be read is an error, and an
error masks the whole image."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sandboxes.secret_fields import Quad, carry, quad_box

from .cdp import CDP, CDPError
from .common import OpError, step_s
from .probe_js import track_secrets

PARENT_PENDING = "its parent frame is not read yet"
Rect = list[float]  # x, y, width, height in CSS pixels


class FrameState:
    """What the agent keeps between probes: sessions of out-of-process frames by target
    id, and isolated worlds by (session, frame, loader) (a world lives until its document
    goes, so one is made per document, not per probe). Plain classes here, not
    dataclasses: `dataclasses` would cost every idle kiosk ~1 MiB (sandboxes.secret_fields)."""

    __slots__ = ("sessions", "worlds")

    def __init__(self) -> None:
        self.sessions: dict[str, str] = {}
        self.worlds: dict[tuple[str, str, str], int] = {}

    def clear(self) -> None:
        self.sessions.clear()
        self.worlds.clear()


class Reading:
    """What the frames gave: rectangles in main-frame CSS pixels, and what went wrong."""

    __slots__ = ("errors", "frames_read", "rects")

    def __init__(self) -> None:
        self.rects: list[Rect] = []
        self.errors: list[str] = []
        self.frames_read = 0  # frames probed here (the main probe counts what it could not enter)


def _walk(tree: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Every (frame, parent frame) in a `Page.getFrameTree` answer, parents first."""
    out: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    pending: list[tuple[dict[str, Any], dict[str, Any] | None]] = [(tree["frameTree"], None)]
    while pending:
        node, parent = pending.pop(0)
        frame = node.get("frame") or {}
        out.append((frame, parent))
        pending += [(child, frame) for child in node.get("childFrames") or []]
    return out


def _origin(frame: dict[str, Any]) -> str | None:
    """The frame's origin, None when it is opaque (a data: URL, a sandboxed frame): an
    opaque origin is equal to no other, even when CDP spells two of them the same."""
    origin = str(frame.get("securityOrigin") or "")
    return origin if "://" in origin and not origin.startswith("://") else None


def unreachable_frames(tree: dict[str, Any], skip: set[str]) -> list[dict[str, Any]]:
    """The frames of this tree that a script in its root frame cannot enter: those whose
    origin, or an ancestor's, differs from the root's or is opaque (the root's own script
    recurses into the rest). Frames in `skip` (out-of-process ones, read in their own
    session) and their descendants are left out."""
    walked = _walk(tree)
    root_origin = _origin(walked[0][0])
    foreign: dict[str, bool] = {}
    out: list[dict[str, Any]] = []
    for frame, parent in walked[1:]:
        fid = str(frame.get("id"))
        parent_id = str(parent.get("id")) if parent else ""
        if fid in skip or parent_id in skip:
            skip = skip | {fid}
            continue
        origin = _origin(frame)
        foreign[fid] = foreign.get(parent_id, False) or origin is None or origin != root_origin
        if foreign[fid]:
            out.append(frame)
    return out


class FrameReader:
    """Reads every frame the main probe could not enter, for one probe."""

    def __init__(
        self,
        cdp: CDP,
        main_session: str,
        state: FrameState,
        script: str,
        closed_rects: Callable[[CDP, str], list[Rect]],
    ) -> None:
        self.cdp = cdp
        self.main = main_session
        self.state = state
        self.script = script
        self.closed_rects = closed_rects
        self.reading = Reading()
        self._to_main: dict[str, Callable[[Rect], Rect | None]] = {}

    def call(self, method: str, params: dict[str, Any], session: str) -> dict[str, Any]:
        return self.cdp.call(method, params, session=session, timeout=step_s())

    # ------------------------------------------------------------------ sessions

    def attach(self, target_id: str) -> str:
        """The session of an out-of-process frame (attached once, again if it went)."""
        sid = self.state.sessions.get(target_id)
        if sid and sid not in self.cdp.detached_sessions:
            return sid
        answer = self.cdp.call(
            "Target.attachToTarget",
            {"targetId": target_id, "flatten": True},
            timeout=step_s(),
        )
        sid = str(answer["sessionId"])
        track_secrets(self.cdp, sid)
        self.state.sessions[target_id] = sid
        return sid

    def owner_box(self, frame_id: str, sessions: list[str]) -> tuple[str, Quad]:
        """The session holding the element that shows `frame_id`, and that element's
        content box in the session's root-frame coordinates."""
        for sid in sessions:
            try:
                owner = self.call("DOM.getFrameOwner", {"frameId": frame_id}, sid)
                box = self.call("DOM.getBoxModel", {"backendNodeId": owner["backendNodeId"]}, sid)
            except CDPError:
                continue
            return sid, quad_box(box["model"]["content"])
        raise OpError(f"no owner element found for frame {frame_id[:8]}")

    def world(self, sid: str, frame: dict[str, Any]) -> int:
        key = (sid, str(frame["id"]), str(frame.get("loaderId", "")))
        context = self.state.worlds.get(key)
        if context is None:
            if len(self.state.worlds) > 512:  # old documents' worlds: gone with them
                self.state.worlds.clear()
            made = self.call(
                "Page.createIsolatedWorld",
                {"frameId": frame["id"], "worldName": "corral-probe"},
                sid,
            )
            context = int(made["executionContextId"])
            self.state.worlds[key] = context
        return context

    def evaluate(self, sid: str, frame: dict[str, Any]) -> dict[str, Any]:
        """The probe script's answer for one frame, in that frame's isolated world."""
        for attempt in (0, 1):
            try:
                res = self.call(
                    "Runtime.evaluate",
                    {
                        "expression": self.script,
                        "returnByValue": True,
                        "timeout": 1000,
                        "contextId": self.world(sid, frame),
                    },
                    sid,
                )
                break
            except CDPError:
                if attempt:
                    raise
                self.state.worlds.pop((sid, str(frame["id"]), str(frame.get("loaderId", ""))))
        if "exceptionDetails" in res:
            raise OpError(res["exceptionDetails"].get("text", "exception"))
        value: dict[str, Any] = res.get("result", {}).get("value") or {}
        return value

    # ------------------------------------------------------------------ frames

    def read_frame(
        self, sid: str, frame: dict[str, Any], root: bool
    ) -> tuple[tuple[float, float], list[Rect]]:
        """Probe one frame: its viewport size, and its secret fields in the coordinates of
        its session's root frame (through the frame's owner box, unless it is the root)."""
        value = self.evaluate(sid, frame)
        inner = (float(value.get("vw") or 0), float(value.get("vh") or 0))
        self.reading.frames_read += 1
        rects = [[float(v) for v in raw] for raw in value.get("rects", [])]
        if root:
            return inner, rects
        _, box = self.owner_box(str(frame["id"]), [sid])
        return inner, [c for c in (carry(r, box, inner) for r in rects) if c is not None]

    def add(self, rects: list[Rect], up: Callable[[Rect], Rect | None]) -> None:
        for rect in rects:
            mapped = up(rect)
            if mapped is not None:
                self.reading.rects.append(mapped)

    def read_session(
        self,
        sid: str,
        skip: set[str],
        up: Callable[[Rect], Rect | None],
        tree: dict[str, Any] | None = None,
    ) -> None:
        """Every frame of a session that a script in the session's root cannot enter
        (`tree`: the session's frame tree, when the caller has just read it)."""
        if tree is None:
            tree = self.call("Page.getFrameTree", {}, sid)
        for frame in unreachable_frames(tree, skip):
            try:
                self.add(self.read_frame(sid, frame, root=False)[1], up)
            except Exception as exc:
                self.reading.errors.append(f"frame {str(frame.get('url', '?'))[:80]}: {exc}")

    def read_out_of_process(self, target: dict[str, Any], all_sids: list[str]) -> None:
        """One out-of-process frame: its root frame, its unreachable frames and its closed
        shadow roots, carried into main-frame coordinates through its owner element."""
        tid = str(target["targetId"])
        sid = self.attach(tid)
        parent_sid, box = self.owner_box(tid, [self.main] + [s for s in all_sids if s != sid])
        parent_up = self.up_for(parent_sid)
        tree = self.call("Page.getFrameTree", {}, sid)
        inner, rects = self.read_frame(sid, tree["frameTree"]["frame"], root=True)

        def up(r: Rect) -> Rect | None:
            local = carry(r, box, inner)
            return parent_up(local) if local is not None else None

        self._to_main[sid] = up
        self.add(rects, up)
        self.read_session(sid, set(), up, tree)
        self.add(self.closed_rects(self.cdp, sid), up)

    def up_for(self, sid: str) -> Callable[[Rect], Rect | None]:
        if sid == self.main:
            return lambda r: r
        up = self._to_main.get(sid)
        if up is None:  # its parent frame is not read yet (the caller retries it later)
            raise OpError(PARENT_PENDING)
        return up

    def read(self, iframe_targets: list[dict[str, Any]], tree: dict[str, Any] | None) -> Reading:
        """Everything the main probe could not enter (`tree`: the main frame tree, when the
        caller has it)."""
        oop = {str(t["targetId"]) for t in iframe_targets}
        try:
            self.read_session(self.main, oop, lambda r: r, tree)
        except Exception as exc:
            self.reading.errors.append(f"frames: {exc}")
        try:
            sids = [self.attach(t) for t in sorted(oop)]
        except Exception as exc:
            self.reading.errors.append(f"an out-of-process frame cannot be attached: {exc}")
            return self.reading
        done: set[str] = set()
        for _ in range(len(iframe_targets)):  # parents before children, whatever the order
            progressed = False
            for target in iframe_targets:
                tid = str(target["targetId"])
                if tid in done:
                    continue
                try:
                    self.read_out_of_process(target, sids)
                except OpError as exc:
                    if str(exc) == PARENT_PENDING:
                        continue
                    self.reading.errors.append(f"frame {str(target.get('url'))[:80]}: {exc}")
                except Exception as exc:
                    self.reading.errors.append(f"frame {str(target.get('url'))[:80]}: {exc}")
                done.add(tid)
                progressed = True
            if not progressed:
                break
        left = [t for t in iframe_targets if str(t["targetId"]) not in done]
        if left:
            self.reading.errors.append(f"{len(left)} out-of-process frame(s) not readable")
        return self.reading
