"""x11vnc on the kiosk's display, for the operators' live view and take over (SPEC S6.2).

It listens on a unix socket inside the container only: no TCP port, IPv4 or IPv6. The
gateway reaches the socket through `vnc_relay.py`, run with `docker exec` (stdin/stdout
carry the RFB bytes), so nothing is published and no host path is mounted.

x11vnc is optional to the kiosk: if it does not start or dies, every other op still works,
and the `start` answer and the `vnc` op say what happened.

The kiosk starts it on demand: the relay (`vnc_relay.py`) starts it when nothing answers
on the socket, so a kiosk nobody watches runs none (~6 MiB less each) and one that died is
started again by the next viewer; the desktop rig starts it with its display. Whoever
starts it (the relay, the agent's `vnc` op) does so in `ensure_server`, under one lock
file, so two viewers arriving at once start one server.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import subprocess
import time
from typing import Any, NamedTuple

from .common import log

SOCKET_PATH = "/tmp/corral-vnc.sock"
LOCK_PATH = "/tmp/corral-vnc.lock"  # held while a server is being started
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


def connectable(path: str) -> bool:
    """Whether something accepts connections on the unix socket `path`."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(0.2)
        probe.connect(path)
    except OSError:
        return False
    finally:
        probe.close()
    return True


class Started(NamedTuple):
    """What `ensure_server` did: `proc` is the x11vnc it started (None: one already
    answered, or none could be started); `error` says why there is none."""

    proc: subprocess.Popen[bytes] | None = None
    error: str | None = None


def ensure_server(
    display: str, path: str, deadline: float | None, *, verbose: bool = False
) -> Started:
    """x11vnc answering on `path`: the one there, or one started now and waited for until
    `deadline` (monotonic; None: not waited for). Under LOCK_PATH, so a second caller waits
    for the first's server instead of replacing its socket."""
    if connectable(path):
        return Started()
    with open(LOCK_PATH, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if connectable(path):  # started by the caller that held the lock before us
            return Started()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a stale socket from an x11vnc that died
        try:
            proc = subprocess.Popen(
                argv(display, path),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=None if verbose else subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            return Started(error=f"x11vnc could not be started: {exc}")
        return Started(proc, None if deadline is None else _wait_for(proc, path, deadline))


def _wait_for(proc: subprocess.Popen[bytes], path: str, deadline: float) -> str | None:
    """Poll until the socket accepts a connection (None), the process exits or the
    deadline passes (why not)."""
    while not connectable(path):
        if proc.poll() is not None:
            return f"x11vnc exited with status {proc.returncode}"
        if time.monotonic() > deadline:
            return "x11vnc did not open its socket in time"
        time.sleep(0.01)
    return None


def server_pid(path: str) -> int | None:
    """The pid of the x11vnc serving `path` in this container, whoever started it."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                args = fh.read().split(b"\0")
        except OSError:
            continue
        if args and os.path.basename(args[0]) == b"x11vnc" and path.encode() in args:
            return int(entry)
    return None


class Vnc:
    """x11vnc as an agent sees it, whoever started it (the agent, or a viewer's relay);
    never fatal to the kiosk."""

    def __init__(self, *, verbose: bool = False, path: str = SOCKET_PATH) -> None:
        self.verbose = verbose
        self.path = path
        self.proc: subprocess.Popen[bytes] | None = None  # one this agent started
        self.error: str | None = None

    def start(self, display: str, deadline: float | None) -> None:
        """Make x11vnc answer (`ensure_server`), waiting for it until `deadline`; None:
        do not wait (it comes up while the caller starts the rest; `wait_ready` checks
        it). A failure is recorded, not raised."""
        started = ensure_server(display, self.path, deadline, verbose=self.verbose)
        if started.proc is not None:
            self.proc = started.proc  # ours to reap
        self.error = started.error
        if self.error:
            log(self.error)

    def wait_ready(self, deadline: float) -> None:
        """Wait for the x11vnc this agent started to open its socket (see `start`)."""
        if self.proc is not None and self.error is None:
            self.error = _wait_for(self.proc, self.path, deadline)
            if self.error:
                log(self.error)

    def status(self) -> dict[str, Any]:
        """Whether an x11vnc runs and serves the socket; its memory; what went wrong (None
        when none was ever started: no fault, the first viewer starts it)."""
        own = self.proc
        code = own.poll() if own is not None else None
        if own is not None and code is None:
            pid: int | None = own.pid  # ours and not reaped: running (or dying: asked again)
        else:
            pid = server_pid(self.path)  # one a viewer's relay started, if any
        error = None
        if pid is None:
            error = f"x11vnc exited with status {code}" if code is not None else self.error
        return {
            "running": pid is not None,
            "ready": pid is not None and connectable(self.path),
            "socket": self.path,
            "pid": pid,
            "rss_kib": _rss_kib(pid) if pid is not None else None,
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
