"""The front's HTTP/1.1 client for its hop to the gateway: requests written here, answers
read by httptools (llhttp, the C parser uvicorn reads the gateway's requests with) over
loopback connections kept from one call to the next.

Why not httpx here (it was used; it is still the client everywhere else): this hop is
plain HTTP/1.1 to our own gateway on loopback, with no TLS, proxy, redirect, cookie or auth
flow, and httpx's client with httpcore's pool cost about 0.4 ms a round trip for those
(0.62 against 0.23 ms with h11 alone, against one uvicorn, this machine): a sixth of a kiosk
click through MCP (issue 23 item 9, docs/benchmarks.md). Why not h11 (it was used after
httpx): its pure-Python state machine cost 62 microseconds per request and answer, against
2 for httptools (measured here, the same request and answer, back to back).

A request is one POST with a body of known length; its head is built from names and values
this package and the signer make, and any carriage return or line feed in them is refused.
A connection goes back to the idle list only once its answer was read to the end, the
parser says the gateway keeps it open, and nothing came after the answer; one cancelled or
failed half-way is closed. An idle connection is used again only within `IDLE_REUSE_S`
(under the gateway's 5 s keep-alive timeout, so a request never races the gateway closing
it); one the gateway has closed meanwhile (a restart) is readable at rest, and is dropped
before it is used.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import select
import socket
import time
import urllib.parse
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import httptools

RECEIVE_BYTES = 256 * 1024
KEEP_IDLE = 8  # idle connections kept per gateway address
# An idle connection is used again only this long: the gateway's uvicorn closes one idle
# for 5 s (its keep-alive timeout), and a request sent as it closes would be lost.
IDLE_REUSE_S = 4.0
MAX_HEAD_BYTES = 64 * 1024  # an answer's headers (the gateway's are a few hundred bytes)
Address = tuple[str, int]
_BREAKS = re.compile(r"[\r\n\x00]")


class GatewayHttpError(Exception):
    """The exchange with the gateway failed (closed, not HTTP, ...)."""


class GatewayUnreachable(GatewayHttpError):
    """No connection could be made (refused, or not within the connect timeout)."""


class GatewayTimeout(GatewayHttpError):
    """A piece of the answer (or the request's sending) took longer than its timeout."""


def address_of(url: str) -> Address:
    """(host, port) of an http:// URL (the gateway's base URL)."""
    return _address(urllib.parse.urlsplit(url))


def _address(parts: urllib.parse.SplitResult) -> Address:
    if parts.scheme != "http" or not parts.hostname:
        raise GatewayHttpError(f"not a plain http:// address: {parts.geturl()!r}")
    return parts.hostname, parts.port or 80


class _Answer:
    """What the parser has read of one answer (httptools' callbacks)."""

    def __init__(self) -> None:
        self.headers: dict[str, str] = {}
        self.pieces: deque[bytes] = deque()
        self.begun = 0  # answers begun: more than one means the gateway sent another
        self.head_bytes = 0
        self.head_done = False
        self.complete = False
        self.keep_alive = False  # read as the answer completes: the parser forgets it after
        self.parser: Any = None

    def on_message_begin(self) -> None:
        self.begun += 1

    def on_header(self, name: bytes, value: bytes) -> None:
        self.head_bytes += len(name) + len(value) + 4
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self.head_done = True

    def on_body(self, body: bytes) -> None:
        self.pieces.append(body)

    def on_message_complete(self) -> None:
        self.complete = True
        self.keep_alive = bool(self.parser.should_keep_alive())


@dataclass(eq=False)
class _Connection:
    """One kept connection: a non-blocking socket of its own, read and written directly
    and waited on with the loop's readiness only when it would block (issue 23 item 9: an
    anyio stream paid a checkpoint per send and a reader registration per receive); each
    answer read by a parser of its own."""

    sock: socket.socket
    answer: _Answer = field(default_factory=_Answer)
    idle_since: float = 0.0

    def start(self) -> None:
        """A new request and answer on this connection."""
        self.answer = _Answer()
        self.answer.parser = httptools.HttpResponseParser(self.answer)

    async def send(self, data: bytes, piece_s: float) -> None:
        view = memoryview(data)
        with _mapped(piece_s, "sending the request"):
            while view:
                try:
                    view = view[self.sock.send(view) :]
                except (BlockingIOError, InterruptedError):
                    await anyio.wait_writable(self.sock)

    async def head(self, piece_s: float) -> tuple[int, dict[str, str]]:
        """The answer's status and headers (names lower-cased)."""
        while not self.answer.head_done:
            await self._feed(piece_s)
        return self.answer.parser.get_status_code(), self.answer.headers

    async def piece(self, piece_s: float) -> bytes | None:
        """The body's next piece as it came; None at the answer's end."""
        while not self.answer.pieces:
            if self.answer.complete:
                return None
            await self._feed(piece_s)
        return self.answer.pieces.popleft()

    async def _feed(self, piece_s: float) -> None:
        data = await self._receive(piece_s)
        if not data:
            raise GatewayHttpError("the gateway closed the connection mid-answer")
        try:
            self.answer.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            raise GatewayHttpError(f"the gateway's answer could not be read: {exc}") from exc
        if self.answer.begun > 1:
            raise GatewayHttpError("the gateway sent more than one answer")
        if self.answer.head_bytes > MAX_HEAD_BYTES:
            raise GatewayHttpError(f"the gateway's headers passed {MAX_HEAD_BYTES} bytes")

    async def _receive(self, piece_s: float) -> bytes:
        """The next bytes (b"" at the end), waiting at most `piece_s` for them."""
        with _mapped(piece_s, "the answer"):
            while True:
                try:
                    return self.sock.recv(RECEIVE_BYTES)
                except (BlockingIOError, InterruptedError):
                    await anyio.wait_readable(self.sock)

    def reusable(self) -> bool:
        """The answer read to its end, the gateway keeps the connection, nothing after it."""
        return (
            self.answer.complete
            and self.answer.begun == 1
            and not self.answer.pieces
            and self.answer.keep_alive
        )

    def closed_at_rest(self) -> bool:
        """An idle connection that is readable was closed by the gateway (or holds bytes
        nobody asked for): not to be used."""
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    async def close(self) -> None:
        """Wake a task waiting on the socket, then release it (idempotent)."""
        if self.sock.fileno() < 0:
            return
        with contextlib.suppress(OSError, ValueError, RuntimeError):  # RuntimeError: no loop
            anyio.notify_closing(self.sock)
        self.sock.close()


def request_bytes(target: str, headers: list[tuple[str, str]], body: bytes) -> bytes:
    """A POST's bytes: its head (each name and value checked for line breaks) and body."""
    lines = [f"POST {target} HTTP/1.1"]
    for name, value in headers:
        if _BREAKS.search(name) or _BREAKS.search(value) or not name:
            raise GatewayHttpError(f"a header that cannot be sent: {name!r:.60}")
        lines.append(f"{name}: {value}")
    if _BREAKS.search(target) or " " in target:
        raise GatewayHttpError(f"a path that cannot be sent: {target!r:.100}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


async def _connect(address: Address) -> socket.socket:
    """A connected non-blocking socket to `address` (each of its addresses in turn)."""
    host, port = address
    failure = OSError(f"{host} has no address")
    for family, kind, proto, _, target in await anyio.getaddrinfo(
        host, port, type=socket.SOCK_STREAM
    ):
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            code = sock.connect_ex(target)
            if code in (errno.EINPROGRESS, errno.EAGAIN):
                await anyio.wait_writable(sock)
                code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                raise OSError(code, os.strerror(code))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except OSError as exc:
            failure = exc
            sock.close()
        except BaseException:
            sock.close()
            raise
    raise failure


@contextlib.contextmanager
def _mapped(timeout: float, what: str) -> Iterator[None]:
    try:
        with anyio.fail_after(timeout):
            yield
    except TimeoutError as exc:
        raise GatewayTimeout(f"{what} took longer than {timeout:g} s") from exc
    except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
        raise GatewayHttpError(f"the connection failed during {what}: {exc!r:.200}") from exc


@dataclass(eq=False)
class Reply:
    """An answer's status and headers (names lower-cased); its body read as it comes."""

    status: int
    headers: dict[str, str]
    _connection: _Connection
    _piece_s: float
    ended: bool = False

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's pieces as they arrive, each within the timeout."""
        while not self.ended:
            piece = await self._connection.piece(self._piece_s)
            if piece is None:
                self.ended = True
            else:
                yield piece

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])


