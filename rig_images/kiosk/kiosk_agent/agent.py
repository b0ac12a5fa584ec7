"""The agent's main loop: one JSON request per line on stdin, one JSON response per line
on stdout; the ops, and the start sequence (Xvfb, D-Bus, CA, Chromium, focus)."""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, NamedTuple

from . import probe as probes
from . import target as targets
from .atspi import Atspi
from .browser import LOAD_TIMEOUT_S, Browser
from .cdp import CDP_TIMEOUT_S
from .chromium import trust_ca
from .common import DISPLAY, PROBE_BUDGET_S, READ_BUDGET_S, OpError, log, within
from .screen import Screen
from .serve import serve
from .vnc import READY_TIMEOUT_S, Vnc
from .xinput import XInput
from .xserver import start_dbus, start_xvfb

START_DEADLINE_S = 30.0


class _DisplayEnv(NamedTuple):
    """What the browser stage needs from the display stage."""

    t0: float
    deadline: float
    env: dict[str, str]


class Kiosk:
    def __init__(self) -> None:
        self.started = False
        self.width = 0
        self.height = 0
        self.procs: list[subprocess.Popen[bytes]] = []
        self.d: Any = None
        self.screen: Screen | None = None
        self.input: XInput | None = None
        self.atspi: Atspi | None = None
        self.tmp = ""
        self.verbose = os.environ.get("KIOSK_AGENT_VERBOSE") == "1"
        self.browser = Browser(verbose=self.verbose)
        self._display_env: _DisplayEnv | None = None  # between the two start stages
        self._start_fields: dict[str, Any] = {}  # ca_pem, proxy: for a claim's restart
        self.vnc = Vnc(verbose=self.verbose)

    # ---------------------------------------------------------------- start

    def op_start(self, req: dict[str, Any]) -> dict[str, Any]:
        """`stage`: "display" (Xvfb, D-Bus, the CA), then "browser" (Chromium), so
        the caller can report each; absent: both in one op."""
        stage = req.get("stage")
        if self.started or (stage == "display" and self._display_env is not None):
            raise OpError("already started")
        if stage not in (None, "display", "browser"):
            raise OpError(f"bad stage {stage!r}: display or browser")
        for name in ("ca_pem", "proxy"):
            if name in req:
                self._start_fields[name] = req[name]
        try:
            if stage == "browser":
                if self._display_env is None:
                    raise OpError("start stage display first")
                return self._start_browser(req, self._display_env)
            env = self._start_display(req)
            if stage == "display":
                self._display_env = env
                return {"ms": round((time.monotonic() - env.t0) * 1000, 1)}
            return self._start_browser(req, env)
        except BaseException:
            self.shutdown()  # a failed start leaves nothing running; start may be retried
            raise

    def _start_display(self, req: dict[str, Any]) -> _DisplayEnv:
        t0 = time.monotonic()
        width, height = int(req.get("width") or 1280), int(req.get("height") or 800)
        if not (320 <= width <= 4096 and 240 <= height <= 4096):
            raise OpError(f"bad size {width}x{height}")
        self.width, self.height = width, height
        ca_pem = req.get("ca_pem")
        self.tmp = tempfile.mkdtemp(prefix="kiosk-")
        home = os.environ.get("HOME") or "/home/sandbox"
        if not os.access(home, os.W_OK):
            # e.g. a root-owned tmpfs: Chromium and the NSS db need a writable HOME
            log(f"HOME {home} is not writable; using a directory under {self.tmp}")
            home = tempfile.mkdtemp(prefix="home-", dir=self.tmp)
        # Everything started from here (dbus-daemon, the AT-SPI bus it activates, certutil,
        # Chromium) sees the same HOME and runtime directory.
        os.environ.update(HOME=home, XDG_RUNTIME_DIR=self.tmp)
        deadline = t0 + START_DEADLINE_S

        self.d = start_xvfb(
            self.procs, width, height, verbose=self.verbose, deadline=deadline, glx=False
        )
        self.screen = Screen(self.d, width, height, verbose=self.verbose)
        self.input = XInput(self.d, width, height)
        bus = start_dbus(self.procs, verbose=self.verbose, deadline=deadline)
        if ca_pem:
            trust_ca(home, ca_pem, self.tmp)
        env = dict(os.environ)
        env.update(
            DISPLAY=DISPLAY,
            HOME=home,
            DBUS_SESSION_BUS_ADDRESS=bus,
            ACCESSIBILITY_ENABLED="1",
            NO_AT_BRIDGE="0",
            XDG_RUNTIME_DIR=self.tmp,
        )
        os.environ.update(
            DISPLAY=DISPLAY, HOME=home, DBUS_SESSION_BUS_ADDRESS=bus, XDG_RUNTIME_DIR=self.tmp
        )
        return _DisplayEnv(t0, deadline, env)

    def _start_browser(self, req: dict[str, Any], display: _DisplayEnv) -> dict[str, Any]:
        t0, deadline, env = display.t0, display.deadline, display.env
        proxy, url = req.get("proxy"), req.get("url")
        width, height = self.width, self.height
        no_sandbox_reason = self.browser.start(
            env, proxy, width=width, height=height, tmp=self.tmp, deadline=deadline
        )
        assert self.screen is not None  # made by the display stage
        self.screen.focus_first_window(deadline)
        self.atspi = Atspi(app_name="chrom")
        self.atspi.warm_up()
        self.started = True
        out: dict[str, Any] = {"chromium_sandbox": self.browser.sandbox}
        if no_sandbox_reason:
            out["sandbox_error"] = no_sandbox_reason[:300]
        if url:
            nav = self.browser.navigate(str(url), max(1.0, deadline - time.monotonic()))
            out["url"], out["error_text"] = nav["url"], nav["error_text"]
        out["vnc"] = self.vnc.status()  # not started: the first viewer's `vnc` op starts it
        out["ms"] = round((time.monotonic() - t0) * 1000, 1)
        return out

    def op_claim(self, req: dict[str, Any]) -> dict[str, Any]:
        """A warm pool kiosk handed to a session (orchestrator/pools/kiosks.py): nothing from
        before the claim may show. Same size: one page is left, navigated to a new
        about:blank document with its history reset, cookies and cache cleared; the answer
        waits until it has been drawn (`Browser.fresh_page`). Another size: Xvfb and
        Chromium start afresh at it."""
        self._require()
        t0 = time.monotonic()
        width, height = int(req.get("width") or 0), int(req.get("height") or 0)
        if (width, height) != (self.width, self.height):
            self.shutdown()
            fields = {**self._start_fields, "width": width, "height": height}
            out = self.op_start(fields)
            out["restarted"] = True
        else:
            self.browser.fresh_page(time.monotonic() + START_DEADLINE_S)
            self.atspi = Atspi(app_name="chrom")
            self.atspi.warm_up()
            out = {"chromium_sandbox": self.browser.sandbox, "restarted": False}
        out["ms"] = round((time.monotonic() - t0) * 1000, 1)
        return out

    def op_settle(self, req: dict[str, Any]) -> dict[str, Any]:
        """A pool kiosk, once started, waits here for what Chromium opens after its start
        (`Browser.settle`): the claim that comes later need not."""
        self._require()
        t0 = time.monotonic()
        self.browser.settle(t0 + START_DEADLINE_S)
        return {"ms": round((time.monotonic() - t0) * 1000, 1)}

    def shutdown(self) -> None:
        self.vnc.stop()
        self.browser.close()
        for proc in reversed(self.procs):
            with contextlib.suppress(Exception):
                proc.kill()
                proc.wait(timeout=3)
        self.procs = []
        if self.d is not None:
            with contextlib.suppress(Exception):
                self.d.close()
            self.d = None
        self.started = False
        self._display_env = None

    def _require(self) -> None:
        if not self.started:
            raise OpError("not started: send op start first")

    def _screen(self) -> Screen:
        self._require()
        assert self.screen is not None
        return self.screen

    def _input(self) -> XInput:
        self._require()
        assert self.input is not None
        return self.input

    # ---------------------------------------------------------------- screen

    def op_probe(self, req: dict[str, Any]) -> dict[str, Any]:
        with within(PROBE_BUDGET_S):
            return probes.probe(self._screen(), self.browser, self.atspi)

    def op_screenshot(self, req: dict[str, Any]) -> dict[str, Any]:
        """The masked screenshot. With `digest` (a recording's frame), the answer also says
        what the pixels are (`pixels_digest`); with `unless` too, a screen whose pixels are
        still those is answered `same`, without the probes or a PNG: the gateway's frame
        of those very pixels is the screen again (issue 23: a recorder's frame after an
        input that changed nothing cost the kiosk a whole screenshot)."""
        screen = self._screen()
        if (same := screen.unchanged(req)) is not None:
            return same
        t0 = time.perf_counter()
        with within(PROBE_BUDGET_S):
            before = probes.probe(screen, self.browser, self.atspi)
        t1 = time.perf_counter()
        image = screen.grab()
        t2 = time.perf_counter()
        with within(PROBE_BUDGET_S):
            after = probes.probe(screen, self.browser, self.atspi)
        t3 = time.perf_counter()
        # The image lies between the two probes: mask whatever either saw. The fields are
        # painted black here, before encoding; the gateway checks they are the ones its
        # plan masks and then passes the PNG through instead of decoding it again.
        probe = probes.merge(before, after)
        painted = probes.padded(probe["password_rects"], self.width, self.height)
        png = screen.encode_png(image, painted)
        t4 = time.perf_counter()
        ms = [round(1000 * (b - a), 2) for a, b in ((t0, t1), (t1, t2), (t2, t3), (t3, t4))]
        if self.verbose:
            log("screenshot ms: probe, grab, probe, paint+png =", ms)
        return {
            "png": base64.b64encode(png).decode(),
            "width": self.width,
            "height": self.height,
            "probe": probe,
            "painted": painted,
            "ms": dict(zip(("probe", "grab", "probe_after", "png"), ms, strict=True)),
            **screen.digest_asked(req, image),
        }

    # ---------------------------------------------------------------- input

    def op_click(self, req: dict[str, Any]) -> dict[str, Any]:
        self._input().click(req)
        return {}

    def op_scroll(self, req: dict[str, Any]) -> dict[str, Any]:
        self._input().scroll(req)
        return {}

    def op_type(self, req: dict[str, Any]) -> dict[str, Any]:
        """XTest for what the spare keycodes can carry; CDP Input.insertText for the rest."""
        rest = self._input().type_text(req)
        out: dict[str, Any] = {}
        if rest:
            self.browser.insert_text(rest)
            out["inserted_via_cdp"] = len(rest)
        return out

    def op_key(self, req: dict[str, Any]) -> dict[str, Any]:
        self._input().key(req)
        return {}

    def op_clipboard_clear(self, req: dict[str, Any]) -> dict[str, Any]:
        """Both X selections owned by nobody (at hand back: a person's copy is theirs)."""
        self._input().clear_selections()
        return {}

    def op_target(self, req: dict[str, Any]) -> dict[str, Any]:
        """The accessible name and role of what a click at x, y would hit (target.py)."""
        self._require()
        x, y = req.get("x"), req.get("y")
        for name, value in (("x", x), ("y", y)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise OpError(f"{name} must be an integer (screen pixels)")
        assert isinstance(x, int) and isinstance(y, int)
        if not (0 <= x < self.width and 0 <= y < self.height):
            raise OpError(f"{x},{y} is outside the {self.width}x{self.height} screen")
        t0 = time.perf_counter()
        try:
            with within(READ_BUDGET_S):
                out = targets.target(self.browser, x, y)
        except Exception as exc:  # unknown, not a failure: the caller treats it conservatively
            out = targets.unknown(f"the target could not be read: {exc}")
        out["ms"] = round((time.perf_counter() - t0) * 1000, 2)
        return out

    def op_focused(self, req: dict[str, Any]) -> dict[str, Any]:
        """The element a key press would act on, and a text field's form's submit control
        (target.focused)."""
        self._require()
        t0 = time.perf_counter()
        try:
            with within(READ_BUDGET_S):
                out = targets.focused(self.browser)
        except Exception as exc:  # unknown, not a failure: the caller holds it
            out = targets.unknown(f"the focused element could not be read: {exc}")
        out["ms"] = round((time.perf_counter() - t0) * 1000, 2)
        return out

    # ---------------------------------------------------------------- live view

    def op_vnc(self, req: dict[str, Any]) -> dict[str, Any]:
        """x11vnc's state; `start: true` (or `restart`) starts it when none runs. A viewer's
        relay starts it too (vnc.py): the kiosk starts none itself."""
        self._require()
        if (req.get("start") or req.get("restart")) and not self.vnc.status()["running"]:
            self.vnc.start(DISPLAY, time.monotonic() + READY_TIMEOUT_S)
        return self.vnc.status()

    # ---------------------------------------------------------------- browser

    def op_navigate(self, req: dict[str, Any]) -> dict[str, Any]:
        self._require()
        url = req.get("url")
        if not isinstance(url, str) or not url:
            raise OpError("url must be a non-empty string")
        return self.browser.navigate(url, LOAD_TIMEOUT_S)

    def op_page(self, req: dict[str, Any]) -> dict[str, Any]:
        self._require()
        return self.browser.page_info(CDP_TIMEOUT_S)

    def op_eval(self, req: dict[str, Any]) -> dict[str, Any]:
        self._require()
        expr = req.get("expression")
        if not isinstance(expr, str):
            raise OpError("expression must be a string")
        return self.browser.evaluate(expr)


# --------------------------------------------------------------------------- main loop


def main() -> int:
    kiosk = Kiosk()
    ops: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
        "start": kiosk.op_start,
        "screenshot": kiosk.op_screenshot,
        "probe": kiosk.op_probe,
        "click": kiosk.op_click,
        "type": kiosk.op_type,
        "key": kiosk.op_key,
        "clipboard_clear": kiosk.op_clipboard_clear,
        "scroll": kiosk.op_scroll,
        "navigate": kiosk.op_navigate,
        "page": kiosk.op_page,
        "eval": kiosk.op_eval,
        "target": kiosk.op_target,
        "focused": kiosk.op_focused,
        "vnc": kiosk.op_vnc,
        "claim": kiosk.op_claim,
        "settle": kiosk.op_settle,
    }

    def on_term(signum: int, frame: FrameType | None) -> None:
        kiosk.shutdown()
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    log("ready")
    try:
        serve(ops)
    finally:
        kiosk.shutdown()
    return 0
