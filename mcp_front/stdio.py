"""`corral mcp`'s stdin and stdout, read and written on the event loop (issue 23 item 9).

The MCP SDK's stdio transport reads each line of stdin in a worker thread, and writes and
flushes each answer in two more: three hand-overs between threads per call, each paid
again, and more, when the machine is busy. When stdin and stdout are pipes or sockets
(how an MCP client starts a stdio server), corral hands the SDK's transport its own two
streams instead (`stdio_server(stdin=..., stdout=...)`, the SDK's way to pass streams):
non-blocking descriptors the event loop waits on. Anything else (a terminal, a file)
keeps the SDK's own streams.

As the SDK does with its own, fd 0 and fd 1 are pointed away while serving (0 at the null
device, 1 at stderr), so neither a child process nor a stray print can write into the
protocol or read a request; the wire is served from private duplicates, and fd 0 and
fd 1 are put back (blocking again) on the way out.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import stat
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import anyio

T = TypeVar("T")

READ_BYTES = 64 * 1024


async def _unblocked(fd: int, op: Callable[[], T], ready: Callable[[int], Awaitable[None]]) -> T:
    """`op` on non-blocking `fd`, waiting on the loop (`ready`) while it would block."""
    while True:
        try:
            return op()
        except (BlockingIOError, InterruptedError):
            await ready(fd)


def _pipe_or_socket(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class LineReader:
    """The lines of a non-blocking descriptor, as text (what the SDK's transport iterates:
    one JSON-RPC message per line). The last line may lack its line end."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer known to hold no line end (a line can be MBs)
        self._ended = False

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> str:
        while (end := self._buffer.find(b"\n", self._scanned)) < 0:
            if self._ended:
                if not self._buffer:
                    raise StopAsyncIteration
                end = len(self._buffer) - 1
                break
            self._scanned = len(self._buffer)
            await self._fill()
        line = bytes(self._buffer[: end + 1])
        del self._buffer[: end + 1]
        self._scanned = 0
        return line.decode("utf-8", errors="replace")

    async def _fill(self) -> None:
        read = functools.partial(os.read, self.fd, READ_BYTES)
        data = await _unblocked(self.fd, read, anyio.wait_readable)
        self._ended = not data
        self._buffer += data


class Writer:
    """Writes that wait on the loop when the pipe is full, never in a thread. Each write
    goes out whole before it returns; flush has nothing left to do."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    async def write(self, text: str) -> None:
        view = memoryview(text.encode("utf-8"))
        while view:
            write = functools.partial(os.write, self.fd, view)
            written = await _unblocked(self.fd, write, anyio.wait_writable)
            view = view[written:]

    async def flush(self) -> None:
        return None


@contextlib.contextmanager
def claimed_stdio() -> Iterator[tuple[LineReader, Writer] | None]:
    """The wire's reader and writer on private non-blocking duplicates of fd 0 and fd 1,
    with fd 0 pointed at the null device and fd 1 at stderr until the block ends; None
    (nothing claimed) when either is not a pipe or a socket."""
    if not (_pipe_or_socket(0) and _pipe_or_socket(1)):
        yield None
        return
    sys.stdout.flush()
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
        os.set_blocking(wire_in, False)
        os.set_blocking(wire_out, False)
        yield LineReader(wire_in), Writer(wire_out)
    finally:
        os.close(null)
        sys.stdout.flush()
        for wire, fd in ((wire_in, 0), (wire_out, 1)):
            with contextlib.suppress(OSError):
                os.set_blocking(wire, True)  # the description is shared with fd `fd` again
                os.dup2(wire, fd)
            os.close(wire)
