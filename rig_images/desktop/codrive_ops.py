"""codrive's ops in the desktop rig's agent (SPEC S3; docs/codrive.md).

- `app`: make sure the target application runs (started once, like a person would).
- `locate`: `(role, name)` in the application's AT-SPI tree -> the element's centre in
  screen pixels, by the ladder's matching rule (exact, case-insensitive, fuzzy).
- `widget`: an AT-SPI Action (press/activate/click) on a named widget; `read`: its text.
- `fingerprint` / `settle` / `idle`: the effect check and watch mode: a count of the
  accessibility events the target application sent plus a hash of its window's pixels.
- `where`: the application's window title and, for Chromium, the page's URL.
- `browser`: Chromium's api actions (open_url, reload, back) over its CDP pipe
  (codrive_tab.py); the matching rule is in codrive_match.py.

AT-SPI runs on the kiosk agent's dedicated AT-SPI thread (libatspi is not thread-safe).
"""

from __future__ import annotations

import contextlib
import hashlib
import subprocess
import time
from typing import Any

from codrive_match import on_screen, pick, role_matches, showing_nodes
from codrive_reads import ATSPI_S, ElementReads
from codrive_tab import ChromiumTab
from kiosk_agent.atspi import Atspi
from kiosk_agent.cdp import CDP
from kiosk_agent.chromium import spawn_with_pipe
from kiosk_agent.common import OpError
from Xlib import X

APP_START_S = 40.0  # Mousepad sometimes takes ~20 s to map its window
# app id -> (argv, the name the application gives AT-SPI)
APPS: dict[str, tuple[list[str], str]] = {
    "mousepad": (["mousepad"], "mousepad"),
    "galculator": (["galculator"], "galculator"),
    "gnome-calculator": (["gnome-calculator"], "gnome-calculator"),
    "chromium": (["corral-chromium", "--remote-debugging-pipe", "about:blank"], "chromium"),
}
EVENTS = (
    "object:state-changed",
    "object:text-changed",
    "object:children-changed",
    "object:property-change",
    "object:visible-data-changed",
)
ACTION_NAMES = ("press", "activate", "click")
# What shows that a new window's widgets reached the accessibility tree.
ACTABLE_ROLES = frozenset(
    {"push button", "toggle button", "text", "entry", "menu item", "document web", "terminal"}
)


