"""The browser rig's secret fields, found by the one probe (`sandboxes.secret_fields`,
which the kiosk agent runs too) over CDP sessions of the gateway's own
(`browser/direct.py`): the page's own session (its documents, every shadow root, closed
ones included, and the frames of its renderer) and one session per out-of-process frame
(a frame of another site, in a renderer of its own). What is found is what a screenshot
masks and what `extract` withholds. A probe that cannot finish raises `ProbeError`: the
caller masks the whole image, or answers no text at all."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Frame, Page

from orchestrator.errors import CdpCallFailed
from orchestrator.surfaces.browser.direct import DirectSession, DirectSessions
from orchestrator.surfaces.browser.kept import Found, KeptSession, sender
from sandboxes import secret_fields as sf

SHARED_SESSION = "does not have a separate CDP session"  # Playwright: an in-renderer frame
Box = tuple[int, int, int, int]
Up = Callable[[sf.Rect], sf.Rect | None]  # a session's rectangle in page pixels, or None


def unmoved(rect: sf.Rect) -> sf.Rect | None:
    return rect


@dataclass
class PageSecrets:
    """Secret fields of a page: boxes in page pixels, and (when asked) their values."""

    rects: set[Box] = field(default_factory=set)
    values: list[str] = field(default_factory=list)

    def add(self, other: PageSecrets) -> None:
        self.rects |= other.rects
        self.values += other.values


async def _read(kept: KeptSession, up: Up | None, values: bool) -> tuple[Found, PageSecrets]:
    """One session's secret fields: their boxes carried into page pixels (unless `up` is
    None: values only), their values when asked; and how many frames it holds."""
    send = sender(kept.session)

    async def use(found: tuple[sf.Field, ...]) -> PageSecrets:
        part = PageSecrets()
        for rect in [] if up is None else await sf.run_async(sf.boxes(found), send):
            assert up is not None
            moved = up(rect)
            if moved is not None and moved[2] > 0 and moved[3] > 0:
                x, y, w, h = moved
                left, top = math.floor(x), math.floor(y)
                part.rects.add((left, top, math.ceil(x + w) - left + 1, math.ceil(y + h) - top + 1))
        if values:
            part.values = await sf.run_async(sf.values(found, kept.handles), send)
        return part

    return await kept.read(use)


async def carrier(parent: DirectSession, parent_up: Up, session: DirectSession) -> Up:
    """How an out-of-process frame's rectangles reach page pixels: through the content
    box of the element that shows it (in the parent session), scaled when that box is not
    the frame's size (a CSS transform) and clipped to it, then as the parent's go."""
    send = sender(parent)
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
    """The CDP sessions of each page of a rig, kept from one probe to the next (opening and
    detaching one cost two round trips through the CDP channel per probe): the page's own
    and one per out-of-process frame. Probes take turns."""

    direct: DirectSessions
    open: dict[Page, KeptSession] = field(default_factory=dict)
    frames: dict[Page, dict[Frame, KeptSession]] = field(default_factory=dict)
    # One probe at a time: a probe's DOM state (node ids, the enabled domain) is the
    # session's, and the recorder's frames come while the agent's own calls run.
    probing: anyio.Lock = field(default_factory=anyio.Lock)

    async def of(self, page: Page) -> DirectSession:
        return (await self.kept(page)).session

    async def kept(self, page: Page) -> KeptSession:
        for closed in [p for p in self.open if p.is_closed()]:
            del self.open[closed]
            self.frames.pop(closed, None)
        kept = self.open.get(page)
        if kept is None:
            session = await self.direct.attach(page)
            kept = self.open[page] = KeptSession(session, self.probing)
        return kept

    async def drop(self, page: Page) -> None:
        """Forget `page`'s sessions after a failure: the next probe opens new ones."""
        kept = self.open.pop(page, None)
        await self.drop_frames(page)
        if kept is not None:
            await kept.session.detach()

    async def drop_frames(self, page: Page) -> None:
        for kept in self.frames.pop(page, {}).values():
            await kept.session.detach()


async def page_secrets(
    sessions: PageSessions, page: Page, *, values: bool, rects: bool = True
) -> PageSecrets:
    """Every secret field of `page`, in every frame (see the module's docstring): their
    boxes (unless `rects` is false: `extract` needs the values only, and skips the box
    models and the frames' carriers) and, with `values`, their values."""
    async with sessions.probing:
        try:
            return await _probe(sessions, page, values=values, rects=rects)
        except (PlaywrightError, CdpCallFailed) as exc:
            await sessions.drop(page)
            raise sf.ProbeError(str(exc).splitlines()[0][:200]) from exc
        except (KeyError, TypeError, ValueError) as exc:  # not of the shape CDP documents
            await sessions.drop(page)
            raise sf.ProbeError(f"an unexpected CDP answer ({exc!r:.200})") from exc
        except BaseException:
            await sessions.drop(page)
            raise


async def _probe(sessions: PageSessions, page: Page, *, values: bool, rects: bool) -> PageSecrets:
    main = await sessions.kept(page)
    found, out = await _read(main, unmoved if rects else None, values)
    kept = sessions.frames.get(page)
    children = page.frames[1:]
    if kept is not None and all(f in children and not f.is_detached() for f in kept):
        try:
            held, parts = await _frames(page, main, kept, values=values, rects=rects)
        except (CdpCallFailed, sf.ProbeError):  # a kept frame's renderer is gone (the
            held, parts = -1, []  # frame moved): sorted again below, and read once more
        if found.frames + held == len(page.frames):
            for part in parts:
                out.add(part)
            return out
    # The frames moved (one added, gone, or now in another renderer): sort them again.
    await sessions.drop_frames(page)
    kept = sessions.frames[page] = await _sort_frames(sessions.direct, sessions.probing, page)
    for part in (await _frames(page, main, kept, values=values, rects=rects))[1]:
        out.add(part)
    return out


async def _sort_frames(
    direct: DirectSessions, lock: anyio.Lock, page: Page
) -> dict[Frame, KeptSession]:
    """A session of its own for each out-of-process frame of `page` (a frame in the page's
    renderer has none: its document is in the page's pierced walk)."""
    own: dict[Frame, KeptSession] = {}
    try:
        for frame in page.frames[1:]:
            try:
                session = await direct.attach(frame)
            except PlaywrightError as exc:
                if SHARED_SESSION in (exc.message or str(exc)):
                    continue
                raise sf.ProbeError(f"a frame could not be read: {exc.message}") from exc
            own[frame] = KeptSession(session, lock)
    except BaseException:
        for kept in own.values():
            await kept.session.detach()
        raise
    return own


async def _frames(
    page: Page, main: KeptSession, kept: dict[Frame, KeptSession], *, values: bool, rects: bool
) -> tuple[int, list[PageSecrets]]:
    """Each out-of-process frame's secret fields (parents first, so each frame's boxes are
    carried through its parent's); how many frames their sessions hold."""
    ups: dict[Frame, tuple[DirectSession, Up]] = {page.main_frame: (main.session, unmoved)}
    held, parts = 0, list[PageSecrets]()
    for frame in sorted(kept, key=_depth):
        session = kept[frame].session
        up: Up | None = None
        if rects:
            parent = frame.parent_frame
            while parent is not None and parent not in ups:
                parent = parent.parent_frame
            above, above_up = ups[parent or page.main_frame]
            up = await carrier(above, above_up, session)
            ups[frame] = (session, up)
        found, part = await _read(kept[frame], up, values)
        held, parts = held + found.frames, [*parts, part]
    return held, parts