class GatewayHttp:
    """POSTs to the gateway over kept connections (one per call in flight)."""

    def __init__(self, connect_timeout: float, idle_reuse_s: float = IDLE_REUSE_S) -> None:
        self.connect_timeout = connect_timeout
        self.idle_reuse_s = idle_reuse_s
        self.opened = 0  # connections made (for the tests and the benchmarks)
        self._idle: dict[Address, list[_Connection]] = {}

    def idle(self, url: str) -> int:
        return len(self._idle.get(address_of(url), []))

    @contextlib.asynccontextmanager
    async def post(
        self, url: str, body: bytes, headers: dict[str, str], piece_s: float
    ) -> AsyncIterator[Reply]:
        """POST `body` to `url`; the reply, its body to be read inside the block. Each piece
        (the request's sending, the head, each part of the body) within `piece_s`."""
        parts = urllib.parse.urlsplit(url)
        address = _address(parts)
        connection = await self._connection(address)
        kept = False
        try:
            head = [("Host", parts.netloc), ("Content-Length", str(len(body)))]
            data = request_bytes(parts.path or "/", [*head, *headers.items()], body)
            connection.start()
            await connection.send(data, piece_s)
            status, said = await connection.head(piece_s)
            reply = Reply(status, said, connection, piece_s)
            yield reply
            kept = reply.ended and connection.reusable()
        finally:
            if kept and len(self._idle.setdefault(address, [])) < KEEP_IDLE:
                connection.idle_since = time.monotonic()
                self._idle[address].append(connection)
            else:
                await connection.close()

    async def _connection(self, address: Address) -> _Connection:
        idle = self._idle.get(address, [])
        while idle:
            connection = idle.pop()
            fresh = time.monotonic() - connection.idle_since <= self.idle_reuse_s
            if fresh and not connection.closed_at_rest():
                return connection
            await connection.close()
        try:
            with anyio.fail_after(self.connect_timeout):
                sock = await _connect(address)
        except (OSError, TimeoutError) as exc:
            raise GatewayUnreachable(f"no connection to {address[0]}:{address[1]}") from exc
        self.opened += 1
        return _Connection(sock)

    async def aclose(self) -> None:
        for connections in self._idle.values():
            for connection in connections:
                await connection.close()
        self._idle.clear()

    async def __aenter__(self) -> GatewayHttp:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()


__all__ = ["GatewayHttp", "GatewayHttpError", "GatewayTimeout", "GatewayUnreachable", "Reply"]
