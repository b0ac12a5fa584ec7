"""Chromium's process, outside any one page: the binary, its kiosk flags, the egress CA in
its NSS db, and a process started with its DevTools protocol on a pipe (fds 3 and 4). The
kiosk agent's Browser and the desktop agent's codrive ops both start Chromium this way."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import urllib.parse

from .cdp import CDP
from .common import OpError

CHROMIUM_CANDIDATES = ("/usr/lib/chromium/chromium", "/usr/bin/chromium")

KIOSK_FLAGS = (
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
    # Memory (issue 14, docs/benchmarks.md): no spare renderer kept ahead, no
    # back/forward cache. (--in-process-gpu would save ~12 MiB more, but then
    # nothing the page draws reaches the X screen.)
    # Input before a new page's first frame: headful Chromium drops it (and holds
    # the old page's pixels meanwhile), so an agent's wheel or click right after a
    # navigation could vanish under load (test_kiosk_agent.py::test_scroll saw one).
    # As Playwright does: --allow-pre-commit-input, no PaintHolding. The click still
    # lands where the target check looked: both read the new page's DOM.
    # Memory (issue 23 item 7, measured on Chromium 156): a kiosk has no omnibox, yet
    # Chromium preloads its WebUI popups (the plain and the AI Mode one, both must go) in
    # a renderer of their own: without them, one renderer and ~12 MiB less per kiosk.
    "--disable-features=Translate,MediaRouter,OptimizationHints,AutofillServerCommunication,"
    "SpareRendererForSitePerProcess,BackForwardCache,PaintHolding,"
    "DropInputEventsWhilePaintHolding,WebUIOmniboxPopup,WebUIOmniboxAimPopup",
    "--allow-pre-commit-input",
    # Memory (issue 23 item 7): the network service in the browser process, not a
    # utility process of its own: ~15 MiB less per kiosk (measured, Chromium 156). The
    # container and its egress proxy stay the boundary; that process was not one.
    "--enable-features=NetworkServiceInProcess2",
    # Memory (issue 23 item 7, measured on Chromium 156): no GTK. Chromium loads GTK for
    # its native theme, dialogs and input method; a kiosk shows none of them (its policy
    # turns file dialogs and printing off; typing is XTest and CDP, tested without it):
    # ~3 MiB less in the browser process.
    "--ui-toolkit=fallback",
    # Memory: no GPU shader caches on disk (the profile is on the /tmp tmpfs, so in
    # memory); Chromium draws in software here. ~0.9 MiB less per kiosk.
    "--disable-gpu-shader-disk-cache",
    "--window-position=0,0",
)


def trust_ca(home: str, ca_pem: str, tmp: str) -> None:
    """Add ca_pem to the NSS db under home (Chromium reads it at start)."""
    if shutil.which("certutil") is None:
        raise OpError("certutil is missing (libnss3-tools)")
    nssdb = os.path.join(home, ".pki", "nssdb")
    os.makedirs(nssdb, exist_ok=True)
    ca_file = os.path.join(tmp, "corral-ca.pem")
    with open(ca_file, "w") as f:
        f.write(ca_pem)
    db = f"sql:{nssdb}"
    if not os.path.exists(os.path.join(nssdb, "cert9.db")):
        _run_bounded(["certutil", "-d", db, "-N", "--empty-password"])
    _run_bounded(["certutil", "-d", db, "-A", "-t", "C,,", "-n", "corral-egress-ca", "-i", ca_file])


def _run_bounded(argv: list[str]) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise OpError(f"{argv[0]} timed out") from None
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace")[-300:]
        raise OpError(f"{' '.join(argv[:2])} failed: {tail}")


def chromium_binary() -> str:
    for path in CHROMIUM_CANDIDATES:
        if os.access(path, os.X_OK):
            return path
    raise OpError("chromium is not installed")


def is_browser_ui(url: str) -> bool:
    """Chromium's own UI surfaces (the omnibox popup, ...) are WebUI page targets on
    `chrome://<name>.top-chrome/`: part of the browser window, not a tab."""
    parts = urllib.parse.urlsplit(url)
    return parts.scheme == "chrome" and parts.netloc.endswith(".top-chrome")


def is_ui_frame(url: str) -> bool:
    """A frame of the browser's own UI (its scheme cannot be opened by a page: the policy
    blocks chrome:// and devtools:// URLs)."""
    return urllib.parse.urlsplit(url).scheme in ("chrome", "chrome-untrusted", "devtools")


def spawn_with_pipe(
    argv: list[str], env: dict[str, str], *, stderr: int
) -> tuple[subprocess.Popen[bytes], CDP]:
    """Start `argv` (Chromium with --remote-debugging-pipe) in its own session with its
    DevTools pipe on fds 3 (in) and 4 (out); the process and our end of the pipe."""
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
            stderr=stderr,
            env=env,
            pass_fds=(3, 4),
            preexec_fn=map_fds,
            start_new_session=True,
        )
    finally:
        for fd in (to_chrome_r, from_chrome_w, child_in_hi, child_out_hi):
            with contextlib.suppress(OSError):
                os.close(fd)
    return proc, CDP(to_chrome_w, from_chrome_r)
