"""A person at the console, for e2e tests: logs in with an operator token and speaks RFB
3.8 over the console's live-view WebSocket (`/console/sessions/KEY/vnc`), the way noVNC
does, so its key presses reach the desktop through the gateway's bridge (and take the
seat there). Written from RFC 6143; only what a person's input needs."""

from __future__ import annotations

import re
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect

SHIFT_L = 0xFFE1


@asynccontextmanager
async def console_login(base: str, token: str) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client logged in to the console (its cookie set)."""
    async with httpx.AsyncClient(base_url=base) as client:
        form = await client.get("/console/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert csrf is not None
        done = await client.post("/console/login", data={"csrf": csrf.group(1), "token": token})
        assert done.status_code == 303 and "corral_console" in client.cookies, done.text
        yield client


class Viewer:
    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.buffer = b""

    async def read(self, size: int) -> bytes:
        while len(self.buffer) < size:
            message = await self.ws.recv()
            self.buffer += message if isinstance(message, bytes) else message.encode()
        out, self.buffer = self.buffer[:size], self.buffer[size:]
        return out

    async def handshake(self) -> tuple[int, int]:
        """Version 3.8, security None, a shared ClientInit; the screen size."""
        assert (await self.read(12)).startswith(b"RFB 003.")
        await self.ws.send(b"RFB 003.008\n")
        (count,) = await self.read(1)
        assert count > 0, "the server refused the connection"
        types = await self.read(count)
        assert 1 in types, f"no security type None: {list(types)}"
        await self.ws.send(b"\x01")
        assert struct.unpack(">I", await self.read(4))[0] == 0, "security failed"
        await self.ws.send(b"\x01")  # ClientInit: shared
        width, height = struct.unpack(">HH", await self.read(4))
        await self.read(16)  # pixel format
        (name_length,) = struct.unpack(">I", await self.read(4))
        await self.read(name_length)
        return width, height

    async def press(self, keysym: int = SHIFT_L) -> None:
        """A key down and up (KeyEvent, type 4): a person's input."""
        for down in (1, 0):
            await self.ws.send(struct.pack(">BBxxI", 4, down, keysym))

    async def click(self, x: int, y: int) -> None:
        """The left button pressed and released at x, y (PointerEvent, type 5)."""
        for mask in (1, 0):
            await self.ws.send(struct.pack(">BBHH", 5, mask, x, y))

    async def type(self, text: str) -> None:
        """Each character pressed in turn (Latin-1 keysyms are their code points)."""
        for char in text:
            await self.press(ord(char))


@asynccontextmanager
async def live_view(base: str, client: httpx.AsyncClient, key: str) -> AsyncIterator[Viewer]:
    url = base.replace("http://", "ws://") + f"/console/sessions/{key}/vnc"
    headers: dict[str, Any] = {
        "Origin": base,
        "Cookie": f"corral_console={client.cookies['corral_console']}",
    }
    async with ws_connect(url, additional_headers=headers, open_timeout=20) as ws:
        viewer = Viewer(ws)
        assert await viewer.handshake() == (1280, 800)
        yield viewer
