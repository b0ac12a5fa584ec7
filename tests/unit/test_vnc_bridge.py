"""The live-view bridge (orchestrator/people/live_view.py) between a WebSocket and an exec
stream, with Starlette's test client as the viewer and an in-memory VNC server as the
kiosk: what is forwarded, what never is, what is released, what closes what. The same
bridge on a real kiosk (x11vnc, docker exec, uvicorn, a websockets client) is in
tests/integration/test_kiosk_vnc.py."""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import anyio
import pytest
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.testclient import TestClient, WebSocketTestSession
from starlette.websockets import WebSocket, WebSocketDisconnect

from orchestrator.people.live_view import BridgeOutcome, bridge_vnc
from sandboxes.rfb import ClientMessage, key_event, pointer_event, set_encodings

pytestmark = pytest.mark.unit

V38 = b"RFB 003.008\n"
FBUR = struct.pack(">BBHHHH", 3, 1, 0, 0, 800, 600)
EMPTY_UPDATE = b"\x00\x00\x00\x00"  # FramebufferUpdate with no rectangle
SERVER_INIT = struct.pack(">HH16sI", 800, 600, b"\x20\x18\x00\x01" + b"\x00" * 12, 4) + b"fake"
SERVER_HELLO = V38 + b"\x01\x01" + b"\x00\x00\x00\x00" + SERVER_INIT


@dataclass
class FakeVnc:
    """An exec stream to an in-memory VNC server: it says its whole handshake at once,
    keeps every byte the bridge forwards, and answers each FramebufferUpdateRequest with
    an empty update (so the viewer knows everything before it was handled)."""

    hang_up_after_init: bool = False
    id: str = "fake-exec"
    received: bytearray = field(default_factory=bytearray)
    closed: bool = False
    _out: list[bytes] = field(default_factory=lambda: [SERVER_HELLO])
    _wake: anyio.Event | None = None

    async def send(self, data: bytes) -> None:
        if self.closed:
            raise OSError("closed")
        start = len(self.received)
        self.received += data
        if FBUR in bytes(self.received[max(0, start - len(FBUR)) :]):
            self._out.append(EMPTY_UPDATE)
        if self._wake is not None:
            self._wake.set()

    async def receive(self) -> bytes | None:
        while not self._out:
            if self.closed or (self.hang_up_after_init and len(self.received) >= 14):
                return None
            self._wake = anyio.Event()
            await self._wake.wait()
        return self._out.pop(0)

    async def close(self) -> None:
        self.closed = True
        if self._wake is not None:
            self._wake.set()

    def after_handshake(self) -> bytes:
        return bytes(self.received[14:])  # version (12), security type, ClientInit


@dataclass
class Viewer:
    """What the route did: the messages on_input saw, and how the bridge ended."""

    stream: FakeVnc
    allow: bool = True
    seen: list[ClientMessage] = field(default_factory=list)
    outcome: BridgeOutcome | None = None
    done: threading.Event = field(default_factory=threading.Event)

    async def decide(self, message: ClientMessage) -> bool:
        self.seen.append(message)
        return self.allow


def app_for(viewer: Viewer) -> Starlette:
    async def vnc(websocket: WebSocket) -> None:
        try:
            viewer.outcome = await bridge_vnc(websocket, viewer.stream, viewer.decide)
        finally:
            viewer.done.set()

    return Starlette(routes=[WebSocketRoute("/vnc", vnc)])


@pytest.fixture
def viewer() -> Viewer:
    return Viewer(FakeVnc())


@pytest.fixture
def session(viewer: Viewer) -> Iterator[WebSocketTestSession]:
    with TestClient(app_for(viewer)) as client, client.websocket_connect("/vnc") as ws:
        assert ws.receive_bytes() == SERVER_HELLO
        ws.send_bytes(V38 + b"\x01")
        ws.send_bytes(b"\x00")  # ClientInit, not shared
        yield ws


def handled(ws: WebSocketTestSession) -> None:
    """Wait until the bridge has handled everything sent so far (the server answers the
    request sent now, and messages are handled in order)."""
    ws.send_bytes(FBUR)
    assert ws.receive_bytes() == EMPTY_UPDATE


def test_allowed_input_is_forwarded_as_sent_and_the_session_is_always_shared(
    viewer: Viewer, session: WebSocketTestSession
) -> None:
    press, release = pointer_event(300, 200, 1), pointer_event(300, 200, 0)
    session.send_bytes(press + release + key_event(True, 0x61)[:3])  # a cut message
    session.send_bytes(key_event(True, 0x61)[3:] + key_event(False, 0x61))
    handled(session)

    assert viewer.stream.received[:14] == V38 + b"\x01" + b"\x01"  # ClientInit made shared
    assert viewer.stream.after_handshake() == (
        press + release + key_event(True, 0x61) + key_event(False, 0x61) + FBUR
    )
    assert [(m.name, m.x, m.y, m.buttons) for m in viewer.seen[:2]] == [
        ("PointerEvent", 300, 200, 1),
        ("PointerEvent", 300, 200, 0),
    ]
    assert [m.name for m in viewer.seen] == ["PointerEvent"] * 2 + ["KeyEvent"] * 2


