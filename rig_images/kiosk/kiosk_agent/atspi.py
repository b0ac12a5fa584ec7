"""Password fields through AT-SPI (libatspi via python3-gi), on one dedicated thread.

Nothing here is browser-specific except what the caller passes: which applications to
search (by name) and that the fields live under showing web documents.
"""

from __future__ import annotations

import queue
import threading
import warnings
from collections.abc import Callable
from typing import Any, TypeVar, cast

from .common import OpError

# libatspi's GI binding flags get_collection_iface as deprecated; it is the only accessor.
warnings.filterwarnings("ignore", message=".*get_collection_iface.*")

_T = TypeVar("_T")


class Atspi:
    """Password fields through AT-SPI, on one dedicated thread (libatspi is not thread-safe),
    each lookup bounded by the caller. Collection.getMatches on the showing DOCUMENT_WEB
    nodes only (searching from the application root finds hidden browser-UI nodes).

    `app_name`: only applications whose name contains it (case-insensitive) are searched."""

    def __init__(self, app_name: str) -> None:
        self.app_name = app_name.lower()
        # (job, where its answer goes: None for the warm-up, which nobody waits for)
        self._jobs: queue.Queue[
            tuple[Callable[[], object], queue.Queue[tuple[bool, object]] | None]
        ] = queue.Queue()
        self._busy = threading.Event()
        self._mod: Any = None
        self._thread = threading.Thread(target=self._loop, name="atspi", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            fn, out = self._jobs.get()
            try:
                answer: tuple[bool, object] = (True, fn())
            except Exception as exc:
                answer = (False, exc)
            if out is not None:  # a caller's lookup, not the warm-up
                out.put(answer)
                self._busy.clear()

    def warm_up(self) -> None:
        """Start libatspi and look at the tree once, on the AT-SPI thread, now: the GI
        import, the bus connection and the first walk of Chromium's tree cost the first
        lookup ~40 ms more than the next (measured), which was the session's first
        screenshot. Nobody waits for it; a lookup submitted meanwhile queues behind it
        (its own timeout covers the wait), and a warm-up that fails is the next lookup's
        to report."""
        self._jobs.put((self._password_rects, None))

    def submit(self, fn: Callable[[], _T]) -> Callable[[float], _T]:
        """Start `fn` on the AT-SPI thread now; the returned function waits for its result
        (so a caller can do other work, such as the DOM probe, in the meantime)."""
        if self._busy.is_set():
            raise OpError("AT-SPI: a previous lookup is still stuck")
        self._busy.set()
        out: queue.Queue[tuple[bool, object]] = queue.Queue()
        self._jobs.put((fn, out))

        def wait(timeout: float) -> _T:
            try:
                ok, value = out.get(timeout=timeout)
            except queue.Empty:
                raise OpError(f"AT-SPI: no answer within {timeout:g} s") from None
            if not ok:
                raise OpError(f"AT-SPI: {value}")
            return cast(_T, value)  # fn's own result (ok is True)

        return wait

    def run(self, fn: Callable[[], _T], timeout: float) -> _T:
        return self.submit(fn)(timeout)

    def _atspi(self) -> Any:
        if self._mod is None:
            import gi

            gi.require_version("Atspi", "2.0")
            from gi.repository import Atspi as mod

            mod.init()
            mod.set_timeout(1000, 2000)
            self._mod = mod
        return self._mod

    def _password_rects(self) -> list[list[int]]:
        A = self._atspi()
        from gi.repository import GLib

        ctx = GLib.MainContext.default()
        while ctx.iteration(False):  # drain queued D-Bus signals
            pass
        doc_rule = _showing_rule(A, A.Role.DOCUMENT_WEB)
        pw_rule = _showing_rule(A, A.Role.PASSWORD_TEXT)
        desktop = A.get_desktop(0)
        rects: list[list[int]] = []
        found_doc = False
        for i in range(desktop.get_child_count()):
            app = desktop.get_child_at_index(i)
            if app is None:
                continue
            name = (app.get_name() or "").lower()
            if self.app_name not in name:
                continue
            coll = app.get_collection_iface()
            if coll is None:
                continue
            docs = coll.get_matches(doc_rule, A.CollectionSortOrder.CANONICAL, 0, True)
            for doc in docs:
                found_doc = True
                dcoll = doc.get_collection_iface()
                if dcoll is None:
                    continue
                for node in dcoll.get_matches(pw_rule, A.CollectionSortOrder.CANONICAL, 0, True):
                    ext = node.get_extents(A.CoordType.SCREEN)
                    rect = [ext.x, ext.y, ext.width, ext.height]
                    if ext.width > 0 and ext.height > 0 and rect not in rects:
                        rects.append(rect)
        if not found_doc:
            raise OpError("no showing web document in the accessibility tree")
        return rects

    def password_rects(self, timeout: float) -> list[list[int]]:
        return self.run(self._password_rects, timeout)

    def start_password_rects(self) -> Callable[[float], list[list[int]]]:
        """`password_rects`, started now and waited for later."""
        return self.submit(self._password_rects)


def _showing_rule(A: Any, role: Any) -> Any:
    """An AT-SPI collection rule: showing elements of `role`."""
    return A.MatchRule.new(
        A.StateSet.new([A.StateType.SHOWING]),
        A.CollectionMatchType.ALL,
        {},
        A.CollectionMatchType.ALL,
        [role],
        A.CollectionMatchType.ANY,
        [],
        A.CollectionMatchType.ALL,
        False,
    )
