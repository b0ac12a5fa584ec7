#!/usr/bin/env python3
"""corral kiosk agent: the one long-lived process inside a kiosk container.

Protocol (docs/kiosk-internals.md section 2): one JSON request per line on
stdin, one JSON response per line on stdout (stdout carries nothing else; logs
go to stderr). Ops: start, screenshot, probe, click, type, key, scroll,
navigate, page, eval.

It owns Xvfb (:99), a session D-Bus (AT-SPI is activated through it), and
Debian's Chromium in kiosk mode, spoken to over CDP on a pipe
(--remote-debugging-pipe: fd 3 = commands in, fd 4 = replies out, JSON
messages terminated by NUL). Input goes through XTest (python-xlib);
screenshots are Xlib get_image + Pillow. Every X action is flushed and the op
returns at once: callers read effects back by polling, never by sleeping.

Only Python 3.11's standard library plus Debian's python3-xlib, python3-pil
and (for the AT-SPI password source) python3-gi / gir1.2-atspi-2.0.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import fcntl
import io
import json
import os
import queue
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any, ClassVar

from PIL import Image
from Xlib import XK, X
from Xlib import display as xdisplay
from Xlib import error as xerror
from Xlib.ext import xtest

DISPLAY = ":99"
CHROMIUM_CANDIDATES = ("/usr/lib/chromium/chromium", "/usr/bin/chromium")
PROBE_STEP_S = 1.5  # bound on each probe sub-step
CDP_TIMEOUT_S = 10.0
LOAD_TIMEOUT_S = 20.0
START_DEADLINE_S = 30.0

# libatspi's GI binding flags get_collection_iface as deprecated; it is the only accessor.
warnings.filterwarnings("ignore", message=".*get_collection_iface.*")


def log(*parts: Any) -> None:
    with contextlib.suppress(Exception):
        print("[kiosk-agent]", *parts, file=sys.stderr, flush=True)


class OpError(Exception):
    """An error reported to the caller as {"ok": false, "error": message}."""


# --------------------------------------------------------------------------- CDP


class CDPError(OpError):
    pass


class _Waiter:
    """Collects CDP events matching a predicate (registered before the command that causes
    them, so nothing is lost)."""

    def __init__(self, predicate: Callable[[dict[str, Any]], bool]) -> None:
        self.predicate = predicate
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()


class CDP:
    """CDP over Chromium's --remote-debugging-pipe. Thread-safe calls; one reader thread."""

    def __init__(self, write_fd: int, read_fd: int) -> None:
        self.write_fd = write_fd
        self.read_fd = read_fd
        os.set_blocking(write_fd, False)
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._next_id = 0
        self._pending: dict[int, list[Any]] = {}
        self._waiters: list[_Waiter] = []
        self.closed = False
        self.detached_sessions: set[str] = set()
        self._reader = threading.Thread(target=self._read_loop, name="cdp-reader", daemon=True)
        self._reader.start()

    def _read_loop(self) -> None:
        buf = bytearray()
        scan = 0
        try:
            while True:
                chunk = os.read(self.read_fd, 1 << 20)
                if not chunk:
                    break
                buf += chunk
                while True:
                    end = buf.find(b"\0", scan)
                    if end < 0:
                        scan = len(buf)
                        break
                    raw = bytes(buf[:end])
                    del buf[: end + 1]
                    scan = 0
                    try:
                        self._dispatch(json.loads(raw))
                    except Exception as exc:  # a bad message must not kill the reader
                        log("cdp: bad message:", exc)
        except OSError as exc:
            log("cdp: read failed:", exc)
        finally:
            self.closed = True
            with self._lock:
                pending = list(self._pending.values())
                waiters = list(self._waiters)
            for slot in pending:
                slot[0].set()
            for waiter in waiters:
                waiter.events.put(None)

    def _dispatch(self, msg: dict[str, Any]) -> None:
        if "id" in msg:
            with self._lock:
                slot = self._pending.pop(msg["id"], None)
            if slot is not None:
                slot[1] = msg
                slot[0].set()
            return
        if msg.get("method") == "Target.detachedFromTarget":
            sid = msg.get("params", {}).get("sessionId")
            if sid:
                self.detached_sessions.add(sid)
        with self._lock:
            waiters = list(self._waiters)
        for waiter in waiters:
            try:
                if waiter.predicate(msg):
                    waiter.events.put(msg)
            except Exception:
                pass

    def _write(self, data: bytes, deadline: float) -> None:
        with self._write_lock:
            view = memoryview(data)
            while view:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise CDPError("CDP pipe: write timed out")
                _, writable, _ = select.select([], [self.write_fd], [], remaining)
                if not writable:
                    continue
                try:
                    sent = os.write(self.write_fd, view)
                except BlockingIOError:
                    continue
                except OSError as exc:
                    raise CDPError(f"CDP pipe closed: {exc}") from exc
                view = view[sent:]

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout: float = CDP_TIMEOUT_S,
    ) -> dict[str, Any]:
        if self.closed:
            raise CDPError("the browser is gone (CDP pipe closed)")
        deadline = time.monotonic() + timeout
        slot: list[Any] = [threading.Event(), None]
        with self._lock:
            self._next_id += 1
            msg_id = self._next_id
            self._pending[msg_id] = slot
        msg: dict[str, Any] = {"id": msg_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        try:
            self._write(json.dumps(msg).encode() + b"\0", deadline)
            if not slot[0].wait(max(0.0, deadline - time.monotonic())):
                raise CDPError(f"{method}: no answer within {timeout:g} s")
        finally:
            with self._lock:
                self._pending.pop(msg_id, None)
        reply = slot[1]
        if reply is None:
            raise CDPError(f"{method}: the browser went away")
        if "error" in reply:
            err = reply["error"]
            raise CDPError(f"{method}: {err.get('message', err)}")
        return reply.get("result", {})

    def expect(self, predicate: Callable[[dict[str, Any]], bool]) -> _Waiter:
        waiter = _Waiter(predicate)
        with self._lock:
            self._waiters.append(waiter)
        return waiter

    def unexpect(self, waiter: _Waiter) -> None:
        with self._lock:
            if waiter in self._waiters:
                self._waiters.remove(waiter)


# --------------------------------------------------------------------------- AT-SPI


class Atspi:
    """Password fields through AT-SPI, on one dedicated thread (libatspi is not thread-safe),
    each lookup bounded by the caller. Collection.getMatches on the showing DOCUMENT_WEB
    nodes only (searching from the application root finds hidden browser-UI nodes)."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], Any], queue.Queue[Any]]] = queue.Queue()
        self._busy = threading.Event()
        self._mod: Any = None
        self._thread = threading.Thread(target=self._loop, name="atspi", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            fn, out = self._jobs.get()
            try:
                out.put((True, fn()))
            except Exception as exc:
                out.put((False, exc))
            finally:
                self._busy.clear()

    def run(self, fn: Callable[[], Any], timeout: float) -> Any:
        if self._busy.is_set():
            raise OpError("AT-SPI: a previous lookup is still stuck")
        self._busy.set()
        out: queue.Queue[Any] = queue.Queue()
        self._jobs.put((fn, out))
        try:
            ok, value = out.get(timeout=timeout)
        except queue.Empty:
            raise OpError(f"AT-SPI: no answer within {timeout:g} s") from None
        if not ok:
            raise OpError(f"AT-SPI: {value}")
        return value

    def _atspi(self) -> Any:
        if self._mod is None:
            import gi

            gi.require_version("Atspi", "2.0")
            from gi.repository import Atspi as mod  # type: ignore[attr-defined]

            mod.init()
            mod.set_timeout(1000, 2000)
            self._mod = mod
        return self._mod

    def _password_rects(self) -> list[list[int]]:
        A = self._atspi()
        from gi.repository import GLib  # type: ignore[attr-defined]

        ctx = GLib.MainContext.default()
        while ctx.iteration(False):  # drain queued D-Bus signals
            pass
        showing = A.StateSet.new([A.StateType.SHOWING])
        doc_rule = A.MatchRule.new(
            showing,
            A.CollectionMatchType.ALL,
            {},
            A.CollectionMatchType.ALL,
            [A.Role.DOCUMENT_WEB],
            A.CollectionMatchType.ANY,
            [],
            A.CollectionMatchType.ALL,
            False,
        )
        pw_rule = A.MatchRule.new(
            showing,
            A.CollectionMatchType.ALL,
            {},
            A.CollectionMatchType.ALL,
            [A.Role.PASSWORD_TEXT],
            A.CollectionMatchType.ANY,
            [],
            A.CollectionMatchType.ALL,
            False,
        )
        desktop = A.get_desktop(0)
        rects: list[list[int]] = []
        found_doc = False
        for i in range(desktop.get_child_count()):
            app = desktop.get_child_at_index(i)
            if app is None:
                continue
            name = (app.get_name() or "").lower()
            if "chrom" not in name:
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


# --------------------------------------------------------------------------- page JS

# Password fields (type=password, or masked with -webkit-text-security) in the page, open
# shadow roots and same-origin frames, clipped to the viewport, in screen pixels.
PROBE_JS = r"""
(() => {
  const dpr = window.devicePixelRatio || 1;
  const offX = window.screenX + Math.max(0, window.outerWidth - window.innerWidth);
  const offY = window.screenY + Math.max(0, window.outerHeight - window.innerHeight);
  const vw = window.innerWidth, vh = window.innerHeight;
  const rects = [];
  let frames = 0, blocked = 0;
  const isSecret = (el) => {
    if (el.tagName === 'INPUT' && (el.type || '').toLowerCase() === 'password') return true;
    try {
      const s = getComputedStyle(el);
      const t = s.webkitTextSecurity || s.getPropertyValue('-webkit-text-security');
      return !!t && t !== 'none';
    } catch (e) { return false; }
  };
  const visit = (root, ox, oy, depth) => {
    if (depth > 8) return;
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_ELEMENT);
    let el = root.nodeType === 1 ? root : walker.nextNode();
    while (el) {
      if (el.shadowRoot) visit(el.shadowRoot, ox, oy, depth + 1);
      if ((el.tagName === 'INPUT' || el.isContentEditable) && isSecret(el)) {
        const r = el.getBoundingClientRect();
        const s = getComputedStyle(el);
        if (r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && s.display !== 'none') {
          const x1 = Math.max(0, ox + r.left), y1 = Math.max(0, oy + r.top);
          const x2 = Math.min(vw, ox + r.right), y2 = Math.min(vh, oy + r.bottom);
          if (x2 > x1 && y2 > y1) rects.push([x1, y1, x2 - x1, y2 - y1]);
        }
      }
      if (el.tagName === 'IFRAME' || el.tagName === 'FRAME') {
        frames++;
        try {
          const doc = el.contentDocument;
          if (doc && doc.documentElement) {
            const r = el.getBoundingClientRect();
            const fx = ox + r.left + el.clientLeft, fy = oy + r.top + el.clientTop;
            visit(doc.documentElement, fx, fy, depth + 1);
          } else { blocked++; }
        } catch (e) { blocked++; }
      }
      el = walker.nextNode();
    }
  };
  if (document.documentElement) visit(document.documentElement, 0, 0, 0);
  return {
    rects: rects.map(([x, y, w, h]) => [
      Math.floor((offX + x) * dpr), Math.floor((offY + y) * dpr),
      Math.ceil(w * dpr), Math.ceil(h * dpr)]),
    frames, blocked, url: location.href, title: document.title,
  };
})()
"""


RAF2_JS = "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(1))))"


# --------------------------------------------------------------------------- agent


class Kiosk:
    def __init__(self) -> None:
        self.started = False
        self.width = 0
        self.height = 0
        self.procs: list[subprocess.Popen[bytes]] = []
        self.chromium: subprocess.Popen[bytes] | None = None
        self.chromium_log: collections.deque[str] = collections.deque(maxlen=200)
        self.d: Any = None
        self.root: Any = None
        self.cdp: CDP | None = None
        self.session: str | None = None
        self.target_id: str | None = None
        self.sandbox = False
        self.atspi: Atspi | None = None
        self.tmp = ""
        self._spare: list[int] = []
        self._spare_assigned: collections.OrderedDict[int, int] = collections.OrderedDict()
        self.verbose = os.environ.get("KIOSK_AGENT_VERBOSE") == "1"

    # ---------------------------------------------------------------- start

    def op_start(self, req: dict[str, Any]) -> dict[str, Any]:
        if self.started:
            raise OpError("already started")
        try:
            return self._start(req)
        except BaseException:
            self.shutdown()  # a failed start leaves nothing running; start may be retried
            raise

    def _start(self, req: dict[str, Any]) -> dict[str, Any]:
        t0 = time.monotonic()
        width, height = int(req.get("width") or 1280), int(req.get("height") or 800)
        if not (320 <= width <= 4096 and 240 <= height <= 4096):
            raise OpError(f"bad size {width}x{height}")
        self.width, self.height = width, height
        proxy = req.get("proxy")
        ca_pem = req.get("ca_pem")
        url = req.get("url")
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

        self._start_xvfb(deadline)
        bus = self._start_dbus(deadline)
        if ca_pem:
            self._trust_ca(home, ca_pem)
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
        no_sandbox_reason = None
        try:
            self._launch_chromium(env, proxy, sandbox=True, deadline=deadline)
            self.sandbox = True
        except OpError as exc:
            if "No usable sandbox" not in str(exc):
                raise
            no_sandbox_reason = str(exc)
            log("Chromium's sandbox is unusable here; retrying with --no-sandbox")
            self._launch_chromium(env, proxy, sandbox=False, deadline=deadline)
            self.sandbox = False
        self._focus_browser_window(deadline)
        self.atspi = Atspi()
        self.started = True
        out: dict[str, Any] = {"chromium_sandbox": self.sandbox}
        if no_sandbox_reason:
            out["sandbox_error"] = no_sandbox_reason[:300]
        if url:
            nav = self._navigate(str(url), max(1.0, deadline - time.monotonic()))
            out["url"], out["error_text"] = nav["url"], nav["error_text"]
        out["ms"] = round((time.monotonic() - t0) * 1000, 1)
        return out

    def _start_xvfb(self, deadline: float) -> None:
        proc = subprocess.Popen(
            [
                "Xvfb",
                DISPLAY,
                "-screen",
                "0",
                f"{self.width}x{self.height}x24",
                "-noreset",
                "-nolisten",
                "tcp",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=None if self.verbose else subprocess.DEVNULL,
        )
        self.procs.append(proc)
        last: Exception | None = None
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise OpError(f"Xvfb exited with status {proc.returncode}")
            try:
                self.d = xdisplay.Display(DISPLAY)
                break
            except Exception as exc:  # not listening yet: poll the condition
                last = exc
                time.sleep(0.01)
        else:
            raise OpError(f"Xvfb did not come up: {last}")
        self.root = self.d.screen().root
        if not self.d.has_extension("XTEST"):
            raise OpError("the X server has no XTEST extension")
        self._init_spare_keycodes()

    def _start_dbus(self, deadline: float) -> str:
        env = dict(os.environ, DISPLAY=DISPLAY)
        proc = subprocess.Popen(
            ["dbus-daemon", "--session", "--nofork", "--nopidfile", "--print-address=1"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=None if self.verbose else subprocess.DEVNULL,
            env=env,
        )
        self.procs.append(proc)
        assert proc.stdout is not None
        line = b""
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise OpError("dbus-daemon did not print its address")
            ready, _, _ = select.select([proc.stdout], [], [], remaining)
            if ready:
                ch = os.read(proc.stdout.fileno(), 1)
                if not ch:
                    raise OpError(f"dbus-daemon exited ({proc.poll()})")
                line += ch
        return line.decode().strip()

    def _trust_ca(self, home: str, ca_pem: str) -> None:
        if shutil.which("certutil") is None:
            raise OpError("certutil is missing (libnss3-tools)")
        nssdb = os.path.join(home, ".pki", "nssdb")
        os.makedirs(nssdb, exist_ok=True)
        ca_file = os.path.join(self.tmp, "corral-ca.pem")
        with open(ca_file, "w") as f:
            f.write(ca_pem)
        db = f"sql:{nssdb}"
        if not os.path.exists(os.path.join(nssdb, "cert9.db")):
            self._run_bounded(["certutil", "-d", db, "-N", "--empty-password"])
        self._run_bounded(
            ["certutil", "-d", db, "-A", "-t", "C,,", "-n", "corral-egress-ca", "-i", ca_file]
        )

    @staticmethod
    def _run_bounded(argv: list[str]) -> None:
        try:
            done = subprocess.run(argv, capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise OpError(f"{argv[0]} timed out") from None
        if done.returncode != 0:
            tail = done.stderr.decode(errors="replace")[-300:]
            raise OpError(f"{' '.join(argv[:2])} failed: {tail}")

    def _chromium_binary(self) -> str:
        for path in CHROMIUM_CANDIDATES:
            if os.access(path, os.X_OK):
                return path
        raise OpError("chromium is not installed")

    def _launch_chromium(
        self, env: dict[str, str], proxy: str | None, *, sandbox: bool, deadline: float
    ) -> None:
        profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=self.tmp)
        argv = [
            self._chromium_binary(),
            "--kiosk",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-default-apps",
            "--disable-dev-shm-usage",
            "--disable-pings",
            "--disable-breakpad",
            "--disable-crash-reporter",
            "--disable-session-crashed-bubble",
            "--hide-crash-restore-bubble",
            "--disable-infobars",
            "--noerrdialogs",
            "--password-store=basic",
            "--media-router=0",
            "--disable-features=Translate,MediaRouter,OptimizationHints,AutofillServerCommunication",
            "--window-position=0,0",
            f"--window-size={self.width},{self.height}",
            f"--user-data-dir={profile}",
            "--force-renderer-accessibility",
            "--remote-debugging-pipe",
            # wheel scrolls land at once: a screenshot right after shows the final position
            "--disable-smooth-scrolling",
        ]
        if proxy:
            argv.append(f"--proxy-server={proxy}")
        if not sandbox:
            argv.append("--no-sandbox")
        argv.append("about:blank")

        to_chrome_r, to_chrome_w = os.pipe()
        from_chrome_r, from_chrome_w = os.pipe()
        # The child's ends, moved to fds >= 10 so the dup2 onto 3/4 below cannot clobber them.
        child_in_hi = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD_CLOEXEC, 10)
        child_out_hi = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD_CLOEXEC, 10)

        def map_fds() -> None:
            os.dup2(child_in_hi, 3)
            os.dup2(child_out_hi, 4)

        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=env,
                pass_fds=(3, 4),
                preexec_fn=map_fds,
                start_new_session=True,
            )
        finally:
            for fd in (to_chrome_r, from_chrome_w, child_in_hi, child_out_hi):
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.chromium = proc
        self.chromium_log.clear()
        threading.Thread(
            target=self._pump_stderr, args=(proc,), name="chromium-stderr", daemon=True
        ).start()
        cdp = CDP(to_chrome_w, from_chrome_r)
        try:
            self._attach(cdp, deadline)
        except OpError as exc:
            text = "\n".join(self.chromium_log)
            self._stop_chromium()
            if "No usable sandbox" in text:
                line = next(ln for ln in self.chromium_log if "No usable sandbox" in ln)
                raise OpError(line[line.index("No usable sandbox") :]) from exc
            raise OpError(f"Chromium did not start: {exc}; last output: {text[-600:]}") from exc
        self.cdp = cdp

    def _pump_stderr(self, proc: subprocess.Popen[bytes]) -> None:
        """Drain Chromium's stderr continuously (so it never blocks on it); keep the tail."""
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode(errors="replace").rstrip()
            self.chromium_log.append(line)
            if self.verbose or "No usable sandbox" in line or "FATAL" in line:
                log("chromium:", line[:500])

    def _attach(self, cdp: CDP, deadline: float) -> None:
        """Attach (flatten) to the first page target; poll for it with a deadline."""
        assert self.chromium is not None
        while True:
            if self.chromium.poll() is not None or cdp.closed:
                # give the stderr pump a moment to catch the final message
                end = time.monotonic() + 1.0
                while time.monotonic() < end and not any(
                    "sandbox" in line for line in self.chromium_log
                ):
                    time.sleep(0.02)
                raise OpError(f"chromium exited (status {self.chromium.poll()})")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise OpError("no page target before the deadline")
            try:
                targets = cdp.call("Target.getTargets", timeout=min(2.0, remaining))
            except CDPError:
                continue
            pages = [t for t in targets.get("targetInfos", []) if t.get("type") == "page"]
            if pages:
                break
            time.sleep(0.02)
        target = pages[0]["targetId"]
        sid = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        cdp.call("Page.enable", session=sid)
        cdp.call("Page.setLifecycleEventsEnabled", {"enabled": True}, session=sid)
        self.session, self.target_id = sid, target

    def _browser_windows(self) -> list[Any]:
        wins = []
        for win in self.root.query_tree().children:
            try:
                attrs = win.get_attributes()
                if attrs.map_state != X.IsViewable or attrs.override_redirect:
                    continue
                geo = win.get_geometry()
            except xerror.XError:
                continue
            if geo.width > 1 and geo.height > 1:
                wins.append(win)
        return wins

    def _focus_browser_window(self, deadline: float) -> None:
        """No window manager: give the kiosk window the keyboard focus ourselves, once it is
        mapped (polled with a deadline), so keys work before any click."""
        while True:
            wins = self._browser_windows()
            if wins:
                break
            if time.monotonic() > deadline:
                log("no mapped browser window before the deadline; focus left as is")
                return
            time.sleep(0.01)
        win = wins[0]
        geo = win.get_geometry()
        if (geo.x, geo.y, geo.width, geo.height) != (0, 0, self.width, self.height):
            # Chromium sizes its window one pixel short of the screen; no WM will fix it.
            win.configure(x=0, y=0, width=self.width, height=self.height)
        win.set_input_focus(X.RevertToParent, X.CurrentTime)
        self.d.sync()

    def _page_session(self) -> str:
        """The attached page's session; re-attach to a page if it was closed/replaced."""
        cdp = self._cdp()
        if self.session and self.session not in cdp.detached_sessions:
            return self.session
        targets = cdp.call("Target.getTargets", timeout=PROBE_STEP_S)
        pages = [t for t in targets.get("targetInfos", []) if t.get("type") == "page"]
        if not pages:
            raise OpError("the browser has no page")
        target = pages[0]["targetId"]
        sid = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        cdp.call("Page.enable", session=sid)
        cdp.call("Page.setLifecycleEventsEnabled", {"enabled": True}, session=sid)
        self.session, self.target_id = sid, target
        return sid

    def _cdp(self) -> CDP:
        if self.cdp is None or self.cdp.closed:
            raise OpError("the browser is not running")
        return self.cdp

    def _stop_chromium(self) -> None:
        proc = self.chromium
        if proc is None:
            return
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        self.chromium = None

    def shutdown(self) -> None:
        self._stop_chromium()
        for proc in reversed(self.procs):
            with contextlib.suppress(Exception):
                proc.kill()
                proc.wait(timeout=3)
        self.procs = []
        if self.d is not None:
            with contextlib.suppress(Exception):
                self.d.close()
            self.d = None
        self.cdp = None
        self.session = None
        self.started = False

    def _require(self) -> None:
        if not self.started:
            raise OpError("not started: send op start first")

    # ---------------------------------------------------------------- screen

    def _grab_png(self) -> bytes:
        t0 = time.perf_counter()
        raw = self.root.get_image(0, 0, self.width, self.height, X.ZPixmap, 0xFFFFFFFF)
        t1 = time.perf_counter()
        img = Image.frombuffer("RGB", (self.width, self.height), raw.data, "raw", "BGRX", 0, 1)
        buf = io.BytesIO()
        img.save(buf, "PNG", compress_level=1)
        if self.verbose:
            log(f"grab {1000 * (t1 - t0):.1f} png {1000 * (time.perf_counter() - t1):.1f} ms")
        return buf.getvalue()

    def _count_windows(self) -> int:
        count = 0
        for win in self.root.query_tree().children:
            try:
                attrs = win.get_attributes()
                if attrs.map_state != X.IsViewable or attrs.override_redirect:
                    continue
                geo = win.get_geometry()
            except xerror.XError:
                continue  # destroyed meanwhile
            if geo.width <= 1 or geo.height <= 1:
                continue
            if geo.x >= self.width or geo.y >= self.height:
                continue
            if geo.x + geo.width <= 0 or geo.y + geo.height <= 0:
                continue
            count += 1
        return count

    def _focused_ok(self) -> bool:
        try:
            focus = self.d.get_input_focus().focus
            if isinstance(focus, int):  # None (0) or PointerRoot (1): the window under the pointer
                pointer = self.root.query_pointer()
                focus = pointer.child
                if not focus or isinstance(focus, int):
                    return False
            win = focus
            for _ in range(64):  # up to the top-level window
                tree = win.query_tree()
                parent = tree.parent
                if parent is None or isinstance(parent, int) or parent.id == self.root.id:
                    break
                win = tree.parent
            if win.id == self.root.id:
                return False
            attrs = win.get_attributes()
            return attrs.map_state == X.IsViewable
        except Exception:  # unreadable for any reason: the caller masks the whole image
            return False

    def _probe(self) -> dict[str, Any]:
        errors: list[str] = []
        out: dict[str, Any] = {
            "windows": 0,
            "focused_ok": False,
            "password_rects": [],
            "url": None,
            "title": None,
            "error": None,
        }
        try:
            out["windows"] = self._count_windows()
        except Exception as exc:
            errors.append(f"windows: {exc}")
        out["focused_ok"] = self._focused_ok()
        dom_ok = False
        try:
            sid = self._page_session()
            res = self._cdp().call(
                "Runtime.evaluate",
                {"expression": PROBE_JS, "returnByValue": True, "timeout": 1000},
                session=sid,
                timeout=PROBE_STEP_S,
            )
            if "exceptionDetails" in res:
                raise OpError(res["exceptionDetails"].get("text", "exception"))
            value = res.get("result", {}).get("value") or {}
            out["password_rects"] = [[int(v) for v in r] for r in value.get("rects", [])]
            out["url"], out["title"] = value.get("url"), value.get("title")
            dom_ok = True
            if value.get("blocked"):
                # cross-origin frames the DOM probe cannot see into: AT-SPI must cover them
                dom_ok = False
                errors.append(f"dom: {value['blocked']} cross-origin frame(s) not inspectable")
        except Exception as exc:
            errors.append(f"dom: {exc}")
        if not dom_ok:
            try:
                assert self.atspi is not None
                rects = self.atspi.password_rects(PROBE_STEP_S)
                known = out["password_rects"]
                out["password_rects"] = known + [r for r in rects if r not in known]
                errors.clear()  # AT-SPI covered what the DOM could not
            except Exception as exc:
                errors.append(f"atspi: {exc}")
        if out["url"] is None:
            try:
                info = self._page_info(PROBE_STEP_S)
                out["url"], out["title"] = info["url"], info["title"]
            except Exception as exc:
                errors.append(f"page: {exc}")
        out["error"] = "; ".join(errors) if errors else None
        return out

    def op_probe(self, req: dict[str, Any]) -> dict[str, Any]:
        self._require()
        return self._probe()

    def op_screenshot(self, req: dict[str, Any]) -> dict[str, Any]:
        self._require()
        t0 = time.perf_counter()
        before = self._probe()
        t1 = time.perf_counter()
        png = self._grab_png()
        t2 = time.perf_counter()
        after = self._probe()
        t3 = time.perf_counter()
        if self.verbose:
            ms = [round(1000 * (b - a), 1) for a, b in ((t0, t1), (t1, t2), (t2, t3))]
            log("screenshot ms: probe, grab+png, probe =", ms)
        # The image lies between the two probes: mask whatever either saw.
        probe = dict(after)
        rects = list(before["password_rects"])
        rects += [r for r in after["password_rects"] if r not in rects]
        probe["password_rects"] = rects
        probe["windows"] = max(before["windows"], after["windows"])
        probe["focused_ok"] = before["focused_ok"] and after["focused_ok"]
        probe["error"] = before["error"] or after["error"]
        if before["url"] != after["url"] and not probe["error"]:
            probe["error"] = "the page changed while the screenshot was taken"
        return {
            "png": base64.b64encode(png).decode(),
            "width": self.width,
            "height": self.height,
            "probe": probe,
        }

    # ---------------------------------------------------------------- input

    def _init_spare_keycodes(self) -> None:
        first = self.d.display.info.min_keycode
        count = self.d.display.info.max_keycode - first + 1
        mapping = self.d.get_keyboard_mapping(first, count)
        self._spare = [first + i for i, syms in enumerate(mapping) if not any(syms)]
        self._keysyms_per_code = len(mapping[0]) if mapping else 2

    def _xy(self, req: dict[str, Any]) -> tuple[int, int]:
        try:
            x, y = int(req["x"]), int(req["y"])
        except (KeyError, TypeError, ValueError):
            raise OpError("x and y must be integers") from None
        if not (0 <= x < self.width and 0 <= y < self.height):
            raise OpError(f"({x}, {y}) is outside the {self.width}x{self.height} screen")
        return x, y

    def op_click(self, req: dict[str, Any]) -> dict[str, Any]:
        self._require()
        x, y = self._xy(req)
        button = {"left": 1, "middle": 2, "right": 3}.get(str(req.get("button") or "left"))
        if button is None:
            raise OpError("button must be left or right")
        double = req.get("double") in (True, "true", 1)
        xtest.fake_input(self.d, X.MotionNotify, x=x, y=y)
        for _ in range(2 if double else 1):
            xtest.fake_input(self.d, X.ButtonPress, button)
            xtest.fake_input(self.d, X.ButtonRelease, button)
        self.d.flush()
        return {}

    def op_scroll(self, req: dict[str, Any]) -> dict[str, Any]:
        self._require()
        x, y = self._xy(req)
        direction = str(req.get("direction") or "down")
        if direction not in ("up", "down"):
            raise OpError("direction must be up or down")
        amount = int(req.get("amount") or 3)
        if not 1 <= amount <= 100:
            raise OpError("amount must be 1..100")
        button = 4 if direction == "up" else 5
        xtest.fake_input(self.d, X.MotionNotify, x=x, y=y)
        for _ in range(amount):
            xtest.fake_input(self.d, X.ButtonPress, button)
            xtest.fake_input(self.d, X.ButtonRelease, button)
        self.d.flush()
        return {}

    @staticmethod
    def _char_keysym(ch: str) -> int:
        if ch in "\n\r":
            return XK.XK_Return
        if ch == "\t":
            return XK.XK_Tab
        cp = ord(ch)
        if 0x20 <= cp <= 0x7E or 0xA0 <= cp <= 0xFF:
            return cp
        return 0x01000000 | cp

    def _keycode_for(self, keysym: int, new_map: dict[int, int]) -> tuple[int, bool] | None:
        """(keycode, needs shift) for keysym in the current map, or None."""
        if keysym in self._spare_assigned:
            self._spare_assigned.move_to_end(keysym)
            return self._spare_assigned[keysym], False
        if keysym in new_map:
            return new_map[keysym], False
        for code, index in self.d.keysym_to_keycodes(keysym):
            if index in (0, 1):
                return code, index == 1
        return None

    def op_type(self, req: dict[str, Any]) -> dict[str, Any]:
        """XTest key events. Characters without a keycode get a spare keycode remapped for
        them (kept assigned afterwards, least recently used reassigned first, never reverted
        while the events may still be in flight); beyond the spare pool, CDP
        Input.insertText carries the rest of the text."""
        self._require()
        text = req.get("text")
        if not isinstance(text, str) or not text:
            raise OpError("text must be a non-empty string")
        shift = self.d.keysym_to_keycode(XK.XK_Shift_L)
        plan: list[tuple[int, bool]] = []
        new_map: dict[int, int] = {}
        in_use: set[int] = set()
        overflow_at: int | None = None
        for pos, ch in enumerate(text):
            keysym = self._char_keysym(ch)
            found = self._keycode_for(keysym, new_map)
            if found is None:
                free = [
                    c
                    for c in self._spare
                    if c not in self._spare_assigned.values() and c not in new_map.values()
                ]
                if free:
                    code = free[0]
                else:
                    # reuse the least recently used assignment not needed by this text
                    victims = [k for k, c in self._spare_assigned.items() if c not in in_use]
                    if not victims:
                        overflow_at = pos
                        break
                    code = self._spare_assigned.pop(victims[0])
                new_map[keysym] = code
                found = (code, False)
            in_use.add(found[0])
            plan.append(found)
        if new_map:
            for keysym, code in new_map.items():
                syms = [keysym, keysym] + [0] * max(0, self._keysyms_per_code - 2)
                self.d.change_keyboard_mapping(code, [syms])
                self._spare_assigned[keysym] = code
            self.d.sync()
        for code, needs_shift in plan:
            if needs_shift:
                xtest.fake_input(self.d, X.KeyPress, shift)
            xtest.fake_input(self.d, X.KeyPress, code)
            xtest.fake_input(self.d, X.KeyRelease, code)
            if needs_shift:
                xtest.fake_input(self.d, X.KeyRelease, shift)
        self.d.flush()
        out: dict[str, Any] = {}
        if overflow_at is not None:
            self.d.sync()
            self._cdp().call(
                "Input.insertText", {"text": text[overflow_at:]}, session=self._page_session()
            )
            out["inserted_via_cdp"] = len(text) - overflow_at
        return out

    KEY_ALIASES: ClassVar[dict[str, str]] = {
        "enter": "Return",
        "return": "Return",
        "esc": "Escape",
        "escape": "Escape",
        "del": "Delete",
        "delete": "Delete",
        "backspace": "BackSpace",
        "tab": "Tab",
        "space": "space",
        "pageup": "Prior",
        "page_up": "Prior",
        "pagedown": "Next",
        "page_down": "Next",
        "up": "Up",
        "down": "Down",
        "left": "Left",
        "right": "Right",
        "home": "Home",
        "end": "End",
        "insert": "Insert",
        "plus": "plus",
        "minus": "minus",
    }
    MODIFIERS: ClassVar[dict[str, int]] = {
        "ctrl": XK.XK_Control_L,
        "control": XK.XK_Control_L,
        "shift": XK.XK_Shift_L,
        "alt": XK.XK_Alt_L,
        "meta": XK.XK_Super_L,
        "super": XK.XK_Super_L,
        "win": XK.XK_Super_L,
        "cmd": XK.XK_Super_L,
    }

    def _key_keysym(self, name: str) -> int:
        if len(name) == 1:
            return self._char_keysym(name)
        candidates = [self.KEY_ALIASES.get(name.lower(), name), name, name.capitalize()]
        for cand in candidates:
            keysym = XK.string_to_keysym(cand)
            if keysym:
                return keysym
        raise OpError(f"unknown key {name!r}")

    def op_key(self, req: dict[str, Any]) -> dict[str, Any]:
        self._require()
        spec = req.get("key")
        if not isinstance(spec, str) or not spec.strip():
            raise OpError("key must be a non-empty string")
        parts = spec.strip().split("+")
        if parts[-1] == "" and len(parts) >= 2:  # "ctrl++" means ctrl and plus
            parts = [*parts[:-2], "plus"]
        mods: list[int] = []
        for part in parts[:-1]:
            keysym = self.MODIFIERS.get(part.strip().lower())
            if keysym is None:
                raise OpError(f"unknown modifier {part!r}")
            mods.append(self.d.keysym_to_keycode(keysym))
        keysym = self._key_keysym(parts[-1].strip())
        found = self._keycode_for(keysym, {})
        if found is None:
            raise OpError(f"key {parts[-1]!r} has no keycode on this keyboard")
        code, needs_shift = found
        shift = self.d.keysym_to_keycode(XK.XK_Shift_L)
        if needs_shift and shift not in mods:
            mods.append(shift)
        for mod in mods:
            xtest.fake_input(self.d, X.KeyPress, mod)
        xtest.fake_input(self.d, X.KeyPress, code)
        xtest.fake_input(self.d, X.KeyRelease, code)
        for mod in reversed(mods):
            xtest.fake_input(self.d, X.KeyRelease, mod)
        self.d.flush()
        return {}

    # ---------------------------------------------------------------- browser

    def _page_info(self, timeout: float) -> dict[str, Any]:
        cdp = self._cdp()
        self._page_session()
        info = cdp.call("Target.getTargetInfo", {"targetId": self.target_id}, timeout=timeout)
        ti = info.get("targetInfo", {})
        return {"url": ti.get("url"), "title": ti.get("title")}

    def _navigate(self, url: str, timeout: float) -> dict[str, Any]:
        cdp = self._cdp()
        sid = self._page_session()
        waiter = cdp.expect(
            lambda m: (
                m.get("sessionId") == sid
                and m.get("method") in ("Page.lifecycleEvent", "Page.loadEventFired")
            )
        )
        try:
            res = cdp.call("Page.navigate", {"url": url}, session=sid, timeout=timeout)
            error_text = res.get("errorText") or None
            loader, frame = res.get("loaderId"), res.get("frameId")
            loaded = loader is None  # same-document navigation: no load to wait for
            deadline = time.monotonic() + min(timeout, LOAD_TIMEOUT_S)
            while not loaded:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    ev = waiter.events.get(timeout=remaining)
                except queue.Empty:
                    break
                if ev is None:
                    raise OpError("the browser went away while loading")
                params = ev.get("params", {})
                if ev["method"] == "Page.lifecycleEvent":
                    loaded = (
                        params.get("name") == "load"
                        and params.get("loaderId") == loader
                        and params.get("frameId") == frame
                    )
        finally:
            cdp.unexpect(waiter)
        if loaded:
            self._wait_frames(sid)
        info = self._page_info(PROBE_STEP_S)
        out = {"url": info["url"], "title": info["title"], "error_text": error_text}
        if not loaded:
            out["load_timeout"] = True
        return out

    def _wait_frames(self, sid: str) -> None:
        """After load, wait (bounded) until the renderer has produced two frames: input sent
        before the new page's first frame reached the compositor can be dropped (a wheel
        right after a navigation was lost ~1 time in 4 without this)."""
        with contextlib.suppress(OpError):
            self._cdp().call(
                "Runtime.evaluate",
                {
                    "expression": RAF2_JS,
                    "awaitPromise": True,
                    "returnByValue": True,
                },
                session=sid,
                timeout=PROBE_STEP_S,
            )

    def op_navigate(self, req: dict[str, Any]) -> dict[str, Any]:
        self._require()
        url = req.get("url")
        if not isinstance(url, str) or not url:
            raise OpError("url must be a non-empty string")
        return self._navigate(url, LOAD_TIMEOUT_S)

    def op_page(self, req: dict[str, Any]) -> dict[str, Any]:
        self._require()
        return self._page_info(CDP_TIMEOUT_S)

    def op_eval(self, req: dict[str, Any]) -> dict[str, Any]:
        self._require()
        expr = req.get("expression")
        if not isinstance(expr, str):
            raise OpError("expression must be a string")
        res = self._cdp().call(
            "Runtime.evaluate",
            {"expression": expr, "returnByValue": True, "awaitPromise": True},
            session=self._page_session(),
        )
        if "exceptionDetails" in res:
            details = res["exceptionDetails"]
            desc = details.get("exception", {}).get("description") or details.get("text")
            raise OpError(f"evaluation failed: {desc}")
        return {"value": res.get("result", {}).get("value")}


