"""Live view and take over (SPEC S6.2): a noVNC viewer's WebSocket bridged to the kiosk's
x11vnc.

The path, with no TCP port published and no host path mounted:

    noVNC (operator's browser) --WebSocket, binary frames--> gateway (bridge_vnc)
        --engine exec API, stdin/stdout--> vnc_relay.py in the kiosk container
        --unix socket--> x11vnc (rig_images/kiosk/kiosk_agent/vnc.py)

The server's bytes go to the viewer as they come. The viewer's bytes are parsed
(`sandboxes.rfb`) and each complete message is forwarded at once, or dropped:

- input (keys, pointer): forwarded only when `on_input(message)` says so (the caller
  decides whether this viewer holds the seat, or takes it now);
- clipboard, resize, power (ClientCutText, SetDesktopSize, xvp): always dropped;
- anything the parser cannot follow ends the connection.

Keys and buttons this viewer pressed are released when its input stops being forwarded
(or the connection ends), so a lost seat never leaves a key held for the AI's next
action. Nothing a viewer types is logged.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import anyio
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from sandboxes.errors import RfbProtocolError
from sandboxes.isolation import NON_ROOT
from sandboxes.ports import ContainerBackend, ExecStream
from sandboxes.rfb import (
    NEVER_FORWARDED,
    ClientMessage,
    RfbClientStream,
    forwarded_bytes,
    key_release,
    pointer_event,
)

logger = logging.getLogger("corral.vnc")

# The relay inside the kiosk image (rig_images/kiosk/kiosk_agent/vnc_relay.py).
VNC_RELAY_ARGV: Sequence[str] = ("python3", "/opt/corral/kiosk_agent/vnc_relay.py")
RELEASE_TIMEOUT = 1.0  # for the releases sent when a viewer's input stops

InputDecider = Callable[[ClientMessage], Awaitable[bool]]
EndedBy = Literal["viewer", "kiosk", "protocol", "error"]

# WebSocket close codes (RFC 6455)
NORMAL = 1000
POLICY = 1008
INTERNAL = 1011


async def open_vnc(backend: ContainerBackend, container_id: str) -> ExecStream:
    """A byte stream to the kiosk's x11vnc: the relay run in the kiosk container."""
    return await backend.open_exec(container_id, VNC_RELAY_ARGV, user=NON_ROOT)


@dataclass
class BridgeOutcome:
    """How a live-view connection ended, and what its viewer's input came to (counts
    only: never what was typed)."""

    by: EndedBy | None = None  # who ended it: the viewer, the kiosk, a protocol error, a bug
    reason: str = ""
    inputs_forwarded: int = 0
    inputs_dropped: int = 0  # input messages on_input refused
    never_forwarded: int = 0  # clipboard, resize and power messages


