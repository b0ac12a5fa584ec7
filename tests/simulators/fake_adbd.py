"""A fake Android device: the adbd side of the ADB wire protocol over TCP, for tests.

The contract is AOSP's protocol.txt (CNXN/AUTH/OPEN/OKAY/WRTE/CLSE, 24-byte headers,
one OKAY per WRTE as flow control), SERVICES.TXT (`shell:`, `exec:`, `sync:`) and
SYNC.TXT (STAT, SEND/DATA/DONE, QUIT). A stock adb server attaches it with
`adb connect 127.0.0.1:PORT`; `adb-shell` talks to it directly. Behind the protocol is a
small device (`DeviceState`, tests/simulators/fake_android.py): packages, the
foreground app, files, the UI tree, the screen.

Modes for failure tests: `auth_required` (answers CNXN with AUTH and never accepts a
key: the adb server shows the device as unauthorized), `drop_on` (a command word that
makes the device vanish mid-call: the connection closes, later connects are refused).
It runs its own event loop in a thread so sync and async tests can both use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import struct
import threading
from dataclasses import dataclass, field

from tests.simulators.fake_android import DeviceState

A_CNXN, A_OPEN, A_OKAY, A_WRTE, A_CLSE, A_AUTH = (
    int.from_bytes(name, "little")
    for name in (b"CNXN", b"OPEN", b"OKAY", b"WRTE", b"CLSE", b"AUTH")
)
A_VERSION = 0x01000001
MAX_PAYLOAD = 256 * 1024
AUTH_TOKEN, AUTH_SIGNATURE, AUTH_RSAPUBLICKEY = 1, 2, 3
BANNER = (
    b"device::ro.product.name=corral_fake;ro.product.model=CorralFake;"
    b"ro.product.device=fake;features=cmd\x00"
)


def packet(command: int, arg0: int, arg1: int, data: bytes = b"") -> bytes:
    check = sum(data) & 0xFFFFFFFF
    header = struct.pack("<6I", command, arg0, arg1, len(data), check, command ^ 0xFFFFFFFF)
    return header + data


@dataclass
class _Stream:
    local: int
    remote: int
    service: str
    okay: asyncio.Event = field(default_factory=asyncio.Event)
    inbox: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)


class FakeAdbd:
    def __init__(self, device: DeviceState | None = None, *, auth_required: bool = False) -> None:
        self.device = device or DeviceState()
        self.auth_required = auth_required
        self.drop_on: str | None = None
        self.gone = False
        self.port = 0
        self.connections = 0
        self.services: list[str] = []  # every OPEN, in order
        self.auth_seen: list[int] = []
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Future[None]] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> FakeAdbd:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._listen(), self._loop)
        self.port = future.result(10)
        return self

    async def _listen(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    def vanish(self) -> None:
        """The device goes away: open connections close, new ones are refused."""
        asyncio.run_coroutine_threadsafe(self._vanish(), self._loop).result(10)

    async def _vanish(self) -> None:
        self.gone = True
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()

    def stop(self) -> None:
        async def shut() -> None:
            await self._vanish()
            if self._server is not None:
                self._server.close()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shut(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> FakeAdbd:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ one connection
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.gone:
            writer.close()
            return
        self.connections += 1
        self._writers.add(writer)
        streams: dict[int, _Stream] = {}
        next_id = 1
        host_max = MAX_PAYLOAD
        online = False
        try:
            while True:
                header = await reader.readexactly(24)
                command, arg0, arg1, length, _check, magic = struct.unpack("<6I", header)
                if magic != command ^ 0xFFFFFFFF:
                    return
                data = await reader.readexactly(length) if length else b""
                if command == A_CNXN:
                    host_max = max(4096, min(arg1, MAX_PAYLOAD))
                    if self.auth_required:
                        writer.write(packet(A_AUTH, AUTH_TOKEN, 0, os.urandom(20)))
                    else:
                        online = True
                        writer.write(packet(A_CNXN, A_VERSION, MAX_PAYLOAD, BANNER))
                elif command == A_AUTH:
                    self.auth_seen.append(arg0)
                    if arg0 == AUTH_SIGNATURE:  # never accepted: ask again
                        writer.write(packet(A_AUTH, AUTH_TOKEN, 0, os.urandom(20)))
                    # AUTH_RSAPUBLICKEY: a real device would show the prompt; nobody accepts
                elif not online:
                    continue
                elif command == A_OPEN:
                    service = data.rstrip(b"\x00").decode(errors="replace")
                    self.services.append(service)
                    stream = _Stream(next_id, arg0, service)
                    next_id += 1
                    streams[stream.local] = stream
                    writer.write(packet(A_OKAY, stream.local, stream.remote))
                    task = asyncio.ensure_future(self._run(stream, writer, host_max, streams))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
                elif command in (A_OKAY, A_WRTE, A_CLSE):
                    known = streams.pop(arg1, None) if command == A_CLSE else streams.get(arg1)
                    if known is None:
                        pass
                    elif command == A_OKAY:
                        known.okay.set()
                    elif command == A_WRTE:
                        writer.write(packet(A_OKAY, known.local, known.remote))
                        known.inbox.put_nowait(data)
                    else:
                        # the host closed the stream: close ours too, and say so (as adbd does)
                        known.inbox.put_nowait(None)
                        known.okay.set()
                        writer.write(packet(A_CLSE, known.local, known.remote))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _send(
        self, stream: _Stream, writer: asyncio.StreamWriter, host_max: int, data: bytes
    ) -> bool:
        """WRTE in chunks, each waiting for the host's OKAY (flow control)."""
        for start in range(0, len(data), host_max):
            stream.okay.clear()
            writer.write(
                packet(A_WRTE, stream.local, stream.remote, data[start : start + host_max])
            )
            await writer.drain()
            await stream.okay.wait()
            if writer.is_closing():
                return False
        return True

    async def _run(
        self,
        stream: _Stream,
        writer: asyncio.StreamWriter,
        host_max: int,
        streams: dict[int, _Stream],
    ) -> None:
        try:
            service = stream.service
            if service.startswith(("shell:", "exec:")):
                command = service.split(":", 1)[1]
                if self.drop_on is not None and self.drop_on in command.split():
                    await self._vanish()
                    return
                output = self.device.run_shell(command)
                await self._send(stream, writer, host_max, output)
            elif service == "sync:":
                await self._sync(stream, writer, host_max)
            if stream.local in streams:
                streams.pop(stream.local, None)
                writer.write(packet(A_CLSE, stream.local, stream.remote))
                await writer.drain()
        except (ConnectionError, OSError):
            pass

    # ------------------------------------------------------------------ sync:
    async def _sync(self, stream: _Stream, writer: asyncio.StreamWriter, host_max: int) -> None:
        buffer = bytearray()

        async def take(n: int) -> bytes | None:
            while len(buffer) < n:
                chunk = await stream.inbox.get()
                if chunk is None:
                    return None
                buffer.extend(chunk)
            out = bytes(buffer[:n])
            del buffer[:n]
            return out

        while True:
            head = await take(8)
            if head is None:
                return
            ident, length = head[:4], struct.unpack("<I", head[4:])[0]
            if ident == b"QUIT":
                return
            payload = await take(length)
            if payload is None:
                return
            path = payload.decode(errors="replace")
            if ident == b"STAT":
                mode, size = self.device.stat(path)
                await self._send(
                    stream, writer, host_max, b"STAT" + struct.pack("<III", mode, size, 0)
                )
            elif ident == b"SEND":
                target = path.rsplit(",", 1)[0]
                content = bytearray()
                while True:
                    chunk_head = await take(8)
                    if chunk_head is None:
                        return
                    kind, size = chunk_head[:4], struct.unpack("<I", chunk_head[4:])[0]
                    if kind == b"DONE":
                        break
                    data = await take(size)
                    if data is None:
                        return
                    content.extend(data)
                self.device.files[target] = bytes(content)
                await self._send(stream, writer, host_max, b"OKAY" + struct.pack("<I", 0))
            else:
                message = b"unsupported sync request"
                await self._send(
                    stream, writer, host_max, b"FAIL" + struct.pack("<I", len(message)) + message
                )
                return
