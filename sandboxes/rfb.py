"""The client side of an RFB (VNC) stream, parsed: what an operator's viewer sends.

Pure and incremental: `RfbClientStream.feed(bytes)` returns the messages completed by
those bytes, whatever way the stream was cut into pieces. Each message is classified so
the live-view bridge (orchestrator/people/live_view.py) can decide what reaches the kiosk:

- `handshake`: ProtocolVersion, the security type, a VNC authentication response,
  ClientInit;
- `input`: KeyEvent, PointerEvent, QEMU extended key event: forwarded only while the
  viewer holds the seat;
- `clipboard`: ClientCutText: never forwarded (a pasted password would stay in the X
  selection after hand back, where the AI could read it);
- `resize`: SetDesktopSize: never forwarded (the screen size is what the masks assume);
- `power`: xvp shutdown/reboot/reset: never forwarded;
- `other`: SetPixelFormat, SetEncodings, FramebufferUpdateRequest,
  EnableContinuousUpdates, ClientFence, QEMU audio.

Anything else (an unknown type, a version or security type the parser cannot follow, a
message over its bound) raises `RfbProtocolError`, and the bridge closes the connection.
The handshake depends on the server's choices (RFB 3.3 lets the server pick the security
type), so the parser also watches the server's first bytes: `server_bytes`.

Written from the RFB protocol specification (rfbproto, "The RFB Protocol", versions 3.3,
3.7 and 3.8 and the registered extensions).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import Enum
from typing import Literal

from sandboxes.errors import RfbProtocolError

MessageKind = Literal["handshake", "input", "clipboard", "resize", "power", "other"]
NEVER_FORWARDED: frozenset[MessageKind] = frozenset({"clipboard", "resize", "power"})

VERSIONS = {b"RFB 003.003\n": (3, 3), b"RFB 003.007\n": (3, 7), b"RFB 003.008\n": (3, 8)}
SECURITY_NONE = 1
SECURITY_VNC_AUTH = 2
MAX_CUT_TEXT = 1024 * 1024  # bytes of ClientCutText (it is dropped anyway; bounded here)
MAX_ENCODINGS = 1024  # a viewer lists a few dozen
MAX_FENCE_PAYLOAD = 64  # the specification's own bound
MAX_SERVER_HANDSHAKE = 12 + 1 + 255  # ProtocolVersion + the longest security-type list

# Pseudo-encodings that change how the client's later messages are framed or read; they
# are removed from SetEncodings so the server never turns them on:
# ExtendedMouseButtons (-316) makes a PointerEvent 7 bytes long once the server agrees,
# which only the server's answer tells; QEMU pointer motion change (-257) turns pointer
# positions into relative moves.
UNSAFE_ENCODINGS = frozenset({-316, -257})


@dataclass(frozen=True, slots=True)
class ClientMessage:
    """One complete client message. `raw` holds its bytes as received; key events keep
    their key only inside `raw` and `key_id` (neither is ever logged: keys spell text)."""

    name: str
    kind: MessageKind
    raw: bytes = field(repr=False)
    x: int | None = None  # PointerEvent
    y: int | None = None
    buttons: int | None = None
    down: bool | None = None  # KeyEvent, QEMU key event
    key_id: bytes = field(default=b"", repr=False)  # which key (for its release)
    encodings: tuple[int, ...] = ()  # SetEncodings


class _Client(Enum):
    VERSION = "version"
    SECURITY_33 = "the server's security type (RFB 3.3)"
    SECURITY_TYPE = "security type"
    VNC_AUTH = "VNC authentication response"
    CLIENT_INIT = "ClientInit"
    MESSAGES = "messages"
    FAILED = "failed"


def _u16(data: bytes | bytearray, at: int) -> int:
    value: int = struct.unpack_from(">H", data, at)[0]
    return value


def _u32(data: bytes | bytearray, at: int) -> int:
    value: int = struct.unpack_from(">I", data, at)[0]
    return value


class RfbClientStream:
    """Parses what a viewer sends to an RFB server, given (through `server_bytes`) what
    the server sent first. Not thread-safe; one instance per connection."""

    def __init__(self, *, max_cut_text: int = MAX_CUT_TEXT) -> None:
        self.max_cut_text = max_cut_text
        self.version: tuple[int, int] | None = None
        self.security: int | None = None  # the security type in use
        self._state = _Client.VERSION
        self._buf = bytearray()
        # What the server said during the handshake.
        self._server = bytearray()
        self._server_version: tuple[int, int] | None = None
        self._offered: frozenset[int] | None = None  # RFB 3.7+: the types the server lists
        self._chosen_33: int | None = None  # RFB 3.3: the type the server chose
        self._server_done = False

    @property
    def handshake_done(self) -> bool:
        return self._state is _Client.MESSAGES

    # ------------------------------------------------------------------ the server's side

    def server_bytes(self, data: bytes) -> None:
        """Watch the server's handshake (its version and security types); everything
        after it is the framebuffer and is ignored. Feed it before the viewer sees it."""
        if self._server_done or not data:
            return
        self._server += data
        if self._server_version is None:
            if len(self._server) < 12:
                return
            self._server_version = VERSIONS.get(bytes(self._server[:12]), (0, 0))
            del self._server[:12]
        if self.version is None:  # the server waits for the client's version
            if len(self._server) > MAX_SERVER_HANDSHAKE:
                raise RfbProtocolError("the server spoke out of turn during the handshake")
            return
        if self.version == (3, 3):
            if len(self._server) >= 4:
                self._chosen_33 = _u32(self._server, 0)
                self._finish_server()
            return
        if self._server:
            count = self._server[0]
            if len(self._server) >= 1 + count:
                self._offered = frozenset(self._server[1 : 1 + count])
                self._finish_server()

    def _finish_server(self) -> None:
        self._server_done = True
        self._server = bytearray()

    # ------------------------------------------------------------------ the client's side

    def feed(self, data: bytes) -> list[ClientMessage]:
        """The messages completed by `data` (none when it ends mid-message: the rest is
        kept for the next call). Raises RfbProtocolError on anything it cannot follow."""
        if self._state is _Client.FAILED:
            raise RfbProtocolError("the stream already failed")
        self._buf += data
        out: list[ClientMessage] = []
        try:
            while (message := self._next()) is not None:
                out.append(message)
        except RfbProtocolError:
            self._state = _Client.FAILED
            self._buf.clear()
            raise
        return out

    def _take(self, size: int) -> bytes | None:
        if len(self._buf) < size:
            return None
        raw = bytes(self._buf[:size])
        del self._buf[:size]
        return raw

    def _next(self) -> ClientMessage | None:
        state = self._state
        if state is _Client.MESSAGES:
            return self._message()
        if state is _Client.VERSION:
            return self._version()
        if state is _Client.SECURITY_33:
            return self._security_33()
        if state is _Client.SECURITY_TYPE:
            return self._security_type()
        if state is _Client.VNC_AUTH:
            raw = self._take(16)
            if raw is None:
                return None
            self._state = _Client.CLIENT_INIT
            return ClientMessage("VncAuthResponse", "handshake", raw)
        raw = self._take(1)  # ClientInit: the shared flag
        if raw is None:
            return None
        self._state = _Client.MESSAGES
        return ClientMessage("ClientInit", "handshake", raw)

    def _version(self) -> ClientMessage | None:
        raw = self._take(12)
        if raw is None:
            return None
        version = VERSIONS.get(raw)
        if version is None:
            shown = raw.decode("ascii", "replace").strip()
            raise RfbProtocolError(
                f"unsupported protocol version {shown!r} (3.3, 3.7 and 3.8 are understood)"
            )
        self.version = version
        self._state = _Client.SECURITY_33 if version == (3, 3) else _Client.SECURITY_TYPE
        if self._server:  # the server's security bytes came first: read them now
            pending, self._server = bytes(self._server), bytearray()
            self.server_bytes(pending)
        return ClientMessage("ProtocolVersion", "handshake", raw)

    def _security_33(self) -> ClientMessage | None:
        """RFB 3.3: the server picks; the client sends nothing unless it is VNC auth."""
        chosen = self._chosen_33
        if chosen is None:
            if self._buf:
                raise RfbProtocolError("the viewer spoke before the server chose security")
            return None
        self._use_security(chosen)
        return self._next()

    def _security_type(self) -> ClientMessage | None:
        raw = self._take(1)
        if raw is None:
            return None
        if self._offered is not None and raw[0] not in self._offered:
            raise RfbProtocolError(f"the viewer chose security type {raw[0]}, not offered")
        self._use_security(raw[0])
        return ClientMessage("SecurityType", "handshake", raw)

    def _use_security(self, chosen: int) -> None:
        if chosen == SECURITY_NONE:
            self._state = _Client.CLIENT_INIT
        elif chosen == SECURITY_VNC_AUTH:
            self._state = _Client.VNC_AUTH
        elif chosen == 0:
            raise RfbProtocolError("the server refused the connection")
        else:
            raise RfbProtocolError(
                f"security type {chosen} cannot be followed by the bridge (only None and "
                "VNC authentication carry the messages in clear)"
            )
        self.security = chosen

    # ------------------------------------------------------------------ messages

    def _message(self) -> ClientMessage | None:
        if not self._buf:
            return None
        kind = self._buf[0]
        size = self._size(kind)
        if size is None:
            return None
        raw = self._take(size)
        if raw is None:
            return None
        return _classify(kind, raw)

    def _size(self, kind: int) -> int | None:
        """The length of the message starting the buffer, None until its header is in."""
        buf = self._buf
        fixed = {0: 20, 3: 10, 4: 8, 5: 6, 150: 10, 250: 4}
        if kind in fixed:
            return fixed[kind]
        if kind == 2:  # SetEncodings
            if len(buf) < 4:
                return None
            count = _u16(buf, 2)
            if count > MAX_ENCODINGS:
                raise RfbProtocolError(
                    f"SetEncodings lists {count} encodings (max {MAX_ENCODINGS})"
                )
            return 4 + 4 * count
        if kind == 6:  # ClientCutText; a negative length is the extended clipboard format
            if len(buf) < 8:
                return None
            length = _u32(buf, 4)
            length = length if length < 1 << 31 else (1 << 32) - length
            if length > self.max_cut_text:
                raise RfbProtocolError(f"ClientCutText of {length} bytes (max {self.max_cut_text})")
            return 8 + length
        if kind == 248:  # ClientFence
            if len(buf) < 9:
                return None
            if buf[8] > MAX_FENCE_PAYLOAD:
                raise RfbProtocolError(f"ClientFence payload of {buf[8]} bytes (max 64)")
            return 9 + buf[8]
        if kind == 251:  # SetDesktopSize
            return 8 + 16 * buf[6] if len(buf) >= 8 else None
        if kind == 255:  # QEMU client message
            return self._qemu_size()
        raise RfbProtocolError(f"unknown client message type {kind}")

    def _qemu_size(self) -> int | None:
        buf = self._buf
        if len(buf) < 2:
            return None
        if buf[1] == 0:  # extended key event
            return 12
        if buf[1] == 1:  # audio: enable (0), disable (1), set format (2)
            if len(buf) < 4:
                return None
            operation = _u16(buf, 2)
            if operation in (0, 1):
                return 4
            if operation == 2:
                return 10
            raise RfbProtocolError(f"unknown QEMU audio operation {operation}")
        raise RfbProtocolError(f"unknown QEMU client message {buf[1]}")


def _classify(kind: int, raw: bytes) -> ClientMessage:
    if kind == 4:
        return ClientMessage("KeyEvent", "input", raw, down=raw[1] != 0, key_id=raw[4:8])
    if kind == 5:
        return ClientMessage(
            "PointerEvent", "input", raw, x=_u16(raw, 2), y=_u16(raw, 4), buttons=raw[1]
        )
    if kind == 255 and raw[1] == 0:
        return ClientMessage(
            "QemuKeyEvent", "input", raw, down=_u16(raw, 2) != 0, key_id=b"q" + raw[4:12]
        )
    if kind == 2:
        count = _u16(raw, 2)
        encodings = struct.unpack_from(f">{count}i", raw, 4)
        return ClientMessage("SetEncodings", "other", raw, encodings=encodings)
    names: dict[int, tuple[str, MessageKind]] = {
        0: ("SetPixelFormat", "other"),
        3: ("FramebufferUpdateRequest", "other"),
        6: ("ClientCutText", "clipboard"),
        150: ("EnableContinuousUpdates", "other"),
        248: ("ClientFence", "other"),
        250: ("Xvp", "power"),
        251: ("SetDesktopSize", "resize"),
        255: ("QemuAudio", "other"),
    }
    name, category = names[kind]
    return ClientMessage(name, category, raw)


# ---------------------------------------------------------------------- what is forwarded


def forwarded_bytes(message: ClientMessage) -> bytes:
    """The bytes to send the server for a message the bridge forwards: ClientInit always
    asks for a shared session (a viewer never disconnects the others), SetEncodings
    without UNSAFE_ENCODINGS; everything else as received."""
    if message.name == "ClientInit":
        return b"\x01"
    if message.name == "SetEncodings":
        kept = [e for e in message.encodings if e not in UNSAFE_ENCODINGS]
        return set_encodings(kept)
    return message.raw


def set_encodings(encodings: list[int]) -> bytes:
    return struct.pack(f">BxH{len(encodings)}i", 2, len(encodings), *encodings)


def key_release(message: ClientMessage) -> bytes:
    """The event that releases the key a KeyEvent or QEMU key event pressed."""
    if message.name == "KeyEvent":
        return message.raw[:1] + b"\x00" + message.raw[2:]
    if message.name == "QemuKeyEvent":
        return message.raw[:2] + b"\x00\x00" + message.raw[4:]
    raise ValueError(f"{message.name} is not a key event")


def pointer_event(x: int, y: int, buttons: int) -> bytes:
    return struct.pack(">BBHH", 5, buttons, x, y)


def key_event(down: bool, keysym: int) -> bytes:
    return struct.pack(">BBxxI", 4, int(down), keysym)
