"""Debian's Chromium in kiosk mode, driven over CDP on a pipe: launch (with its own sandbox,
or without it when the kernel refuses), the attached page session, navigation, eval."""

from __future__ import annotations

import collections
import contextlib
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from typing import Any

from .cdp import CDP, CDPError
from .chromium import KIOSK_FLAGS, chromium_binary, is_browser_ui, is_ui_frame, spawn_with_pipe
from .common import PROBE_STEP_S, OpError, log
from .frames import FrameState
from .probe_js import track_secrets

LOAD_TIMEOUT_S = 20.0
PAINT_WAIT_S = 0.5  # after load, for the first paint to be presented (see _await_load)

RAF2_JS = "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(1))))"


WorldKey = tuple[str, str, str]  # (page session, main frame, loader): one document


class Browser:
    """One Chromium process and its CDP pipe; `session` is the attached page's."""

    def __init__(self, *, verbose: bool = False) -> None:
        self.verbose = verbose
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_tail: collections.deque[str] = collections.deque(maxlen=200)
        self.cdp: CDP | None = None
        self.session: str | None = None
        self.target_id: str | None = None
        self.sandbox = False
        self._world: tuple[WorldKey, int] | None = None
        # The main frame's viewport as last read, and in which world (viewport.py).
        self.viewport: tuple[int, dict[str, Any]] | None = None
        self.frame_state = FrameState()  # other frames' sessions and worlds (frames.py)

    def start(
        self,
        env: dict[str, str],
        proxy: str | None,
        *,
        width: int,
        height: int,
        tmp: str,
        deadline: float,
    ) -> str | None:
        """Launch with Chromium's sandbox, or without it when it is unusable here; return
        why it was unusable (None when the sandbox is on)."""
        no_sandbox_reason = None
        try:
            self._launch(env, proxy, sandbox=True, size=(width, height), tmp=tmp, deadline=deadline)
            self.sandbox = True
        except OpError as exc:
            if "No usable sandbox" not in str(exc):
                raise
            no_sandbox_reason = str(exc)
            log("Chromium's sandbox is unusable here; retrying with --no-sandbox")
            self._launch(
                env, proxy, sandbox=False, size=(width, height), tmp=tmp, deadline=deadline
            )
            self.sandbox = False
        return no_sandbox_reason

    def _launch(
        self,
        env: dict[str, str],
        proxy: str | None,
        *,
        sandbox: bool,
        size: tuple[int, int],
        tmp: str,
        deadline: float,
    ) -> None:
        width, height = size
        profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=tmp)
        argv = [
            chromium_binary(),
            *KIOSK_FLAGS,
            f"--window-size={width},{height}",
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

        proc, cdp = spawn_with_pipe(argv, env, stderr=subprocess.PIPE)
        self.proc = proc
        self.log_tail.clear()
        pump = threading.Thread(
            target=self._pump_stderr, args=(proc,), name="chromium-stderr", daemon=True
        )
        pump.start()
        try:
            self._attach(cdp, deadline)
        except OpError as exc:
            # Its process group killed and its stderr read to the end first: "No usable
            # sandbox" (which starts it again without one) may still be in the pipe.
            self.kill()
            pump.join(timeout=5)
            text = "\n".join(self.log_tail)
            if "No usable sandbox" in text:
                line = next(ln for ln in self.log_tail if "No usable sandbox" in ln)
                raise OpError(line[line.index("No usable sandbox") :]) from exc
            raise OpError(f"Chromium did not start: {exc}; last output: {text[-600:]}") from exc
        self.cdp = cdp

    def _pump_stderr(self, proc: subprocess.Popen[bytes]) -> None:
        """Drain Chromium's stderr continuously (so it never blocks on it); keep the tail."""
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode(errors="replace").rstrip()
            self.log_tail.append(line)
            if self.verbose or "No usable sandbox" in line or "FATAL" in line:
                log("chromium:", line[:500])

    def _attach(self, cdp: CDP, deadline: float) -> None:
        """Attach (flatten) to the first page target; poll for it with a deadline."""
        assert self.proc is not None
        while True:
            if self.proc.poll() is not None or cdp.closed:
                # give the stderr pump a moment to catch the final message
                end = time.monotonic() + 1.0
                while time.monotonic() < end and not any(
                    "sandbox" in line for line in self.log_tail
                ):
                    time.sleep(0.02)
                raise OpError(f"chromium exited (status {self.proc.poll()})")
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
        self._attach_to(cdp, pages[0]["targetId"])

    def _attach_to(self, cdp: CDP, target: str) -> str:
        sid: str = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        cdp.call("Page.enable", session=sid)
        cdp.call("Page.setLifecycleEventsEnabled", {"enabled": True}, session=sid)
        track_secrets(cdp, sid)
        self.session, self.target_id = sid, target
        return sid

    def fresh_page(self, deadline: float) -> None:
        """Leave one page, with a new blank document and no history: every other page
        closed, the attached one navigated to about:blank (a new document: nothing drawn or
        run before survives) and its history reset; cookies and cache cleared. Returns once
        the new document is loaded and drawn (`navigate`)."""
        cdp = self.live_cdp()
        timeout = max(1.0, deadline - time.monotonic())
        sid = self.page_session()
        targets = cdp.call("Target.getTargets", timeout=timeout).get("targetInfos", [])
        for info in targets:
            if info.get("type") == "page" and info.get("targetId") != self.target_id:
                cdp.call("Target.closeTarget", {"targetId": info["targetId"]}, timeout=timeout)
        self._world = None
        self.frame_state.clear()
        cdp.call("Storage.clearCookies", timeout=timeout)
        cdp.call("Network.clearBrowserCache", session=sid, timeout=timeout)
        if self.navigate("about:blank", timeout).get("load_timeout"):
            raise OpError("the blank page did not load")
        cdp.call("Page.resetNavigationHistory", session=sid, timeout=timeout)

    def settle(self, deadline: float) -> None:
        """Return once Chromium's HTTP cache is open. Chromium opens it about 2 s after
        its start, and the first `Network.clearBrowserCache` waits for it: a claim's page
        reset (`fresh_page`) right after a pool kiosk's boot took 1.95-2.05 s, the next ones
        1-2 ms, with ~150 ms of CPU in those 2 s (measured here). A pool kiosk settles
        before it joins the pool, so that its claim does not wait; it has loaded nothing
        (no way out until its claim), so there is nothing to clear yet."""
        timeout = max(1.0, deadline - time.monotonic())
        self.live_cdp().call(
            "Network.clearBrowserCache", session=self.page_session(), timeout=timeout
        )

    def live_cdp(self) -> CDP:
        if self.cdp is None or self.cdp.closed:
            raise OpError("the browser is not running")
        return self.cdp

    def page_session(self) -> str:
        """The attached page's session; re-attach to a page if it was closed/replaced."""
        cdp = self.live_cdp()
        if self.session and self.session not in cdp.detached_sessions:
            return self.session
        targets = cdp.call("Target.getTargets", timeout=PROBE_STEP_S)
        pages = [t for t in targets.get("targetInfos", []) if t.get("type") == "page"]
        if not pages:
            raise OpError("the browser has no page")
        return self._attach_to(cdp, pages[0]["targetId"])

    def targets(self, timeout: float) -> list[dict[str, Any]]:
        """The browser's page targets (tabs, popups: more than one means the screen may
        show one the probe is not attached to) and out-of-process iframes, without
        Chromium's own UI surfaces."""
        infos = self.live_cdp().call("Target.getTargets", timeout=timeout)
        return [
            t
            for t in infos.get("targetInfos", [])
            if (t.get("type") == "page" and not is_browser_ui(str(t.get("url", ""))))
            or (t.get("type") == "iframe" and not is_ui_frame(str(t.get("url", ""))))
        ]

    def frame_tree(self, timeout: float) -> dict[str, Any]:
        """The page's frame tree (`Page.getFrameTree`), cross-origin frames included."""
        tree: dict[str, Any] = self.live_cdp().call(
            "Page.getFrameTree", session=self.page_session(), timeout=timeout
        )
        return tree

    @staticmethod
    def frame_urls(tree: dict[str, Any]) -> list[str]:
        """The URL of every frame below the main one in `tree` (for a frame that failed to
        load, the URL it was asked to load too)."""
        urls: list[str] = []
        pending = list(tree["frameTree"].get("childFrames") or [])
        while pending:
            node = pending.pop()
            frame = node.get("frame") or {}
            for key in ("url", "unreachableUrl"):
                if frame.get(key):
                    urls.append(str(frame[key]))
            pending += node.get("childFrames") or []
        return urls

    def probe_world(self, timeout: float, tree: dict[str, Any] | None = None) -> int:
        """An isolated JavaScript world in the page's main frame: it shares the DOM but
        none of the page's globals. One per document (a navigation destroys it, and the
        frame's loader id says when one happened); worlds are not made per call, as they
        would pile up until the next navigation. `tree`: the frame tree, if the caller has
        just read it."""
        cdp = self.live_cdp()
        sid = self.page_session()
        if tree is None:
            tree = self.frame_tree(timeout)
        frame = tree["frameTree"]["frame"]
        key = self.world_key(sid, tree)
        if self._world is not None and self._world[0] == key:
            return self._world[1]
        world = cdp.call(
            "Page.createIsolatedWorld",
            {"frameId": frame["id"], "worldName": "corral-probe"},
            session=sid,
            timeout=timeout,
        )
        context = int(world["executionContextId"])
        self._world = (key, context)
        return context

    @staticmethod
    def world_key(sid: str, tree: dict[str, Any]) -> WorldKey:
        """Which document a world belongs to: the page session, the main frame and its
        loader (a navigation gives a new one), from the frame tree."""
        frame = tree["frameTree"]["frame"]
        return (sid, str(frame["id"]), str(frame.get("loaderId", "")))

    def cached_world(self) -> tuple[WorldKey, int] | None:
        """The probe's world last made, with its document's key (not checked here)."""
        return self._world

    def forget_world(self) -> None:
        """Drop the cached world (after an evaluation found it gone)."""
        self._world = None

    def page_info(self, timeout: float) -> dict[str, Any]:
        cdp = self.live_cdp()
        self.page_session()
        info = cdp.call("Target.getTargetInfo", {"targetId": self.target_id}, timeout=timeout)
        ti = info.get("targetInfo", {})
        return {"url": ti.get("url"), "title": ti.get("title")}

    def navigate(self, url: str, timeout: float) -> dict[str, Any]:
        """Load `url` in the page and wait for its `load`, then (bounded) for its first
        paint to be on the screen and two more frames: see `_await_load`."""
        cdp = self.live_cdp()
        sid = self.page_session()
        waiter = cdp.expect(
            lambda m: m.get("sessionId") == sid and m.get("method") == "Page.lifecycleEvent"
        )
        try:
            res = cdp.call("Page.navigate", {"url": url}, session=sid, timeout=timeout)
            error_text = res.get("errorText") or None
            loader, frame = res.get("loaderId"), res.get("frameId")
            loaded = loader is None  # same-document navigation: no load to wait for
            if not loaded:
                deadline = time.monotonic() + min(timeout, LOAD_TIMEOUT_S)
                # about:blank (a reset) paints nothing: only its load is waited for.
                paint = 0.0 if url == "about:blank" else PAINT_WAIT_S
                loaded = self._await_load(waiter, (loader, frame), deadline, paint)
        finally:
            cdp.unexpect(waiter)
        if loaded:
            self._wait_frames(sid)
        info = self.page_info(PROBE_STEP_S)
        out = {"url": info["url"], "title": info["title"], "error_text": error_text}
        if not loaded:
            out["load_timeout"] = True
        return out

    @staticmethod
    def _await_load(
        waiter: Any, document: tuple[Any, Any], deadline: float, paint_wait: float
    ) -> bool:
        """Whether the document (loaderId, frameId) fired `load` before `deadline`; after
        it, up to `paint_wait` seconds more for its `firstPaint`, which Chromium reports
        once that frame was presented. Until the new document's frames are on the screen,
        the compositor still scrolls the old one: a wheel right after `load` and two
        animation frames was lost 2 times in 100 under load, 0 in 300 with this wait
        (measured here). A page that paints nothing never reports it, hence the bound."""
        loaded = painted = False
        while not (loaded and painted):
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
            if (params.get("loaderId"), params.get("frameId")) != document:
                continue
            if params.get("name") == "load" and not loaded:
                loaded = True
                deadline = min(deadline, time.monotonic() + paint_wait)
            painted = painted or params.get("name") == "firstPaint"
        return loaded

    def _wait_frames(self, sid: str) -> None:
        """After load, wait (bounded) until the renderer has produced two frames: input sent
        before the new page's first frame reached the compositor can be dropped (a wheel
        right after a navigation was lost ~1 time in 4 without this)."""
        with contextlib.suppress(OpError):
            self.live_cdp().call(
                "Runtime.evaluate",
                {
                    "expression": RAF2_JS,
                    "awaitPromise": True,
                    "returnByValue": True,
                },
                session=sid,
                timeout=PROBE_STEP_S,
            )

    def evaluate(self, expr: str) -> dict[str, Any]:
        res = self.live_cdp().call(
            "Runtime.evaluate",
            {"expression": expr, "returnByValue": True, "awaitPromise": True},
            session=self.page_session(),
        )
        if "exceptionDetails" in res:
            details = res["exceptionDetails"]
            desc = details.get("exception", {}).get("description") or details.get("text")
            raise OpError(f"evaluation failed: {desc}")
        return {"value": res.get("result", {}).get("value")}

    def insert_text(self, text: str) -> None:
        self.live_cdp().call("Input.insertText", {"text": text}, session=self.page_session())

    def kill(self) -> None:
        proc = self.proc
        if proc is None:
            return
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        self.proc = None

    def close(self) -> None:
        """Kill Chromium and forget its pipe and page session."""
        self.kill()
        self.frame_state.clear()
        self.cdp = None
        self.session = None