class Codrive(ChromiumTab, ElementReads):
    def __init__(self, desktop: Any) -> None:
        self.desktop = desktop  # the agent's Desktop: display, env, processes
        self.at: Atspi = desktop.at  # the agent's one AT-SPI thread
        self.events: dict[str, int] = {}  # accessibility events seen, per application name
        # Elements added, removed or renamed, per application: a lookup's cached walk of
        # an application stays valid while its count is unchanged.
        self.shape: dict[str, int] = {}
        self._walks: dict[tuple[str, str], tuple[int, list[tuple[str, Any]]]] = {}
        self._listener: Any = None
        self.started: dict[str, subprocess.Popen[bytes]] = {}
        self.cdp: CDP | None = None
        self.cdp_session: str | None = None

    # ------------------------------------------------------------------ AT-SPI plumbing
    def _mod(self) -> Any:
        A = self.at._atspi()
        if self._listener is None:

            def seen(event: Any) -> None:
                try:
                    app = (event.source.get_application().get_name() or "").casefold()
                except Exception:
                    app = ""
                self.events[app] = self.events.get(app, 0) + 1
                kind = str(event.type or "")
                if kind.startswith("object:children-changed") or kind.endswith("accessible-name"):
                    self.shape[app] = self.shape.get(app, 0) + 1

            self._listener = A.EventListener.new(seen)
            for kind in EVENTS:
                self._listener.register(kind)
        from gi.repository import GLib

        ctx = GLib.MainContext.default()
        while ctx.iteration(False):  # deliver queued events (the count above)
            pass
        return A

    def _app(self, A: Any, app: str) -> Any:
        wanted = APPS[app][1] if app in APPS else app
        desktop = A.get_desktop(0)
        for i in range(desktop.get_child_count()):
            node = desktop.get_child_at_index(i)
            if node is not None and (node.get_name() or "").casefold() == wanted:
                return node
        raise OpError(f"{app} is not running (no such application in the accessibility tree)")

    def _find(self, app: str, role: str, name: str) -> tuple[Any | None, str]:
        """The element, by the matching rule, from a walk of the application's tree that is
        cached until the application adds, removes or renames an element; a cached element
        that is no longer on screen forces a fresh walk."""
        A = self._mod()
        shape = self.shape.get(APPS[app][1] if app in APPS else app, 0)
        cached = self._walks.get((app, role))
        for fresh in (cached is None or cached[0] != shape, True):
            if fresh:
                named = self._walk(A, app, role)
                self._walks[(app, role)] = (shape, named)
            else:
                assert cached is not None
                named = cached[1]
            if not named:
                return None, f"no showing element with role {role!r}"
            node, how = pick(name, named)
            if node is None or on_screen(A, node):
                return node, how
            if fresh:
                return None, "not on screen"
        raise AssertionError("unreachable")

    def _walk(self, A: Any, app: str, role: str) -> list[tuple[str, Any]]:
        return [
            (node.get_name() or "", node)
            for node in showing_nodes(
                A, self._app(A, app), lambda n: role_matches(role, n.get_role_name() or "")
            )
            if on_screen(A, node)
        ]

    # ------------------------------------------------------------------ ops
    def op_app(self, req: dict[str, Any]) -> dict[str, Any]:
        """Start the target application unless it runs; wait for it in the tree."""
        self.desktop._require()
        app = str(req.get("app"))
        if app not in APPS:
            raise OpError(f"unknown app {app!r}; one of: {', '.join(APPS)}")
        deadline = time.monotonic() + APP_START_S
        try:
            title = self.at.run(lambda: self._title(app), ATSPI_S)
            return {"started": False, "title": title}
        except OpError:
            pass
        proc = self.started.get(app)
        if proc is None or proc.poll() is not None:
            self.started[app] = self._spawn(app)
        while time.monotonic() < deadline:
            try:
                title = self.at.run(lambda: self._title(app), ATSPI_S)
            except OpError:
                time.sleep(0.05)  # polling the tree for the new application, bounded
                continue
            return {"started": True, "title": title, "ready": self._ready(app, deadline)}
        raise OpError(f"{app} did not show a window within {APP_START_S:g} s")

    def _ready(self, app: str, deadline: float) -> bool:
        """Wait, bounded, until the new window shows an element a step can act on (a
        window maps before its widgets reach the accessibility tree): False at the
        deadline, and the first step then says what it could not find."""

        def actable() -> bool:
            A = self._mod()
            return bool(
                showing_nodes(
                    A,
                    self._app(A, app),
                    lambda n: (n.get_role_name() or "") in ACTABLE_ROLES and on_screen(A, n),
                    limit=1500,
                )
            )

        while time.monotonic() < deadline:
            with contextlib.suppress(OpError):
                if self.at.run(actable, ATSPI_S):
                    return True
            time.sleep(0.05)  # polling the tree for the window's widgets, bounded
        return False

    def _spawn(self, app: str) -> subprocess.Popen[bytes]:
        argv = APPS[app][0]
        if app != "chromium":
            proc = subprocess.Popen(
                argv,
                env=self.desktop.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            self.desktop.procs.append(proc)
            return proc
        # Chromium with its CDP on a pipe (fds 3 and 4), for the api actions.
        proc, self.cdp = spawn_with_pipe(argv, self.desktop.env, stderr=subprocess.DEVNULL)
        self.cdp_session = None
        self.desktop.procs.append(proc)
        return proc

    def _title(self, app: str) -> str:
        A = self._mod()
        root = self._app(A, app)
        for i in range(root.get_child_count()):
            frame = root.get_child_at_index(i)
            if frame is not None and frame.get_state_set().contains(A.StateType.SHOWING):
                return str(frame.get_name() or "")
        raise OpError(f"{app} has no window showing")

    def op_widget(self, req: dict[str, Any]) -> dict[str, Any]:
        """An AT-SPI Action on a named widget: `action` press or activate (whichever of
        press/activate/click the widget offers, in that order, when the named one is not)."""
        self.desktop._require()
        app, role, name = str(req["app"]), str(req.get("role") or ""), str(req["name"])
        wanted = str(req.get("action") or "press")

        def run() -> dict[str, Any]:
            node, how = self._find(app, role or "", name) if role else self._any(app, name)
            if node is None:
                raise OpError(f"{role or 'element'} {name!r}: {how}")
            action = node.get_action_iface()
            if action is None:
                raise OpError(f"{name!r} offers no AT-SPI action")
            names = [action.get_action_name(i) for i in range(action.get_n_actions())]
            order = [wanted] + [n for n in ACTION_NAMES if n != wanted]
            index = next((names.index(n) for n in order if n in names), None)
            if index is None:
                raise OpError(f"{name!r} offers {names}, none of {list(order)}")
            return {"done": bool(action.do_action(index)), "action": names[index], "how": how}

        return self.at.run(run, ATSPI_S)

    def _any(self, app: str, name: str) -> tuple[Any | None, str]:
        return self._find(app, "", name)

    # ------------------------------------------------------------------ effects
    def _window_box(self, app: str) -> tuple[int, int, int, int]:
        A = self._mod()
        root = self._app(A, app)
        for i in range(root.get_child_count()):
            frame = root.get_child_at_index(i)
            if frame is not None and frame.get_state_set().contains(A.StateType.SHOWING):
                b = frame.get_extents(A.CoordType.SCREEN)
                return b.x, b.y, b.width, b.height
        return 0, 0, self.desktop.width, self.desktop.height

    def _fingerprint(self, app: str) -> str:
        try:
            box = self.at.run(lambda: self._window_box(app), ATSPI_S)
            name = APPS[app][1] if app in APPS else app
            events = self.at.run(lambda: (self._mod(), self.events.get(name, 0))[1], ATSPI_S)
        except OpError:
            box, events = (0, 0, self.desktop.width, self.desktop.height), -1
        x, y, w, h = box
        x, y = max(0, x), max(0, y)
        w, h = min(w, self.desktop.width - x), min(h, self.desktop.height - y)
        root = self.desktop.d.screen().root
        pixels = root.get_image(x, y, max(1, w), max(1, h), X.ZPixmap, 0xFFFFFFFF).data
        return f"{events}:{hashlib.blake2b(pixels, digest_size=12).hexdigest()}"

    def op_fingerprint(self, req: dict[str, Any]) -> dict[str, Any]:
        self.desktop._require()
        return {"fp": self._fingerprint(str(req["app"]))}

    def op_settle(self, req: dict[str, Any]) -> dict[str, Any]:
        """Poll the fingerprint until it differs from `before`, for at most `within_ms`."""
        self.desktop._require()
        app, before = str(req["app"]), str(req["before"])
        end = time.monotonic() + min(float(req.get("within_ms") or 400), 3000) / 1000
        while True:
            now = self._fingerprint(app)
            if now.split(":")[1] != before.split(":")[1] or (
                now.split(":")[0] != before.split(":")[0] and not now.startswith("-1")
            ):
                return {"changed": True, "fp": now}
            if time.monotonic() >= end:
                return {"changed": False, "fp": now}
            time.sleep(0.02)  # polling the screen for the step's effect, bounded

    def op_idle(self, req: dict[str, Any]) -> dict[str, Any]:
        """Wait until nothing changed for `quiet_ms` (at most `max_ms`)."""
        self.desktop._require()
        app = str(req["app"])
        quiet = min(float(req.get("quiet_ms") or 300), 5000) / 1000
        t0 = time.monotonic()
        end = t0 + min(float(req.get("max_ms") or 5000), 30000) / 1000
        last, since = self._fingerprint(app), time.monotonic()
        while time.monotonic() < end:
            time.sleep(0.03)  # sampling the screen and the event count, bounded
            now = self._fingerprint(app)
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet:
                return {"idle": True, "ms": round((time.monotonic() - t0) * 1000)}
        return {"idle": False, "ms": round((time.monotonic() - t0) * 1000)}

    # ------------------------------------------------------------------ where, browser
    def op_where(self, req: dict[str, Any]) -> dict[str, Any]:
        self.desktop._require()
        app = str(req["app"])
        try:
            title = self.at.run(lambda: self._title(app), ATSPI_S)
        except OpError:
            title = ""
        url = self.page_url() if app == "chromium" else ""
        return {"title": title, "url": url}
