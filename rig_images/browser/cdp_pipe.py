"""The browser rig's main process: Debian's headless Chromium with its DevTools protocol
on a pipe, relayed on this process's stdin/stdout (docs/rigs.md, "The CDP channel").

Protocol on stdin/stdout (the gateway attaches to both):
1. The gateway writes one JSON line: {"proxy": "http://proxy:3128" | null,
   "ca_pem": "..." | null, "width": 1280, "height": 800}.
2. This process starts Chromium (with its own sandbox, or --no-sandbox when the host
   cannot give it one), checks that it answers on the pipe, and writes one JSON line:
   {"ok": true, "chromium_sandbox": bool, "ms": int} or {"ok": false, "error": "..."}.
3. From then on both directions are Chromium's pipe, byte for byte: CDP messages, each
   ended by a NUL byte. Nothing else is written to stdout; logs go to stderr.

Standard library only. No port is opened: Chromium gets --remote-debugging-pipe, never
--remote-debugging-port.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time

CHROMIUM = "/usr/lib/chromium/chromium"
HOME = os.environ.get("HOME", "/home/sandbox")
READY_DEADLINE = 30.0
PROBE_ID = 1  # our own Browser.getVersion, answered before the gateway's traffic starts


def log(message: str) -> None:
    sys.stderr.write(f"cdp_pipe: {message}\n")
    sys.stderr.flush()


def trust_ca(ca_pem: str) -> None:
    """Add ca_pem to the NSS db under HOME (Chromium reads it at start)."""
    nssdb = os.path.join(HOME, ".pki", "nssdb")
    os.makedirs(nssdb, exist_ok=True)
    ca_file = os.path.join("/tmp", "corral-ca.pem")
    with open(ca_file, "w") as fh:
        fh.write(ca_pem)
    db = f"sql:{nssdb}"
    if not os.path.exists(os.path.join(nssdb, "cert9.db")):
        subprocess.run(["certutil", "-d", db, "-N", "--empty-password"], check=True, timeout=10)
    subprocess.run(
        ["certutil", "-d", db, "-A", "-t", "C,,", "-n", "corral-egress-ca", "-i", ca_file],
        check=True,
        timeout=10,
    )


def argv(config: dict[str, object], *, sandbox: bool) -> list[str]:
    width, height = int(str(config.get("width", 1280))), int(str(config.get("height", 800)))
    args = [
        CHROMIUM,
        "--headless",
        "--remote-debugging-pipe",
        f"--user-data-dir={HOME}/profile",
        f"--window-size={width},{height}",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--disable-dev-shm-usage",
        "--disable-breakpad",
        "--disable-crash-reporter",
        "--password-store=basic",
        # No back/forward cache: `back` is then a navigation with its own load event. Input
        # is not dropped while a new page has drawn nothing yet (as in the kiosk).
        "--disable-features=Translate,MediaRouter,OptimizationHints,AutofillServerCommunication,"
        "BackForwardCache,PaintHolding,DropInputEventsWhilePaintHolding",
        # Page.captureScreenshot draws the page into a surface of its own rather than
        # waiting on the next frame of the view's: a 1280x800 capture 34 -> 26 ms here
        # (Playwright turns it on for every Chromium it launches; issue 23 item 4).
        "--enable-features=CDPScreenshotNewSurface",
        "--allow-pre-commit-input",
    ]
    proxy = config.get("proxy")
    if isinstance(proxy, str) and proxy:
        # Everything through the proxy, loopback included: it admits only pinned hosts.
        args += [f"--proxy-server={proxy}", "--proxy-bypass-list=<-loopback>"]
    else:
        # No allowlist: the container has no network; say so to Chromium as well.
        args += ["--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>"]
    if not sandbox:
        args.append("--no-sandbox")
    args.append("about:blank")
    return args


class Browser:
    def __init__(self, config: dict[str, object], *, sandbox: bool) -> None:
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()
        self.stderr_tail: list[str] = []

        def fds() -> None:
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.proc = subprocess.Popen(
            argv(config, sandbox=sandbox),
            pass_fds=(3, 4),
            preexec_fn=fds,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._stderr_reader = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr_reader.start()

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace").rstrip()
            self.stderr_tail = [*self.stderr_tail[-30:], line]
            if "No usable sandbox" in line or "FATAL" in line:
                log(line)

    def probe(self, deadline: float) -> None:
        """Ask Browser.getVersion on the pipe and wait for the answer (or Chromium's end)."""
        message = json.dumps({"id": PROBE_ID, "method": "Browser.getVersion"}).encode()
        os.write(self.to_chrome, message + b"\0")
        buffer = b""
        while time.monotonic() < deadline:
            chunk = os.read(self.from_chrome, 65536)
            if not chunk:
                # Its stderr read to the end first: "No usable sandbox" (which starts it
                # again without one) may still be in the pipe when the CDP pipe closes.
                code = self.proc.wait(timeout=5)
                self._stderr_reader.join(timeout=5)
                raise RuntimeError(
                    f"Chromium ended before answering (exit status {code}): "
                    + " | ".join(self.stderr_tail[-5:])
                )
            buffer += chunk
            while b"\0" in buffer:
                raw, _, buffer = buffer.partition(b"\0")
                if json.loads(raw).get("id") == PROBE_ID:
                    if buffer:
                        raise RuntimeError("Chromium sent more than its answer")
                    return
        raise RuntimeError("Chromium did not answer on its pipe in time")


def copy(source: int, target: int) -> None:
    while True:
        data = os.read(source, 1 << 16)
        if not data:
            return
        view = memoryview(data)
        while view:
            view = view[os.write(target, view) :]


def main() -> int:
    started = time.monotonic()
    stdin, stdout = 0, 1
    line = b""
    while not line.endswith(b"\n"):
        byte = os.read(stdin, 1)  # byte by byte: nothing after the line may be consumed
        if not byte:
            return 0
        line += byte
    config = json.loads(line)
    if config.get("ca_pem"):
        trust_ca(str(config["ca_pem"]))
    if shutil.which(CHROMIUM) is None:
        os.write(stdout, json.dumps({"ok": False, "error": "no Chromium"}).encode() + b"\n")
        return 1
    sandbox = True
    try:
        browser = Browser(config, sandbox=True)
        browser.probe(time.monotonic() + READY_DEADLINE)
    except RuntimeError as exc:
        if "No usable sandbox" not in str(exc):
            os.write(stdout, json.dumps({"ok": False, "error": str(exc)}).encode() + b"\n")
            return 1
        log("Chromium's sandbox is unusable here; starting it with --no-sandbox")
        sandbox = False
        browser = Browser(config, sandbox=False)
        browser.probe(time.monotonic() + READY_DEADLINE)
    ms = int((time.monotonic() - started) * 1000)
    ready = {"ok": True, "chromium_sandbox": sandbox, "ms": ms}
    os.write(stdout, json.dumps(ready).encode() + b"\n")
    down = threading.Thread(target=copy, args=(browser.from_chrome, stdout), daemon=True)
    down.start()
    copy(stdin, browser.to_chrome)  # the gateway closed stdin: end Chromium, then us
    browser.proc.terminate()
    try:
        browser.proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        browser.proc.kill()
    return 0


if __name__ == "__main__":
    import channel_socket  # /opt/corral/channel_socket.py (rig_images/channel_socket.py)

    channel_socket.take()  # the channel's own socket, when corral gives one
    sys.exit(main())