class _Bridge:
    def __init__(self, websocket: WebSocket, stream: ExecStream, on_input: InputDecider):
        self.ws = websocket
        self.stream = stream
        self.on_input = on_input
        self.parser = RfbClientStream()
        self.outcome = BridgeOutcome()
        self.held_keys: dict[bytes, bytes] = {}  # key id -> the event that releases it
        self.pointer: tuple[int, int, int] | None = None  # x, y, buttons last forwarded
        self.close_code = NORMAL

    def end(self, by: EndedBy, reason: str, scope: anyio.CancelScope) -> None:
        if self.outcome.by is None:
            self.outcome.by, self.outcome.reason = by, reason
        scope.cancel()

    async def kiosk_to_viewer(self, scope: anyio.CancelScope) -> None:
        while True:
            data = await self.stream.receive()
            if data is None:
                self.end("kiosk", "the kiosk's VNC server closed the connection", scope)
                return
            # The parser watches the server's handshake before the viewer can answer it.
            self.parser.server_bytes(data)
            await self.ws.send_bytes(data)

    async def viewer_to_kiosk(self, scope: anyio.CancelScope) -> None:
        while True:
            message = await self.ws.receive()
            if message["type"] == "websocket.disconnect":
                self.end("viewer", "the viewer closed the connection", scope)
                return
            data = message.get("bytes")
            if data is None:
                raise RfbProtocolError("a text frame (RFB travels in binary frames)")
            for parsed in self.parser.feed(data):
                await self.handle(parsed)

    async def handle(self, message: ClientMessage) -> None:
        if message.kind in NEVER_FORWARDED:
            self.outcome.never_forwarded += 1
            return
        if message.kind != "input":
            await self.stream.send(forwarded_bytes(message))
            return
        if not await self.on_input(message):
            self.outcome.inputs_dropped += 1
            await self.release_all()
            return
        self.outcome.inputs_forwarded += 1
        self.track(message)
        await self.stream.send(message.raw)

    def track(self, message: ClientMessage) -> None:
        if message.name == "PointerEvent":
            assert message.x is not None and message.y is not None
            self.pointer = (message.x, message.y, message.buttons or 0)
        elif message.down:
            self.held_keys[message.key_id] = key_release(message)
        else:
            self.held_keys.pop(message.key_id, None)

    async def release_all(self) -> None:
        """Release every key and button this viewer holds down on the kiosk."""
        releases = list(self.held_keys.values())
        if self.pointer is not None and self.pointer[2]:
            releases.append(pointer_event(self.pointer[0], self.pointer[1], 0))
        self.held_keys.clear()
        if self.pointer is not None:
            self.pointer = (self.pointer[0], self.pointer[1], 0)
        if releases:
            await self.stream.send(b"".join(releases))

    async def run(self) -> None:
        try:
            async with anyio.create_task_group() as tasks:
                scope = tasks.cancel_scope
                tasks.start_soon(self.guard, self.kiosk_to_viewer, scope)
                tasks.start_soon(self.guard, self.viewer_to_kiosk, scope)
        finally:
            with anyio.CancelScope(shield=True):
                await self.finish()

    async def guard(
        self,
        side: Callable[[anyio.CancelScope], Awaitable[None]],
        scope: anyio.CancelScope,
    ) -> None:
        """Run one direction; whatever ends it ends the other one too."""
        try:
            await side(scope)
        except RfbProtocolError as exc:
            self.close_code = POLICY
            self.end("protocol", f"protocol error: {exc}", scope)
        except (WebSocketDisconnect, OSError) as exc:
            self.end("viewer", f"the connection dropped ({type(exc).__name__})", scope)
        except Exception:
            logger.exception("the live-view bridge failed")
            self.close_code = INTERNAL
            self.end("error", "the bridge failed (see the gateway's log)", scope)

    async def finish(self) -> None:
        if self.outcome.by is None:
            self.outcome.by, self.outcome.reason = "error", "the bridge was cancelled"
        # (OSError: the kiosk side is closed already, and nothing is held there any more)
        with anyio.move_on_after(RELEASE_TIMEOUT), contextlib.suppress(OSError):
            await self.release_all()
        await self.stream.close()  # the relay sees its stdin end, and exits
        if self.ws.application_state == WebSocketState.CONNECTED and self.outcome.by != "viewer":
            # (the viewer may go at the same moment)
            with contextlib.suppress(RuntimeError, OSError, WebSocketDisconnect):
                await self.ws.close(self.close_code, self.outcome.reason[:120])


async def bridge_vnc(
    websocket: WebSocket, stream: ExecStream, on_input: InputDecider
) -> BridgeOutcome:
    """Bridge one viewer to the kiosk's VNC server until either side ends, then close
    both (the exec process ends with its stdin). Accepts the WebSocket if the caller has
    not (no subprotocol, or "binary" when the viewer offers it). Takes ownership of
    `stream`. `on_input(message)` is awaited for each key or pointer message; it is
    forwarded only when it answers True. Returns how the connection ended."""
    bridge = _Bridge(websocket, stream, on_input)
    try:
        if websocket.application_state == WebSocketState.CONNECTING:
            offered = websocket.scope.get("subprotocols") or []
            await websocket.accept(subprotocol="binary" if "binary" in offered else None)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await stream.close()
        raise
    await bridge.run()
    logger.info(
        "live view ended (%s): %s; input forwarded %d, refused %d",
        bridge.outcome.by,
        bridge.outcome.reason,
        bridge.outcome.inputs_forwarded,
        bridge.outcome.inputs_dropped,
    )
    return bridge.outcome