# --------------------------------------------------------------------------- main loop


def write_response(obj: dict[str, Any]) -> None:
    data = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
    out = sys.stdout.buffer
    out.write(data)
    out.flush()


def main() -> int:
    kiosk = Kiosk()
    ops: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
        "start": kiosk.op_start,
        "screenshot": kiosk.op_screenshot,
        "probe": kiosk.op_probe,
        "click": kiosk.op_click,
        "type": kiosk.op_type,
        "key": kiosk.op_key,
        "scroll": kiosk.op_scroll,
        "navigate": kiosk.op_navigate,
        "page": kiosk.op_page,
        "eval": kiosk.op_eval,
    }

    def on_term(signum: int, frame: Any) -> None:
        kiosk.shutdown()
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    log("ready")
    try:
        for raw in sys.stdin.buffer:
            raw = raw.strip()
            if not raw:
                continue
            req_id: Any = None
            try:
                req = json.loads(raw)
                if not isinstance(req, dict):
                    raise OpError("a request must be a JSON object")
                req_id = req.get("id")
                handler = ops.get(req.get("op"))  # type: ignore[arg-type]
                if handler is None:
                    raise OpError(f"unknown op {req.get('op')!r}")
                result = handler(req)
                write_response({"id": req_id, "ok": True, **result})
            except OpError as exc:
                write_response({"id": req_id, "ok": False, "error": str(exc)})
            except json.JSONDecodeError as exc:
                write_response({"id": None, "ok": False, "error": f"bad JSON: {exc}"})
            except Exception as exc:  # never die on one bad request
                log("op failed:", repr(exc))
                write_response({"id": req_id, "ok": False, "error": f"{type(exc).__name__}: {exc}"})
    finally:
        kiosk.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
