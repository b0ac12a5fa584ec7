"""The browser rig's secret fields, found by the one probe (`sandboxes.secret_fields`,
which the kiosk agent runs too) over Playwright CDP sessions: the page's own session
(its documents, every shadow root, closed ones included, and the frames of its
renderer) and one session per out-of-process frame (a frame of another site, in a
renderer of its own). What is found is what a screenshot masks and what `extract`
withholds. A probe that cannot finish raises `ProbeError`: the caller masks the whole
image, or answers no text at all."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from playwright.async_api import BrowserContext, CDPSession, Frame, Page
from playwright.async_api import Error as PlaywrightError

from sandboxes import secret_fields as sf

SHARED_SESSION = "does not have a separate CDP session"  # Playwright: an in-renderer frame
NOT_ENABLED = "hasn't been enabled"  # Chromium: a domain disabled already
DETACH_S = 2.0  # how long dropping a kept session may wait for its detach
Box = tuple[int, int, int, int]
Up = Callable[[sf.Rect], sf.Rect | None]  # a session's rectangle in page pixels, or None


def _unmoved(rect: sf.Rect) -> sf.Rect | None:
    return rect


@dataclass
class PageSecrets:
    """Secret fields of a page: boxes in page pixels, and (when asked) their values."""

    rects: set[Box] = field(default_factory=set)
    values: list[str] = field(default_factory=list)


def _sender(session: CDPSession) -> Callable[[sf.Call], Awaitable[dict[str, Any]]]:
    async def send(call: sf.Call) -> dict[str, Any]:
        try:
            answer: dict[str, Any] = await session.send(call.method, call.params)
        except PlaywrightError as exc:
            raise sf.CallFailed((exc.message or str(exc)).splitlines()[0][:200]) from exc
        return answer

    return send


async def _read(session: CDPSession, up: Up | None, values: bool, out: PageSecrets) -> None:
    """One session's secret fields into `out`: their boxes carried into page pixels
    (unless `up` is None: values only), their values when asked."""
    send = _sender(session)
    found = await sf.run_async(sf.find_secret(None, closed_only=False), send)
    boxes = [] if up is None else await sf.run_async(sf.boxes(found), send)
    for rect in boxes:
        assert up is not None
        moved = up(rect)
        if moved is not None and moved[2] > 0 and moved[3] > 0:
            x, y, w, h = moved
            left, top = math.floor(x), math.floor(y)
            out.rects.add((left, top, math.ceil(x + w) - left + 1, math.ceil(y + h) - top + 1))
    if values:
        out.values += await sf.run_async(sf.values(found), send)


async def _carrier(parent: CDPSession, parent_up: Up, session: CDPSession) -> Up:
    """How an out-of-process frame's rectangles reach page pixels: through the content
    box of the element that shows it (in the parent session), scaled when that box is not
    the frame's size (a CSS transform) and clipped to it, then as the parent's go."""
    send = _sender(parent)
    tree = await session.send("Page.getFrameTree")
    owner = await send(sf.Call("DOM.getFrameOwner", {"frameId": tree["frameTree"]["frame"]["id"]}))
    model = await send(sf.Call("DOM.getBoxModel", {"backendNodeId": owner["backendNodeId"]}))
    box = sf.quad_box(model["model"]["content"])
    viewport = (await session.send("Page.getLayoutMetrics"))["cssLayoutViewport"]
    inner = (float(viewport["clientWidth"]), float(viewport["clientHeight"]))

    def up(rect: sf.Rect) -> sf.Rect | None:
        local = sf.carry(rect, box, inner)
        return parent_up(local) if local is not None else None

    return up


def _depth(frame: Frame) -> int:
    depth, parent = 0, frame.parent_frame
    while parent is not None:
        depth, parent = depth + 1, parent.parent_frame
    return depth


@dataclass
class PageSessions:
    """The CDP session of each page of a rig, kept from one probe to the next (opening and
    detaching one cost two round trips through the CDP channel per probe). Between probes
    a session has no domain enabled, so the page sends nothing on it; probes take turns."""

    context: BrowserContext
    open: dict[Page, CDPSession] = field(default_factory=dict)
    # One probe at a time: a probe's DOM state (node ids, the enabled domain) is the
    # session's, and the recorder's frames come while the agent's own calls run.
    probing: anyio.Lock = field(default_factory=anyio.Lock)

    async def of(self, page: Page) -> CDPSession:
        for closed in [p for p in self.open if p.is_closed()]:
            del self.open[closed]
        session = self.open.get(page)
        if session is None:
            session = self.open[page] = await self.context.new_cdp_session(page)
        return session

    async def drop(self, page: Page) -> None:
        """Forget `page`'s session after a failure: the next probe opens a new one."""
        session = self.open.pop(page, None)
        if session is not None:  # detached even when the probe was cancelled (bounded)
            with (
                anyio.CancelScope(shield=True),
                anyio.move_on_after(DETACH_S),
                contextlib.suppress(PlaywrightError),
            ):
                await session.detach()


