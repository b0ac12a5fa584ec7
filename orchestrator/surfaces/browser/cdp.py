"""The browser rig's CDP channel, from the gateway's side (docs/rigs.md, "The CDP channel").

Chromium in the rig speaks CDP on a pipe (`--remote-debugging-pipe`: NUL-ended JSON
messages); `rig_images/browser/cdp_pipe.py` relays that pipe on the container's
stdin/stdout, which the gateway holds through the engine's attach API. Playwright's
`connect_over_cdp` wants a WebSocket, so the gateway serves one on a unix socket that
only it can open (a 0700 directory, the socket 0600) and passes Playwright the URL
`ws+unix://<socket>:/devtools/browser/corral` (Node's `ws` library understands it).
Each WebSocket text message is one CDP message. No TCP port exists anywhere on the way,
on any network; the first connection is the only one ever accepted.

A heartbeat, as the kiosk's channel has (`orchestrator.backends.channel`): while the bridge serves,
it sends the browser its own `Browser.getVersion` every `HEARTBEAT_S` (ids from
`PING_BASE`, far above Playwright's; the answers are not passed on), and a ping left
`SILENCE_S` with no byte from the rig after it (sandboxes.liveness) means the browser or
its relay hung: the bridge closes with
that reason, Playwright's calls in flight fail at once, and the rig is ended saying why.
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
from sandboxes.liveness import HEARTBEAT_S, SILENCE_S, Liveness
from sandboxes.ports import AttachedContainer

logger = logging.getLogger("corral.rigs")

MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # a full-page screenshot in base64 fits
MAX_READY_LINE = 64 * 1024
PING_BASE = 2_000_000_000  # the heartbeat's CDP ids; Playwright's count up from 1
PONG = b'{"id":' + str(PING_BASE)[:5].encode()  # how its answers begin (id first)
HUNG = f"the browser stopped answering: no sign of life for {SILENCE_S} s"


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
        self._sending = anyio.Lock()  # one CDP message at a time on the pipe
        self._life = Liveness()  # the rig's signs of life

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
            tg.start_soon(self._down, ws, tg.cancel_scope)
            tg.start_soon(self._beat, tg.cancel_scope)
            try:
                async for message in ws:
                    data = message.encode() if isinstance(message, str) else message
                    await self._send(data + b"\0")
            except (ConnectionClosed, OSError) as exc:
                logger.info("CDP bridge ended: %s", exc)
            tg.cancel_scope.cancel()

    async def _send(self, data: bytes) -> None:
        async with self._sending:
            await self._container.send(data)

    async def _down(self, ws: ServerConnection, serving: anyio.CancelScope) -> None:
        """The rig's CDP messages to Playwright, but the heartbeat's answers."""
        buffer = self._pending
        self._pending = b""
        while True:
            while b"\0" in buffer:
                message, _, buffer = buffer.partition(b"\0")
                if not message.startswith(PONG):
                    await ws.send(message.decode("utf-8", errors="replace"))
            if len(buffer) > MAX_MESSAGE_BYTES:
                self.closed_reason = "the rig sent a CDP message that is too long"
                break
            chunk = await self._container.receive()
            if chunk is None:
                self.closed_reason = "the rig's CDP pipe closed"
                break
            self._life.heard()
            buffer += chunk
        serving.cancel()
        await ws.close()

    async def _beat(self, serving: anyio.CancelScope) -> None:
        """Ping the browser; end the bridge once a ping has waited SILENCE_S with no byte
        from the rig after it."""
        sent = 0
        while True:
            await anyio.sleep(HEARTBEAT_S)
            now = anyio.current_time()
            if self._life.silent(now):
                self.closed_reason = HUNG
                serving.cancel()
                return
            sent += 1
            ping = {"id": PING_BASE + sent, "method": "Browser.getVersion"}
            self._life.asked(now)
            try:
                with anyio.move_on_after(SILENCE_S):  # a pipe nobody reads: silence decides
                    await self._send(json.dumps(ping).encode() + b"\0")
            except OSError:  # the pipe closed under us: the read side says so
                return

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with anyio.move_on_after(5):
                await self._server.wait_closed()
            self._server = None
        shutil.rmtree(self._dir, ignore_errors=True)
