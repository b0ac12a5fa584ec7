"""x11vnc on the kiosk's display, for the operators' live view and take over (SPEC S6.2).

It listens on a unix socket inside the container only: no TCP port, IPv4 or IPv6. The
gateway reaches the socket through `vnc_relay.py`, run with `docker exec` (stdin/stdout
carry the RFB bytes), so nothing is published and no host path is mounted.

x11vnc is optional to the kiosk: if it does not start or dies, every other op still works,
and the `start` answer and the `vnc` op say what happened.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from typing import Any

from .common import log

SOCKET_PATH = "/tmp/corral-vnc.sock"
READY_TIMEOUT_S = 5.0

# Each flag is a decision (docs/kiosk-internals.md, "Live view"):
FLAGS = (
    # listening: the unix socket only
    "-rfbport", "0",  # no IPv4 TCP listener
    "-rfbportv6", "0",  # no IPv6 listener either (libvncserver opens :::5900 without it)
    "-no6",
    "-noipv6",
    "-nolookup",  # never resolve a name
    # who may connect: whoever reaches the socket (the gateway, through docker exec)
    "-nopw",
    "-shared",  # several operators may watch; a non-shared ClientInit never drops the others
    "-forever",  # a viewer leaving does not stop the server
    # nothing outside the RFB stream may steer it
    "-norc",  # no ~/.x11vncrc
    "-noremote",  # no X11VNC_REMOTE control commands (any X client could set them)
    "-novncconnect",  # no reverse connections asked for through the VNC_CONNECT property
    "-nocmds",  # never run an external command
    # no clipboard either way: a password pasted during a take over would stay in the X
    # selection after hand back, where the AI could paste it into a field and read it
    "-nosel",
    # the picture: plain scanline polling, no heuristics that can leave stale regions
    "-noxdamage",  # DAMAGE rectangles are only hints and can lag behind the screen
    "-nowf",  # no wireframe guesses for window moves (there is no window manager)
    "-noscr",  # no scroll detection through the RECORD extension
    "-nonc",  # no client-side caching (it enlarges the framebuffer the viewer sees)
    "-nobell",
    "-quiet",
)  # fmt: skip


def argv(display: str, path: str = SOCKET_PATH) -> list[str]:
    return ["x11vnc", "-display", display, "-unixsock", path, *FLAGS]


class Vnc:
    """The x11vnc process: started with the display, watched, never fatal to the kiosk."""

    def __init__(self, *, verbose: bool = False, path: str = SOCKET_PATH) -> None:
        self.verbose = verbose
        self.path = path
        self.proc: subprocess.Popen[bytes] | None = None
        self.error: str | None = None
        self._ready = False

    def start(self, display: str) -> None:
        """Launch x11vnc (it comes up while the rest of the kiosk starts; `wait_ready`
        checks it). A failure to launch is recorded, not raised."""
        self.stop()
        self.error = None
        self._ready = False
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)  # a stale socket from an earlier x11vnc
        try:
            self.proc = subprocess.Popen(
                argv(display, self.path),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=None if self.verbose else subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            self.error = f"x11vnc could not be started: {exc}"
            log(self.error)

    def wait_ready(self, deadline: float) -> None:
        """Poll until the socket accepts a connection, the process exits or the deadline."""
        while self.proc is not None and not self._ready:
            if self.proc.poll() is not None:
                self.error = f"x11vnc exited with status {self.proc.returncode}"
                log(self.error)
                return
            if self._connectable():
                self._ready = True
                return
            if time.monotonic() > deadline:
                self.error = "x11vnc did not open its socket in time"
                log(self.error)
                return
            time.sleep(0.01)

    def _connectable(self) -> bool:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.settimeout(0.2)
            probe.connect(self.path)
        except OSError:
            return False
        finally:
            probe.close()
        return True

    def status(self) -> dict[str, Any]:
        """Whether x11vnc runs and serves its socket; its memory; what went wrong."""
        proc = self.proc
        running = proc is not None and proc.poll() is None
        error = self.error
        if proc is not None and not running:
            error = f"x11vnc exited with status {proc.returncode}"
        elif proc is None and error is None:
            error = "x11vnc is not started"
        return {
            "running": running,
            "ready": running and self._ready,
            "socket": self.path,
            "pid": proc.pid if running and proc is not None else None,
            "rss_kib": _rss_kib(proc.pid) if running and proc is not None else None,
            "error": error,
        }

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(Exception):
            proc.kill()
            proc.wait(timeout=3)


def _rss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None