async def _quiet(sessions: PageSessions, page: Page, session: CDPSession) -> None:
    """What a probe left on a kept session undone, both asked at once: the DOM domain
    (its node ids and events; Chromium says it "hasn't been enabled" when the page's
    document changed since) and the handles `values` made. A session that fails here is
    dropped, so the next probe opens a new one."""
    failed: list[str] = []

    async def send(method: str, params: dict[str, Any] | None = None) -> None:
        try:
            await session.send(method, params)
        except PlaywrightError as exc:
            if NOT_ENABLED not in (exc.message or str(exc)):
                failed.append(method)

    async with anyio.create_task_group() as both:
        both.start_soon(send, "DOM.disable")
        both.start_soon(send, "Runtime.releaseObjectGroup", {"objectGroup": sf.OBJECT_GROUP})
    if failed:
        await sessions.drop(page)


async def page_secrets(
    sessions: PageSessions, page: Page, *, values: bool, rects: bool = True
) -> PageSecrets:
    """Every secret field of `page`, in every frame (see the module's docstring): their
    boxes (unless `rects` is false: `extract` needs the values only, and skips the box
    models and the frames' carriers) and, with `values`, their values."""
    async with sessions.probing:
        try:
            main = await sessions.of(page)
            out = await _probe(sessions.context, page, main, values=values, rects=rects)
            await _quiet(sessions, page, main)
        except PlaywrightError as exc:
            await sessions.drop(page)
            raise sf.ProbeError((exc.message or str(exc)).splitlines()[0][:200]) from exc
        except BaseException:
            await sessions.drop(page)
            raise
    return out


async def _probe(
    context: BrowserContext, page: Page, main: CDPSession, *, values: bool, rects: bool
) -> PageSecrets:
    out = PageSecrets()
    own: dict[Frame, tuple[CDPSession, Up]] = {page.main_frame: (main, _unmoved)}
    try:
        await _read(main, _unmoved if rects else None, values, out)
        for frame in sorted(page.frames[1:], key=_depth):  # parents first
            try:
                session = await context.new_cdp_session(frame)
            except PlaywrightError as exc:
                if SHARED_SESSION in (exc.message or str(exc)):
                    continue  # in the page's renderer: its document is in a pierced tree
                raise sf.ProbeError(f"a frame could not be read: {exc.message}") from exc
            parent = frame.parent_frame
            while parent is not None and parent not in own:
                parent = parent.parent_frame
            above, above_up = own[parent or page.main_frame]
            own[frame] = (session, _unmoved)  # detached below, whatever happens next
            if not rects:
                await _read(session, None, values, out)
                continue
            own[frame] = (session, await _carrier(above, above_up, session))
            await _read(session, own[frame][1], values, out)
    except (KeyError, TypeError, ValueError) as exc:  # an answer not of the shape CDP documents
        raise sf.ProbeError(f"an unexpected CDP answer ({exc!r:.200})") from exc
    finally:
        for frame, (session, _) in own.items():
            if frame is not page.main_frame:
                with contextlib.suppress(PlaywrightError):  # its frame is gone already
                    await session.detach()
    return out
