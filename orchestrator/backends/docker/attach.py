"""An engine's hijacked connection (attach or exec, tty off), read and written on the
event loop.

The engine multiplexes the process's stdout and stderr on the socket as frames: an
8-byte header (the stream: 1 stdout, 2 stderr; three zero bytes; the payload's length,
big-endian) and the payload (`Frames`, a pure parser). The socket is made non-blocking
and waited on with the loop's own readiness (`anyio.wait_readable`): no worker thread per
frame. Before, the SDK's `frames_iter` blocked a worker thread in `poll()` for each frame,
and each answer crossed threads twice: a kiosk click's answer paid that hand-over (tens of
microseconds idle, milliseconds on a loaded machine; issue 23 item 9), and a closed
socket had to outwait its reader thread before its descriptor could be released.

`close` tells the loop first (`anyio.notify_closing`: a task waiting to read or write
wakes with ClosedResourceError), then shuts the socket down and releases it: no thread
can hold its descriptor number, so none can wait on a stranger's socket that took it.
"""

from __future__ import annotations

import contextlib
import socket
import struct
from typing import Any

import anyio

HEADER = struct.Struct(">BxxxL")  # stream, 3 bytes of padding, payload length
RECV_BYTES = 256 * 1024
STDOUT = 1  # the stream number of a process's stdout in the engine's frames


class Frames:
    """The engine's multiplexed frames out of the bytes read so far (pure)."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def next(self) -> tuple[int, bytes] | None:
        """The next whole (stream, payload) frame, or None until more bytes come."""
        if len(self._buffer) < HEADER.size:
            return None
        stream, length = HEADER.unpack_from(self._buffer)
        end = HEADER.size + length
        if len(self._buffer) < end:
            return None
        payload = bytes(self._buffer[HEADER.size : end])
        del self._buffer[:end]
        return stream, payload


class AttachSocket:
    """One hijacked socket: its frames for one reading task at a time, writes that never
    block the loop, and a close that wakes whoever waits on it."""

    def __init__(self, sock: Any) -> None:
        self.sock = sock  # the SDK's object (a SocketIO or a socket)
        self.raw: socket.socket = getattr(sock, "_sock", sock)
        self.raw.setblocking(False)  # ours alone now: the SDK is done with it
        self._frames = Frames()
        self.closed = False

    async def next_frame(self) -> tuple[int, bytes] | None:
        """The next (stream, data) frame, None at the end (EOF, or closed). OSError when
        the connection failed; anyio.ClosedResourceError when closed while waiting."""
        while (frame := self._frames.next()) is None:
            if self.closed:
                return None
            try:
                data = self.raw.recv(RECV_BYTES)
            except (BlockingIOError, InterruptedError):
                await anyio.wait_readable(self.raw)
                continue
            if not data:
                return None  # the end (a torn frame at the end is dropped)
            self._frames.feed(data)
        return frame

    async def send(self, data: bytes) -> None:
        """Write all of `data`; a process that stops reading its stdin blocks this task,
        not a thread, and the caller's deadline cancels the wait."""
        view = memoryview(data)
        while view:
            if self.closed:
                raise OSError("the channel is closed")
            try:
                sent = self.raw.send(view)
            except (BlockingIOError, InterruptedError):
                await anyio.wait_writable(self.raw)
                continue
            view = view[sent:]

    def close(self) -> None:
        """Wake a task waiting on the socket, shut it down and release it (idempotent).
        On the event loop's thread."""
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(OSError, ValueError, RuntimeError):  # RuntimeError: no loop
            anyio.notify_closing(self.raw)
        with contextlib.suppress(OSError):
            self.raw.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.raw.close()
        with contextlib.suppress(OSError):
            self.sock.close()
