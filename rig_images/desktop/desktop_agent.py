"""The desktop rig's agent: the one long-lived process inside a desktop rig container.

Protocol: the kiosk agent's (docs/kiosk-internals.md §2): one JSON request per line on
stdin (`{"id": 7, "op": "click", ...}`), one answer per line on stdout (`{"id": 7, "ok":
true, ...}` or `{"ok": false, "error": ...}`); logs go to stderr. Ops (docs/rigs.md):
start, screenshot, move, click, drag, scroll, type, key, resize, windows,
clipboard_get, clipboard_set, vnc; target and focused (desktop_target.py: what a click
or a key acts on, for the approval rules); and codrive's (codrive_ops.py): app, locate, widget,
read, fingerprint, settle, idle, where, browser.

It owns Xvfb (:99), a session D-Bus (the accessibility bus is activated through it),
openbox, x11vnc on a unix socket only, and the apps: Mousepad at start, the others from
openbox's right-click menu. Input is XTest; screenshots are Xlib + Pillow: the kiosk
agent's modules (`/opt/corral/kiosk_agent`, put in the image by `corral images build`),
imported, not copied.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, "/opt/corral")

from codrive_ops import Codrive
from desktop_mask import WALK_S, password_rects
from desktop_target import Targets
from desktop_windows import shown_windows, unlisted
from kiosk_agent.atspi import Atspi
from kiosk_agent.chromium import trust_ca
from kiosk_agent.common import DISPLAY, OpError, log
from kiosk_agent.screen import Screen
from kiosk_agent.serve import serve
from kiosk_agent.vnc import Vnc
from kiosk_agent.xinput import XInput
from kiosk_agent.xserver import start_dbus, start_xvfb
from Xlib import X, Xatom

START_DEADLINE_S = 30.0
# Input ops that are the kiosk agent's XInput methods of the same name, as they are.
INPUT_OPS = ("move", "click", "drag", "scroll", "key")
# Ops that are the kiosk agent's XInput methods taking no request (the hand back's).
DISPLAY_OPS = {"clipboard_clear": "clear_selections"}
FIRST_WINDOW_S = 3.0
CLIPBOARD_S = 5.0
FIRST_APP = ["mousepad"]


class Desktop:
    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.at = Atspi("")  # the one AT-SPI thread: the mask's walk, codrive, targets
        self.vnc = Vnc()
        self.started = False
        self.env: dict[str, str] = {}
        self.width = self.height = 0

    # ------------------------------------------------------------------ start
    def op_start(self, req: dict[str, Any]) -> dict[str, Any]:
        if self.started:
            raise OpError("already started")
        t0 = time.monotonic()
        deadline = t0 + START_DEADLINE_S
        self.width, self.height = int(req.get("width") or 1280), int(req.get("height") or 800)
        tmp = tempfile.mkdtemp(prefix="desktop-")
        home = os.environ.get("HOME") or "/home/sandbox"
        os.environ.update(HOME=home, XDG_RUNTIME_DIR=tmp)
        with open(os.path.join(home, ".corral-proxy"), "w") as fh:
            fh.write(str(req.get("proxy") or ""))
        if req.get("ca_pem"):  # Chromium on the desktop trusts the configured private CA
            trust_ca(home, str(req["ca_pem"]), tmp)
        phases: dict[str, float] = {}
        self.d = start_xvfb(self.procs, self.width, self.height, verbose=False, deadline=deadline)
        phases["xvfb"] = _ms(t0)
        self.screen = Screen(self.d, self.width, self.height)
        self.input = XInput(self.d, self.width, self.height)
        self.vnc.start(DISPLAY, None)  # no viewer can come yet: waited for below
        bus = start_dbus(self.procs, verbose=False, deadline=deadline)
        phases["dbus"] = _ms(t0)
        self.env = dict(
            os.environ,
            DISPLAY=DISPLAY,
            DBUS_SESSION_BUS_ADDRESS=bus,
            ACCESSIBILITY_ENABLED="1",
            NO_AT_BRIDGE="0",
            GTK_A11Y="atspi",
        )
        os.environ.update(DISPLAY=DISPLAY, DBUS_SESSION_BUS_ADDRESS=bus)
        self._spawn(["openbox", "--sm-disable"])
        # Apps start once openbox manages the screen: a window mapped while openbox is
        # still starting can stay unmapped for ~20 s (seen with Mousepad).
        while time.monotonic() < deadline and not self._wm_ready():
            time.sleep(0.01)  # polling for the window manager, not a sleep-sync
        phases["wm"] = _ms(t0)
        self._spawn(FIRST_APP)
        # Mousepad's window usually maps within a second, but now and then only after ~20 s
        # (seen in about one start in ten, whatever the accessibility or window manager
        # state): wait a little for it, never for the stall; it appears when it does.
        first_window = min(deadline, time.monotonic() + FIRST_WINDOW_S)
        while time.monotonic() < first_window and not self._titles():
            time.sleep(0.02)  # polling for the first window, bounded
        phases["window"] = _ms(t0)
        self.started = True
        self.vnc.wait_ready(min(deadline, time.monotonic() + 5))
        phases["vnc"] = _ms(t0)
        return {
            "windows": self._titles(),
            "vnc": self.vnc.status(),
            "ms": _ms(t0),
            "phases": phases,
        }

    def _spawn(self, argv: list[str]) -> None:
        self.procs.append(
            subprocess.Popen(
                argv,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        )

    def _wm_ready(self) -> bool:
        """openbox has set _NET_SUPPORTING_WM_CHECK on the root window."""
        root = self.d.screen().root
        check = root.get_full_property(
            self.d.intern_atom("_NET_SUPPORTING_WM_CHECK"), X.AnyPropertyType
        )
        return bool(check and check.value)

    def _require(self) -> None:
        if not self.started:
            raise OpError("the desktop is not started")

    # ------------------------------------------------------------------ windows
    def _client_windows(self) -> list[Any]:
        """Top-level client windows (below openbox's frames), in `_NET_CLIENT_LIST`."""
        root = self.d.screen().root
        prop = root.get_full_property(self.d.intern_atom("_NET_CLIENT_LIST"), X.AnyPropertyType)
        return [
            self.d.create_resource_object("window", wid) for wid in (prop.value if prop else [])
        ]

    def _clients(self) -> list[tuple[Any, str]]:
        """Top-level client windows with their titles."""
        return [(window, self._title(window)) for window in self._client_windows()]

    def _title(self, window: Any) -> str:
        utf8 = self.d.intern_atom("UTF8_STRING")
        name = window.get_full_property(self.d.intern_atom("_NET_WM_NAME"), utf8)
        if name is not None and name.value:
            value = name.value
            return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
        legacy = window.get_full_property(Xatom.WM_NAME, X.AnyPropertyType)
        value = legacy.value if legacy is not None else b""
        return value.decode(errors="replace") if isinstance(value, bytes) else str(value)

    def _titles(self) -> list[str]:
        try:
            return [title for _, title in self._clients()]
        except Exception:
            return []

    def op_windows(self, req: dict[str, Any]) -> dict[str, Any]:
        self._require()
        return {"windows": self._titles()}

    def op_resize(self, req: dict[str, Any]) -> dict[str, Any]:
        self._require()
        wanted = str(req.get("window") or "")
        width, height = int(req["width"]), int(req["height"])
        matches = [(w, t) for w, t in self._clients() if wanted.lower() in t.lower()]
        if not matches:
            raise OpError(f"no window whose title contains {wanted!r}")
        window, title = matches[0]
        window.configure(width=width, height=height)
        self.d.sync()
        return {"title": title, "matches": len(matches)}

    # ------------------------------------------------------------------ input
    def display_op(self, method: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """The op calling XInput's `method` with no request, once started."""

        def op(req: dict[str, Any]) -> dict[str, Any]:
            self._require()
            getattr(self.input, method)()
            return {}

        return op

    def input_op(self, name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """The op `name` of INPUT_OPS: XInput's method of that name, once started."""

        def op(req: dict[str, Any]) -> dict[str, Any]:
            self._require()
            getattr(self.input, name)(req)
            return {}

        return op

    def op_type(self, req: dict[str, Any]) -> dict[str, Any]:
        self._require()
        rest = self.input.type_text(req)
        while rest:
            rest = self.input.type_text({"text": rest})
        return {}

    # ------------------------------------------------------------------ clipboard
    def op_clipboard_set(self, req: dict[str, Any]) -> dict[str, Any]:
        """Set the clipboard (or, with `selection: primary`, the primary selection) to
        `text`; empty text clears it (corral clears both at hand back)."""
        self._require()
        text = str(req.get("text") or "")
        selection = "primary" if req.get("selection") == "primary" else "clipboard"
        # xclip forks and owns the selection until another client takes it
        subprocess.run(
            ["xclip", "-selection", selection, "-i"],
            input=text.encode(),
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=CLIPBOARD_S,
            check=True,
        )
        return {}

    def op_clipboard_get(self, req: dict[str, Any]) -> dict[str, Any]:
        self._require()
        done = subprocess.run(
            ["xclip", "-selection", "clipboard", "-o"],
            env=self.env,
            capture_output=True,
            timeout=CLIPBOARD_S,
            check=False,
        )
        return {"text": done.stdout.decode(errors="replace") if done.returncode == 0 else ""}

    # ------------------------------------------------------------------ screenshot
    def op_screenshot(self, req: dict[str, Any]) -> dict[str, Any]:
        """The masked screenshot; `digest` and `unless` as the kiosk's (kiosk_agent.agent)."""
        self._require()
        if (same := self.screen.unchanged(req)) is not None:
            return same
        deadline = time.monotonic() + WALK_S  # desktop_mask.py: bounded, failing closed
        before = password_rects(self.at, deadline)
        image = self.screen.grab()
        # What X showed at the grab, against the applications the walk read before it.
        error = before.error or self._unlisted(before.pids)
        after = password_rects(self.at, deadline) if not error else None
        error = error or (after.error if after else None)
        rects = sorted({tuple(r) for r in before.rects + (after.rects if after else [])})
        png = self.screen.encode_png(image, rects)
        import base64

        return {
            "png": base64.b64encode(png).decode(),
            "width": self.width,
            "height": self.height,
            "painted": [list(r) for r in rects],
            **self.screen.digest_asked(req, image),
            "probe": {
                "windows": 1,
                "focused_ok": True,
                "password_rects": [list(r) for r in rects],
                "url": "",
                "title": "",
                "error": error,
            },
        }

    def _unlisted(self, pids: set[int]) -> str | None:
        """Why the screen must be masked whole for a window X shows now whose process is
        not among `pids` (desktop_windows.py); a window gone while read: masked this once."""
        try:
            return unlisted(shown_windows(self.d, self._client_windows()), pids, self._title)
        except Exception as exc:  # python-xlib's BadWindow, for one
            return f"the windows shown could not be read ({type(exc).__name__})"

    def op_vnc(self, req: dict[str, Any]) -> dict[str, Any]:
        """x11vnc's state; `start: true` (or `restart`) starts it again when it is not
        running (here it starts with the display; a viewer's relay starts it too), and
        waits for its socket."""
        wanted = req.get("start") or req.get("restart")
        if wanted and self.started and not self.vnc.status().get("running"):
            self.vnc.start(DISPLAY, time.monotonic() + 5)
        return self.vnc.status()

    def shutdown(self) -> None:
        self.vnc.stop()
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.kill()


def _ms(t0: float) -> float:
    return round((time.monotonic() - t0) * 1000, 1)


def main() -> int:
    desktop = Desktop()
    codrive = Codrive(desktop)
    targets = Targets(desktop, desktop.at)
    ops: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
        name[3:]: getattr(owner, name)
        for owner in (desktop, codrive, targets)
        for name in dir(owner)
        if name.startswith("op_")
    }
    ops.update({name: desktop.input_op(name) for name in INPUT_OPS})
    ops.update({op: desktop.display_op(method) for op, method in DISPLAY_OPS.items()})
    signal.signal(signal.SIGTERM, lambda *_: (desktop.shutdown(), os._exit(0)))
    log("desktop agent ready")
    try:
        serve(ops)
    finally:
        desktop.shutdown()
    return 0


if __name__ == "__main__":
    import channel_socket  # /opt/corral/channel_socket.py (rig_images/channel_socket.py)

    channel_socket.take()  # the channel's own socket, when corral gives one
    sys.exit(main())
