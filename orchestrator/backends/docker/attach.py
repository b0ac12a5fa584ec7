"""An engine's hijacked connection (attach or exec, tty off), read by worker threads.

The SDK's `frames_iter` blocks a thread in `poll()` on the socket's descriptor, then
`recv()`. Closing such a socket safely takes two steps: `shutdown` wakes a thread
already in `poll()` and makes any later one see the end at once; the descriptor itself
is released only once no reader thread holds it. Closed while a thread had registered it
for `poll()` but not yet polled, its number could be handed to the next socket the
process opens, and the thread would wait on that stranger's socket for good (seen as a
worker thread left blocked in `frames_iter_no_tty` when a gateway stopped).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

from docker.utils.socket import frames_iter


class AttachSocket:
    """One hijacked socket: its frames for one reader thread at a time, sends on the raw
    socket, and a close that never releases the descriptor under a reader."""

    def __init__(self, sock: Any) -> None:
        self.sock = sock  # the SDK's object (a SocketIO or a socket)
        self.raw: socket.socket = getattr(sock, "_sock", sock)
        self._frames: Iterator[tuple[int, bytes]] = frames_iter(sock, tty=False)  # type: ignore[no-untyped-call]
        self._lock = threading.Lock()
        self._reading = False
        self.closed = False

    def next_frame(self) -> tuple[int, bytes] | None:
        """The next (stream, data) frame, None at the end (blocking: a worker thread's)."""
        with self._lock:
            if self.closed:
                return None
            self._reading = True
        try:
            return next(self._frames, None)
        finally:
            with self._lock:
                self._reading = False
                release = self.closed
            if release:  # closed while this thread read: the descriptor is this thread's
                self._release()

    def close(self) -> None:
        """Shut the socket down now (a reader wakes, or sees the end); release the
        descriptor now, or as the reader in flight returns."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            release = not self._reading
        with contextlib.suppress(OSError):
            self.raw.shutdown(socket.SHUT_RDWR)
        if release:
            self._release()

    def _release(self) -> None:
        with contextlib.suppress(OSError):
            self.raw.close()
        with contextlib.suppress(OSError):
            self.sock.close()