def test_refused_input_is_dropped_and_never_reaches_the_kiosk(
    viewer: Viewer, session: WebSocketTestSession
) -> None:
    viewer.allow = False
    session.send_bytes(pointer_event(10, 10, 1) + key_event(True, 0x61))
    handled(session)

    assert viewer.stream.after_handshake() == FBUR
    assert len(viewer.seen) == 2


def test_resize_clipboard_and_power_are_never_forwarded_even_with_the_seat(
    viewer: Viewer, session: WebSocketTestSession
) -> None:
    resize = struct.pack(">BxHHBx", 251, 1920, 1080, 1) + struct.pack(">IHHHHI", 1, 0, 0, 9, 9, 0)
    cut = struct.pack(">BxxxI", 6, 6) + b"s3cret"
    xvp = bytes([250, 0, 1, 2])  # shutdown
    session.send_bytes(resize + cut + xvp)
    handled(session)
    session.close()
    assert viewer.done.wait(10)

    assert viewer.stream.after_handshake() == FBUR
    assert viewer.seen == []  # none of them is input to ask about
    assert viewer.outcome is not None and viewer.outcome.never_forwarded == 3


def test_encodings_that_change_message_framing_are_removed(
    viewer: Viewer, session: WebSocketTestSession
) -> None:
    session.send_bytes(set_encodings([7, -316, 0, -257, -223]))
    handled(session)

    assert viewer.stream.after_handshake() == set_encodings([7, 0, -223]) + FBUR


def test_keys_and_buttons_held_when_the_seat_is_lost_are_released(
    viewer: Viewer, session: WebSocketTestSession
) -> None:
    shift, button = key_event(True, 0xFFE1), pointer_event(50, 60, 1)
    session.send_bytes(shift + button)
    handled(session)
    viewer.allow = False  # the seat goes to someone else
    session.send_bytes(key_event(True, 0x61))
    handled(session)

    assert viewer.stream.after_handshake() == (
        shift + button + FBUR + key_event(False, 0xFFE1) + pointer_event(50, 60, 0) + FBUR
    )


def test_keys_held_when_the_viewer_leaves_are_released_and_the_stream_closed(
    viewer: Viewer, session: WebSocketTestSession
) -> None:
    session.send_bytes(key_event(True, 0xFFE3))  # ctrl, never released by the viewer
    handled(session)
    session.close()
    assert viewer.done.wait(10)

    assert viewer.stream.after_handshake().endswith(key_event(False, 0xFFE3))
    assert viewer.stream.closed
    assert viewer.outcome is not None and viewer.outcome.by == "viewer"
    assert viewer.outcome.inputs_forwarded == 1


def test_a_protocol_error_closes_both_sides(viewer: Viewer, session: WebSocketTestSession) -> None:
    session.send_bytes(b"\x07garbage")

    with pytest.raises(WebSocketDisconnect) as closed:
        session.receive_bytes()
    assert closed.value.code == 1008
    assert viewer.done.wait(10)
    assert viewer.stream.closed
    assert viewer.outcome is not None and viewer.outcome.by == "protocol"
    assert "unknown client message type 7" in viewer.outcome.reason


def test_a_text_frame_is_a_protocol_error(viewer: Viewer, session: WebSocketTestSession) -> None:
    session.send_text("RFB 003.008")

    with pytest.raises(WebSocketDisconnect) as closed:
        session.receive_bytes()
    assert closed.value.code == 1008
    assert viewer.done.wait(10) and viewer.stream.closed


def test_the_kiosk_hanging_up_closes_the_websocket() -> None:
    viewer = Viewer(FakeVnc(hang_up_after_init=True))
    with TestClient(app_for(viewer)) as client, client.websocket_connect("/vnc") as ws:
        assert ws.receive_bytes() == SERVER_HELLO
        ws.send_bytes(V38 + b"\x01\x00")

        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_bytes()

    assert closed.value.code == 1000
    assert viewer.done.wait(10) and viewer.stream.closed
    assert viewer.outcome is not None and viewer.outcome.by == "kiosk"


@pytest.mark.parametrize(("offered", "chosen"), [([], None), (["binary"], "binary")])
def test_no_subprotocol_unless_the_viewer_offers_binary(
    offered: list[str], chosen: str | None
) -> None:
    viewer = Viewer(FakeVnc())
    with (
        TestClient(app_for(viewer)) as client,
        client.websocket_connect("/vnc", subprotocols=offered) as ws,
    ):
        assert ws.accepted_subprotocol == chosen
        assert ws.receive_bytes() == SERVER_HELLO
