"""AttachSocket on a real socket pair (the engine's side played by the other end, in
the engine's multiplexed frame format): frames read, a blocked reader woken by close,
and the descriptor released only once no reader thread holds it."""

from __future__ import annotations

import socket
import struct
import threading

from orchestrator.backends.docker.attach import AttachSocket


def frame(stream: int, data: bytes) -> bytes:
    return struct.pack(">BxxxL", stream, len(data)) + data


def pair() -> tuple[AttachSocket, socket.socket]:
    ours, engine = socket.socketpair()
    return AttachSocket(ours), engine


def reader_inside(
    attached: AttachSocket, hold: threading.Event | None = None
) -> tuple[threading.Thread, list[object]]:
    """A thread reading `attached`, started and known to be inside the SDK's read (held
    there, before it polls, until `hold` is set, when given)."""
    got: list[object] = []
    inside = threading.Event()
    original = attached._frames

    def frames() -> object:
        inside.set()
        if hold is not None:
            hold.wait(5)  # between "registered" and "polled"
        yield from original

    attached._frames = frames()  # type: ignore[assignment]
    reader = threading.Thread(target=lambda: got.append(attached.next_frame()))
    reader.start()
    assert inside.wait(5)
    return reader, got


def test_frames_come_as_the_engine_sent_them_then_none_at_the_end() -> None:
    attached, engine = pair()
    engine.sendall(frame(1, b"out") + frame(2, b"err"))
    engine.close()

    assert attached.next_frame() == (1, b"out")
    assert attached.next_frame() == (2, b"err")
    assert attached.next_frame() is None
    attached.close()


def test_close_wakes_a_blocked_reader_which_then_releases_the_descriptor() -> None:
    attached, engine = pair()
    reader, got = reader_inside(attached)

    attached.close()
    reader.join(5)

    assert not reader.is_alive() and got == [None]
    assert attached.raw.fileno() == -1  # released by the reader on its way out
    engine.close()


def test_close_with_no_reader_releases_at_once_and_later_reads_see_the_end() -> None:
    attached, engine = pair()
    attached.close()

    assert attached.raw.fileno() == -1
    assert attached.next_frame() is None
    attached.close()  # twice: nothing more
    engine.close()


def test_the_descriptor_is_not_released_under_a_reader_that_has_not_polled_yet() -> None:
    """The window that left a gateway's thread blocked for good: a reader has the
    descriptor's number (registered for poll) but has not polled when the socket is
    closed. The number must stay ours until that reader is done, or the next socket
    opened could take it and the reader would wait on that one."""
    attached, engine = pair()
    go_on = threading.Event()
    reader, got = reader_inside(attached, go_on)

    attached.close()
    held = attached.raw.fileno()
    go_on.set()
    reader.join(5)

    assert held != -1  # still ours while the reader was inside
    assert not reader.is_alive() and got == [None]  # shut down: it saw the end at once
    assert attached.raw.fileno() == -1
    engine.close()
