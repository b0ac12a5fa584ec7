"""Relay between this process's stdin/stdout and x11vnc's unix socket (vnc.SOCKET_PATH).

The gateway runs it with `docker exec -i` (tty off): what it writes on the exec's stdin
goes to x11vnc, what x11vnc answers comes back on stdout. No TCP port and no host path
are involved. It ends, closing both sides, as soon as either side closes: the viewer left
(stdin at its end) or x11vnc hung up.

Standard library only; run as a file: `python3 /opt/corral/kiosk_agent/vnc_relay.py [SOCKET]`.
When nothing answers on the socket it first starts x11vnc (`vnc.ensure_server`, on the
agents' display, with the flags every x11vnc here gets): the kiosk starts none until a
viewer comes. One thread per direction, so neither side can stall the other. Bytes only:
nothing is logged, parsed or kept.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time

# Run as a file: its package is importable from the folder above (vnc and common import
# the standard library only; xserver, which imports Xlib, is not imported).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from kiosk_agent.common import DISPLAY
from kiosk_agent.vnc import READY_TIMEOUT_S, SOCKET_PATH, ensure_server

CHUNK = 64 * 1024


def _stdin_to_socket(sock: socket.socket, done: threading.Event) -> None:
    try:
        while True:
            data = os.read(0, CHUNK)
            if not data:
                break
            sock.sendall(data)
    except OSError:
        pass
    finally:
        done.set()


def _socket_to_stdout(sock: socket.socket, done: threading.Event) -> None:
    try:
        while True:
            data = sock.recv(CHUNK)
            if not data:
                break
            view = memoryview(data)
            while view:
                view = view[os.write(1, view) :]
    except OSError:
        pass
    finally:
        done.set()


def main(argv: list[str]) -> int:
    path = argv[1] if len(argv) > 1 else SOCKET_PATH
    started = ensure_server(DISPLAY, path, time.monotonic() + READY_TIMEOUT_S)
    if started.error:
        print(f"vnc_relay: {started.error}", file=sys.stderr, flush=True)
        return 1
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as exc:
        print(f"vnc_relay: cannot connect to {path}: {exc}", file=sys.stderr, flush=True)
        return 1
    done = threading.Event()
    for pump in (_stdin_to_socket, _socket_to_stdout):
        threading.Thread(target=pump, args=(sock, done), daemon=True).start()
    done.wait()
    # One side ended: end the other at once (the reader threads are daemons; exiting the
    # process closes stdin, stdout and the socket).
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
    return 0


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    os._exit(code)  # do not wait for a reader thread blocked in read(2)
