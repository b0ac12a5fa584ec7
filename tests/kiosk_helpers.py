"""Helpers for tests that drive a real kiosk through the gateway's own classes
(DockerBackend, KioskChannel, the exec stream): starting one, reading a process's output,
and a small RFB viewer that speaks to x11vnc over any byte transport."""

from __future__ import annotations

import struct
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio

from orchestrator.backends.channel import KioskChannel, load_seccomp
from orchestrator.backends.docker.backend import DockerBackend
from sandboxes.isolation import NON_ROOT, kiosk_spec
from sandboxes.rfb import set_encodings
from tests.images import DEFAULT_KIOSK_IMAGE

KIOSK_IMAGE = DEFAULT_KIOSK_IMAGE
START_DEADLINE = 60.0
CHANNEL_SOCKET = Path(__file__).resolve().parents[1] / "rig_images" / "channel_socket.py"


def taking_the_socket(argv: Sequence[str]) -> tuple[str, ...]:
    """A stand-in agent's command: the images' own `channel_socket.take` (its source, run
    with `python3 -c`: the sandbox image has no copy), then `argv` in its place."""
    code = CHANNEL_SOCKET.read_text() + (
        "\ntake()\nimport sys\nos.execvp(sys.argv[1], sys.argv[1:])\n"
    )
    return ("python3", "-c", code, *argv)


def data_url(html: str) -> str:
    return "data:text/html," + urllib.parse.quote(html)


@asynccontextmanager
async def running_kiosk(
    backend: DockerBackend, width: int, height: int, url: str | None = None
) -> AsyncIterator[tuple[KioskChannel, dict[str, object]]]:
    """A kiosk container as the gateway starts one (no network), its agent started;
    yields the channel and the start answer. Removed on exit."""
    spec = kiosk_spec(
        image=KIOSK_IMAGE,
        labels=backend.labels(kind="kiosk-test", agent="vnc", session="vnc"),
        network=None,
        seccomp=load_seccomp(),
    )
    channel = await KioskChannel.open(backend, spec)
    try:
        started = await channel.request(
            "start", START_DEADLINE, width=width, height=height, proxy=None, ca_pem=None, url=url
        )
        yield channel, started
    finally:
        with anyio.CancelScope(shield=True):
            await channel.close()


async def exec_output(backend: DockerBackend, container_id: str, argv: list[str]) -> bytes:
    """Run a command in the container (as the kiosk's user) and return its stdout."""
    stream = await backend.open_exec(container_id, argv, user=NON_ROOT)
    out = b""
    try:
        with anyio.fail_after(30):
            while (chunk := await stream.receive()) is not None:
                out += chunk
    finally:
        await stream.close()
    return out


# Counts the kiosk's processes whose command line names the relay (this script's own
# command line spells the name in two pieces, so it does not count itself).
COUNT_RELAYS = """
import os
name = b"vnc_" + b"relay.py"
found = 0
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            found += name in fh.read()
    except OSError:
        pass
print(found)
"""


async def relay_processes(backend: DockerBackend, container_id: str) -> int:
    return int(await exec_output(backend, container_id, ["python3", "-c", COUNT_RELAYS]))


# Live processes whose program (argv[0], its last path part) is sys.argv[1]; a zombie's
# cmdline is empty, so it is not counted.
COUNT_PROGRAM = """
import os, sys
found = 0
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            program = fh.read().split(b"\\0")[0]
    except OSError:
        continue
    found += os.path.basename(program) == sys.argv[1].encode()
print(found)
"""


async def program_processes(backend: DockerBackend, container_id: str, program: str) -> int:
    argv = ["python3", "-c", COUNT_PROGRAM, program]
    return int(await exec_output(backend, container_id, argv))


@dataclass
class Rect:
    x: int
    y: int
    width: int
    height: int
    encoding: int


class RfbViewer:
    """The viewer's side of RFB 3.8 over any transport (the exec stream itself, or a
    WebSocket): the handshake, raw framebuffer updates, and a fence (a 1x1 update
    request: its answer proves every message sent before it was handled)."""

    def __init__(
        self, send: Callable[[bytes], Awaitable[None]], receive: Callable[[], Awaitable[bytes]]
    ) -> None:
        self.send = send
        self._receive = receive
        self._buf = b""
        self.width = self.height = self.bytes_per_pixel = 0
        self.name = b""

    async def read(self, size: int) -> bytes:
        while len(self._buf) < size:
            chunk = await self._receive()
            if not chunk:
                raise EOFError("the server closed the connection")
            self._buf += chunk
        out, self._buf = self._buf[:size], self._buf[size:]
        return out

    async def handshake(self) -> None:
        assert await self.read(12) == b"RFB 003.008\n"
        await self.send(b"RFB 003.008\n")
        count = (await self.read(1))[0]
        types = await self.read(count)
        assert 1 in types, types  # None: x11vnc runs with -nopw
        await self.send(b"\x01")
        assert await self.read(4) == b"\x00\x00\x00\x00"  # SecurityResult OK
        await self.send(b"\x00")  # ClientInit, not shared (the bridge shares it anyway)
        init = await self.read(24)
        self.width, self.height = struct.unpack(">HH", init[:4])
        self.bytes_per_pixel = init[4] // 8
        (name_length,) = struct.unpack(">I", init[20:24])
        self.name = await self.read(name_length)
        await self.send(set_encodings([0]))  # Raw only: every update is easy to read

    async def request(self, x: int, y: int, width: int, height: int, incremental: bool) -> None:
        await self.send(struct.pack(">BBHHHH", 3, int(incremental), x, y, width, height))

    async def update(self) -> list[Rect]:
        """Read server messages up to the next FramebufferUpdate; its rectangles."""
        while True:
            kind = (await self.read(1))[0]
            if kind == 0:
                break
            if kind == 2:  # Bell
                continue
            if kind == 3:  # ServerCutText
                await self.read(3)
                (length,) = struct.unpack(">I", await self.read(4))
                await self.read(length)
                continue
            raise AssertionError(f"unexpected server message {kind}")
        await self.read(1)
        (count,) = struct.unpack(">H", await self.read(2))
        rects = []
        for _ in range(count):
            x, y, w, h, encoding = struct.unpack(">HHHHi", await self.read(12))
            assert encoding == 0, f"encoding {encoding} was not asked for"
            await self.read(w * h * self.bytes_per_pixel)
            rects.append(Rect(x, y, w, h, encoding))
        return rects

    async def whole_screen(self) -> int:
        """Ask for the whole screen; the area the answer covers."""
        await self.request(0, 0, self.width, self.height, incremental=False)
        return sum(r.width * r.height for r in await self.update())

    async def fence(self) -> None:
        await self.request(0, 0, 1, 1, incremental=False)
        await self.update()
