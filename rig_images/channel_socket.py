"""The channel on a socket of its own, when corral gives one (docs/kiosk-internals.md,
"The channel's own socket").

corral's Docker backend may bind-mount one unix socket into the container and name it in
CORRAL_CHANNEL: the main process connects to it first thing and makes it its stdin and
stdout (`take`), so the rest of the process speaks its lines (or relays its pipe) as it
always did, and the bytes no longer cross the engine's attach (dockerd and the
container's shim) on the way. Without CORRAL_CHANNEL (another backend, gVisor) nothing
changes: stdin and stdout are the engine's attach stream.

Only the first connection is served: the gateway accepts one and closes its listener at
once. The main process is the only process the container runs when it connects.
"""

from __future__ import annotations

import os
import socket

VARIABLE = "CORRAL_CHANNEL"


def take() -> None:
    """Connect to the channel's socket, if one is given, and make it stdin and stdout."""
    path = os.environ.pop(VARIABLE, "")  # the processes this one starts are not told
    if not path:
        return
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    os.dup2(sock.fileno(), 0)
    os.dup2(sock.fileno(), 1)
    sock.close()
