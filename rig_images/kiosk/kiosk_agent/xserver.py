"""The processes under the desktop: Xvfb and a session D-Bus (AT-SPI is activated
through it). Each started process is appended to the caller's list at once, so a failed
start can still kill it."""

from __future__ import annotations

import os
import select
import subprocess
import time
from typing import Any

from Xlib import display as xdisplay
from Xlib import ext as xext

from .common import DISPLAY, OpError

# python-xlib imports and sets up a module for every extension the X server offers, at each
# Display(): ~1 MiB of every idle kiosk (issue 23 item 7). The agents use XTEST
# (kiosk_agent.xinput) and DAMAGE (kiosk_agent.damage) alone; `Display.has_extension`
# answers for the modules set up.
X_EXTENSIONS = ("XTEST", "DAMAGE")
xext.__extensions__ = [(name, mod) for name, mod in xext.__extensions__ if name in X_EXTENSIONS]


def start_xvfb(
    procs: list[subprocess.Popen[bytes]],
    width: int,
    height: int,
    *,
    verbose: bool,
    deadline: float,
    glx: bool = True,
) -> Any:
    """Start Xvfb on DISPLAY and return an Xlib display connected to it (polled until it
    answers, within the deadline). `glx=False` (the kiosk: Chromium draws in software)
    leaves out GLX, which would load Mesa: ~60 MiB less (issue 14)."""
    proc = subprocess.Popen(
        [
            "Xvfb",
            DISPLAY,
            "-screen",
            "0",
            f"{width}x{height}x24",
            "-noreset",
            "-nolisten",
            "tcp",
            *(() if glx else ("-extension", "GLX")),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=None if verbose else subprocess.DEVNULL,
    )
    procs.append(proc)
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise OpError(f"Xvfb exited with status {proc.returncode}")
        try:
            return xdisplay.Display(DISPLAY)
        except Exception as exc:  # not listening yet: poll the condition
            last = exc
            time.sleep(0.01)
    raise OpError(f"Xvfb did not come up: {last}")


def start_dbus(procs: list[subprocess.Popen[bytes]], *, verbose: bool, deadline: float) -> str:
    """Start a session dbus-daemon; return the address it prints."""
    env = dict(os.environ, DISPLAY=DISPLAY)
    proc = subprocess.Popen(
        ["dbus-daemon", "--session", "--nofork", "--nopidfile", "--print-address=1"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=None if verbose else subprocess.DEVNULL,
        env=env,
    )
    procs.append(proc)
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
