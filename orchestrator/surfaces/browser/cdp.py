"""The browser rig's CDP channel, from the gateway's side (docs/rigs.md, "The CDP channel").

Chromium in the rig speaks CDP on a pipe (`--remote-debugging-pipe`: NUL-ended JSON
messages); `rig_images/browser/cdp_pipe.py` relays that pipe on the container's
stdin/stdout, which the gateway holds through the engine's attach API. Playwright's
`connect_over_cdp` wants a WebSocket, so the gateway serves one on a unix socket that
only it can open (a 0700 directory, the socket 0600) and passes Playwright the URL
`ws+unix://<socket>:/devtools/browser/corral` (Node's `ws` library understands it).
Each WebSocket text message is one CDP message. No TCP port exists anywhere on the way,
on any network; the first connection is the only one ever accepted.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import anyio
from websockets.asyncio.server import Server, ServerConnection, unix_serve
from websockets.exceptions import ConnectionClosed

from orchestrator.errors import RigError
from sandboxes.ports import AttachedContainer

logger = logging.getLogger("corral.rigs")

MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # a full-page screenshot in base64 fits
MAX_READY_LINE = 64 * 1024


async def handshake(
    container: AttachedContainer, config: dict[str, Any], deadline: float
) -> tuple[dict[str, Any], bytes]:
    """Send the rig its start line; return its ready answer and any CDP bytes after it."""
    await container.send(json.dumps(config).encode() + b"\n")
    buffer = b""
    with anyio.fail_after(deadline):
        while b"\n" not in buffer:
            chunk = await container.receive()
            if chunk is None:
                raise RigError("the browser rig ended before it was ready")
            buffer += chunk
            if len(buffer) > MAX_READY_LINE:
                raise RigError("the browser rig sent a start answer that is too long")
    line, _, rest = buffer.partition(b"\n")
    answer: dict[str, Any] = json.loads(line)
    if not answer.get("ok"):
        raise RigError(f"the browser rig could not start: {answer.get('error', 'unknown')}")
    return answer, rest


class CdpBridge:
    """A WebSocket server on a private unix socket, relaying to one rig's CDP pipe."""

    def __init__(self, container: AttachedContainer, pending: bytes = b"") -> None:
        self._container = container
        self._pending = pending
        self._dir = Path(tempfile.mkdtemp(prefix="corral-cdp-"))  # 0700, ours only
        self.socket_path = self._dir / "cdp.sock"
        self._server: Server | None = None
        self._served = False
        self.closed_reason: str | None = None

    @property
    def url(self) -> str:
        return f"ws+unix://{self.socket_path}:/devtools/browser/corral"

    async def start(self) -> None:
        old = os.umask(0o177)  # the socket is created 0600
        try:
            self._server = await unix_serve(
                self._handle, str(self.socket_path), max_size=MAX_MESSAGE_BYTES, compression=None
            )
        finally:
            os.umask(old)
        os.chmod(self.socket_path, 0o600)

    async def _handle(self, ws: ServerConnection) -> None:
        if self._served:
            await ws.close(code=1008, reason="this rig's CDP channel is taken")
            return
        self._served = True
        async with anyio.create_task_group() as tg:

            async def down() -> None:
                buffer = self._pending
                self._pending = b""
                while True:
                    while b"\0" in buffer:
                        message, _, buffer = buffer.partition(b"\0")
                        await ws.send(message.decode("utf-8", errors="replace"))
                    if len(buffer) > MAX_MESSAGE_BYTES:
                        self.closed_reason = "the rig sent a CDP message that is too long"
                        break
                    chunk = await self._container.receive()
                    if chunk is None:
                        self.closed_reason = "the rig's CDP pipe closed"
                        break
                    buffer += chunk
                tg.cancel_scope.cancel()
                await ws.close()

            tg.start_soon(down)
            try:
                async for message in ws:
                    data = message.encode() if isinstance(message, str) else message
                    await self._container.send(data + b"\0")
            except (ConnectionClosed, OSError) as exc:
                logger.info("CDP bridge ended: %s", exc)
            tg.cancel_scope.cancel()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with anyio.move_on_after(5):
                await self._server.wait_closed()
            self._server = None
        shutil.rmtree(self._dir, ignore_errors=True)
