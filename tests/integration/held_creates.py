"""A fault injector for the engine's socket: an engine slow to answer a container create.

`HeldCreates` listens on a unix socket of its own and passes every byte through to the
real engine, both ways, except that each container create request after the first
`let_through` ones is held until `release()`. A held request is then sent as it came
even if its client has gone meanwhile, and the engine answers it (to nobody): a create
in flight when its sender died, landing late. Not a fake engine: every call is the real
engine's; only the timing of creates is ours."""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path

ENGINE_SOCKET = "/var/run/docker.sock"


def _is_create(chunk: bytes) -> bool:
    request_line = chunk.split(b"\r\n", 1)[0]
    return request_line.startswith(b"POST ") and b"/containers/create" in request_line


def _whole_request(client: socket.socket, chunk: bytes) -> bytes:
    """`chunk` read on until it holds the request's headers and its whole body (the
    client may send them in several writes): a held request is one the client finished
    sending, so its sender may die and the engine still gets all of it."""
    while b"\r\n\r\n" not in chunk:
        more = client.recv(65536)
        if not more:  # the client closed mid-headers: pass on what came
            return chunk
        chunk += more
    head, body = chunk.split(b"\r\n\r\n", 1)
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        more = client.recv(65536)
        if not more:
            break
        body += more
    return head + b"\r\n\r\n" + body


class HeldCreates:
    def __init__(self, path: Path, let_through: int = 1, engine: str = ENGINE_SOCKET) -> None:
        self.path = path
        self.url = f"unix://{path}"
        self.held = threading.Event()  # a create is being held
        self._released = threading.Event()
        self._let_through = let_through
        self._engine = engine
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)

    def __enter__(self) -> HeldCreates:
        self._server.bind(str(self.path))
        self._server.listen(16)
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *_: object) -> None:
        self.release()
        with self._lock:
            for sock in [self._server, *self._sockets]:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def release(self) -> None:
        self._released.set()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self._server.accept()
                engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                engine.connect(self._engine)
                with self._lock:
                    self._sockets += [client, engine]
                threading.Thread(target=self._up, args=(client, engine), daemon=True).start()
                threading.Thread(target=self._down, args=(engine, client), daemon=True).start()

    def _hold(self, client: socket.socket, chunk: bytes) -> bytes:
        """The chunk to send on: a create past `let_through` is read whole, then held."""
        if not _is_create(chunk):
            return chunk
        with self._lock:
            self._let_through -= 1
            hold = self._let_through < 0
        if hold:
            chunk = _whole_request(client, chunk)
            self.held.set()
            self._released.wait()
        return chunk

    def _up(self, client: socket.socket, engine: socket.socket) -> None:
        """Client to engine. A client that closed leaves the engine side open: what was
        sent is still answered."""
        with contextlib.suppress(OSError):
            while chunk := client.recv(65536):
                engine.sendall(self._hold(client, chunk))

    def _down(self, engine: socket.socket, client: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := engine.recv(65536):
                with contextlib.suppress(OSError):  # its client may be gone: drop the answer
                    client.sendall(chunk)
        with contextlib.suppress(OSError):
            client.close()
