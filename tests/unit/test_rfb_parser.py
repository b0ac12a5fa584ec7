"""The RFB client-stream parser (sandboxes/rfb.py): every client message type, any way the
stream is cut, the 3.3 / 3.7 / 3.8 handshakes, and the bounds. The real x11vnc and a real
WebSocket are in tests/integration/test_kiosk_vnc.py."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandboxes.errors import RfbProtocolError
from sandboxes.rfb import (
    MAX_CUT_TEXT,
    ClientMessage,
    RfbClientStream,
    forwarded_bytes,
    key_event,
    key_release,
    pointer_event,
    set_encodings,
)

pytestmark = pytest.mark.unit

V33, V37, V38 = b"RFB 003.003\n", b"RFB 003.007\n", b"RFB 003.008\n"
SERVER_38_NONE = V38 + b"\x01\x01"  # one security type offered: None
SERVER_38_BOTH = V38 + b"\x02\x01\x02"  # None and VNC authentication
HANDSHAKE_38 = V38 + b"\x01" + b"\x00"  # version, security None, ClientInit (not shared)

PIXEL_FORMAT = bytes([32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0])
SCREEN = struct.pack(">IHHHHI", 1, 0, 0, 800, 600, 0)

# (bytes, name, kind, fields) for every client message type the parser knows.
MESSAGES: list[tuple[bytes, str, str, dict[str, object]]] = [
    (b"\x00\x00\x00\x00" + PIXEL_FORMAT, "SetPixelFormat", "other", {}),
    (set_encodings([0, 7, -223, -316]), "SetEncodings", "other", {"encodings": (0, 7, -223, -316)}),
    (struct.pack(">BBHHHH", 3, 1, 0, 0, 800, 600), "FramebufferUpdateRequest", "other", {}),
    (key_event(True, 0x61), "KeyEvent", "input", {"down": True}),
    (key_event(False, 0x61), "KeyEvent", "input", {"down": False}),
    (pointer_event(300, 200, 1), "PointerEvent", "input", {"x": 300, "y": 200, "buttons": 1}),
    (struct.pack(">BxxxI", 6, 5) + b"hello", "ClientCutText", "clipboard", {}),
    # the extended clipboard format: a negative length, abs(length) bytes follow
    (struct.pack(">Bxxxi", 6, -8) + b"\x00" * 8, "ClientCutText", "clipboard", {}),
    (struct.pack(">BBHHHH", 150, 1, 0, 0, 800, 600), "EnableContinuousUpdates", "other", {}),
    (struct.pack(">BxxxIB", 248, 1 << 31, 3) + b"abc", "ClientFence", "other", {}),
    (struct.pack(">BxxxIB", 248, 0, 0), "ClientFence", "other", {}),
    (bytes([250, 0, 1, 2]), "Xvp", "power", {}),
    (struct.pack(">BxHHBx", 251, 800, 600, 1) + SCREEN, "SetDesktopSize", "resize", {}),
    (struct.pack(">BxHHBx", 251, 800, 600, 0), "SetDesktopSize", "resize", {}),
    (struct.pack(">BBHII", 255, 0, 1, 0x61, 0x1E), "QemuKeyEvent", "input", {"down": True}),
    (struct.pack(">BBH", 255, 1, 0), "QemuAudio", "other", {}),
    (struct.pack(">BBH", 255, 1, 1), "QemuAudio", "other", {}),
    (struct.pack(">BBHBBI", 255, 1, 2, 3, 2, 44100), "QemuAudio", "other", {}),
]
ALL_MESSAGES = b"".join(raw for raw, *_ in MESSAGES)


def ready_38() -> RfbClientStream:
    """A parser past a 3.8 handshake with security None."""
    stream = RfbClientStream()
    stream.server_bytes(SERVER_38_NONE)
    assert [m.name for m in stream.feed(HANDSHAKE_38)] == [
        "ProtocolVersion",
        "SecurityType",
        "ClientInit",
    ]
    assert stream.handshake_done
    return stream


def summary(messages: list[ClientMessage]) -> list[tuple[str, str, bytes]]:
    return [(m.name, m.kind, m.raw) for m in messages]


@pytest.mark.parametrize(("raw", "name", "kind", "fields"), MESSAGES, ids=lambda v: None)
def test_every_client_message_type_is_parsed_and_classified(
    raw: bytes, name: str, kind: str, fields: dict[str, object]
) -> None:
    stream = ready_38()

    [message] = stream.feed(raw)

    assert (message.name, message.kind, message.raw) == (name, kind, raw)
    for attribute, value in fields.items():
        assert getattr(message, attribute) == value


def test_a_stream_cut_at_every_byte_boundary_gives_the_same_messages() -> None:
    whole = HANDSHAKE_38 + ALL_MESSAGES
    reference = RfbClientStream()
    reference.server_bytes(SERVER_38_NONE)
    expected = summary(reference.feed(whole))
    assert len(expected) == 3 + len(MESSAGES)

    for cut in range(len(whole) + 1):
        stream = RfbClientStream()
        stream.server_bytes(SERVER_38_NONE)
        assert summary(stream.feed(whole[:cut]) + stream.feed(whole[cut:])) == expected, cut
    one_by_one = RfbClientStream()
    one_by_one.server_bytes(SERVER_38_NONE)
    assert summary([m for i in range(len(whole)) for m in one_by_one.feed(whole[i : i + 1])]) == (
        expected
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=400), max_size=30))
def test_any_chunking_of_client_and_server_bytes_gives_the_same_messages(
    cuts: list[int],
) -> None:
    whole = HANDSHAKE_38 + ALL_MESSAGES
    reference = RfbClientStream()
    reference.server_bytes(SERVER_38_NONE)
    expected = summary(reference.feed(whole))

    stream = RfbClientStream()
    got: list[ClientMessage] = []
    server = SERVER_38_NONE
    stream.server_bytes(server[:5])  # the server's bytes arrive in pieces too
    stream.server_bytes(server[5:])
    points = sorted({0, len(whole), *(c for c in cuts if c < len(whole))})
    for start, end in itertools.pairwise(points):
        got += stream.feed(whole[start:end])

    assert summary(got) == expected


def test_an_unknown_message_type_is_an_error_naming_it_and_the_stream_stays_failed() -> None:
    stream = ready_38()

    with pytest.raises(RfbProtocolError, match="unknown client message type 7"):
        stream.feed(pointer_event(1, 1, 0) + b"\x07\x00\x00\x00")
    with pytest.raises(RfbProtocolError, match="already failed"):
        stream.feed(pointer_event(1, 1, 0))


@pytest.mark.parametrize("kind", [1, 7, 8, 127, 249, 252, 253, 254])
def test_types_the_bridge_does_not_follow_are_errors(kind: int) -> None:
    with pytest.raises(RfbProtocolError, match=f"unknown client message type {kind}"):
        ready_38().feed(bytes([kind]) + b"\x00" * 20)


def test_unknown_qemu_submessages_and_audio_operations_are_errors() -> None:
    with pytest.raises(RfbProtocolError, match="unknown QEMU client message 2"):
        ready_38().feed(bytes([255, 2, 0, 0]))
    with pytest.raises(RfbProtocolError, match="unknown QEMU audio operation 3"):
        ready_38().feed(struct.pack(">BBH", 255, 1, 3))


def test_cut_text_over_one_mib_is_an_error_at_its_header() -> None:
    at_bound = struct.pack(">BxxxI", 6, MAX_CUT_TEXT)
    stream = ready_38()
    assert stream.feed(at_bound + b"x" * (MAX_CUT_TEXT - 1)) == []  # still waiting for 1 byte
    assert [m.name for m in stream.feed(b"x")] == ["ClientCutText"]

    with pytest.raises(RfbProtocolError, match="ClientCutText of 1048577 bytes"):
        ready_38().feed(struct.pack(">BxxxI", 6, MAX_CUT_TEXT + 1))  # no text needed yet
    with pytest.raises(RfbProtocolError, match="ClientCutText of 2147483648 bytes"):
        ready_38().feed(struct.pack(">BxxxI", 6, 1 << 31))  # the most negative length
    with pytest.raises(RfbProtocolError, match="ClientCutText"):
        ready_38().feed(struct.pack(">Bxxxi", 6, -(MAX_CUT_TEXT + 1)))


def test_other_bounds_fence_payload_and_encoding_count() -> None:
    with pytest.raises(RfbProtocolError, match="ClientFence payload of 65 bytes"):
        ready_38().feed(struct.pack(">BxxxIB", 248, 0, 65))
    with pytest.raises(RfbProtocolError, match="SetEncodings lists 1025 encodings"):
        ready_38().feed(struct.pack(">BxH", 2, 1025))


def test_rfb_3_3_the_server_chooses_none_and_the_client_sends_only_client_init() -> None:
    stream = RfbClientStream()
    stream.server_bytes(V33)
    assert [m.name for m in stream.feed(V33)] == ["ProtocolVersion"]
    stream.server_bytes(struct.pack(">I", 1))  # the server chose None: no response follows

    assert [m.name for m in stream.feed(b"")] == []
    assert [m.name for m in stream.feed(b"\x01" + pointer_event(5, 6, 0))] == [
        "ClientInit",
        "PointerEvent",
    ]
    assert stream.security == 1 and stream.version == (3, 3)


def test_rfb_3_3_with_vnc_authentication_tracks_the_16_byte_response() -> None:
    stream = RfbClientStream()
    stream.server_bytes(V33)
    stream.feed(V33)
    stream.server_bytes(struct.pack(">I", 2) + b"C" * 16)  # type, then the challenge

    # A response whose first byte looks like a message type must not be read as one.
    response = bytes([5]) + b"R" * 15
    messages = stream.feed(response + b"\x01" + key_event(True, 0x41))

    assert [(m.name, m.kind) for m in messages] == [
        ("VncAuthResponse", "handshake"),
        ("ClientInit", "handshake"),
        ("KeyEvent", "input"),
    ]


def test_rfb_3_3_a_viewer_that_speaks_before_the_server_chose_is_refused() -> None:
    stream = RfbClientStream()
    stream.server_bytes(V33)
    stream.feed(V33)
    with pytest.raises(RfbProtocolError, match="before the server chose"):
        stream.feed(b"\x01")


def test_rfb_3_3_a_server_refusal_or_another_type_ends_the_stream() -> None:
    for chosen, match in ((0, "refused the connection"), (16, "security type 16")):
        stream = RfbClientStream()
        stream.server_bytes(V33)
        stream.feed(V33)
        stream.server_bytes(struct.pack(">I", chosen))
        with pytest.raises(RfbProtocolError, match=match):
            stream.feed(b"\x01")


@pytest.mark.parametrize("version", [V37, V38])
def test_rfb_3_7_and_3_8_vnc_authentication_is_type_2_then_16_bytes(version: bytes) -> None:
    stream = RfbClientStream()
    stream.server_bytes(version[:3])
    stream.server_bytes(version[3:] + b"\x02\x01\x02")
    messages = stream.feed(version + b"\x02" + b"\x04" * 16 + b"\x01" + pointer_event(1, 2, 0))

    assert [m.name for m in messages] == [
        "ProtocolVersion",
        "SecurityType",
        "VncAuthResponse",
        "ClientInit",
        "PointerEvent",
    ]
    assert stream.security == 2


def test_the_3_8_handshake_with_none_has_no_response_bytes() -> None:
    stream = RfbClientStream()
    stream.server_bytes(SERVER_38_BOTH)
    messages = stream.feed(V38 + b"\x01\x01" + key_event(True, 0x41))

    assert [m.name for m in messages] == [
        "ProtocolVersion",
        "SecurityType",
        "ClientInit",
        "KeyEvent",
    ]


def test_a_security_type_not_offered_or_not_followable_is_refused_clearly() -> None:
    stream = RfbClientStream()
    stream.server_bytes(SERVER_38_NONE)
    with pytest.raises(RfbProtocolError, match="chose security type 2, not offered"):
        stream.feed(V38 + b"\x02")
    vencrypt = RfbClientStream()
    vencrypt.server_bytes(V38 + b"\x01\x13")
    with pytest.raises(RfbProtocolError, match="security type 19 cannot be followed"):
        vencrypt.feed(V38 + b"\x13")


@pytest.mark.parametrize(
    "version", [b"RFB 003.005\n", b"RFB 003.889\n", b"RFB 004.001\n", b"GET / HTTP/1.1"]
)
def test_an_unknown_protocol_version_is_refused(version: bytes) -> None:
    stream = RfbClientStream()
    stream.server_bytes(V38)
    with pytest.raises(RfbProtocolError, match="unsupported protocol version"):
        stream.feed(version)


def test_the_server_answers_being_read_before_the_viewers_version_is_kept() -> None:
    stream = RfbClientStream()
    stream.server_bytes(SERVER_38_NONE)  # version and security list before the client spoke

    assert [m.name for m in stream.feed(V38 + b"\x01\x01")] == [
        "ProtocolVersion",
        "SecurityType",
        "ClientInit",
    ]


def test_forwarded_bytes_share_the_session_and_strip_framing_encodings() -> None:
    stream = RfbClientStream()
    stream.server_bytes(SERVER_38_NONE)
    init = stream.feed(V38 + b"\x01" + b"\x00")[-1]
    assert init.name == "ClientInit" and init.raw == b"\x00"
    assert forwarded_bytes(init) == b"\x01"  # a viewer never asks to drop the others

    [encodings] = stream.feed(set_encodings([7, -316, 0, -257, -223]))
    assert forwarded_bytes(encodings) == set_encodings([7, 0, -223])
    [pointer] = stream.feed(pointer_event(1, 2, 0))
    assert forwarded_bytes(pointer) == pointer.raw


def test_key_releases_and_no_key_in_any_repr() -> None:
    stream = ready_38()
    down, qemu = stream.feed(
        key_event(True, 0x70617373) + struct.pack(">BBHII", 255, 0, 1, 0x61, 0x1E)
    )

    assert key_release(down) == key_event(False, 0x70617373)
    assert key_release(qemu) == struct.pack(">BBHII", 255, 0, 0, 0x61, 0x1E)
    assert down.key_id != qemu.key_id
    for message in (down, qemu):
        assert "7061" not in repr(message) and "pass" not in repr(message)
        assert "key_id" not in repr(message) and "raw" not in repr(message)
    with pytest.raises(ValueError, match="not a key event"):
        key_release(stream.feed(pointer_event(0, 0, 0))[0])
