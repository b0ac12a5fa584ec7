"""AttachSocket on a real socket pair (the engine's side played by the other end, in the
engine's multiplexed frame format), read and written on the event loop: frames read
however the bytes are cut, a waiting reader or writer woken by close, the descriptor
released at once."""

from __future__ import annotations

import socket
import struct

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.backends.docker.attach import AttachSocket, Frames

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def frame(stream: int, data: bytes) -> bytes:
    return struct.pack(">BxxxL", stream, len(data)) + data


def pair() -> tuple[AttachSocket, socket.socket]:
    ours, engine = socket.socketpair()
    return AttachSocket(ours), engine


@given(
    st.lists(st.tuples(st.sampled_from([1, 2]), st.binary(max_size=300)), max_size=8),
    st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=20),
)
def test_frames_come_whole_however_the_bytes_are_cut(
    frames: list[tuple[int, bytes]], cuts: list[int]
) -> None:
    wire = b"".join(frame(kind, data) for kind, data in frames)
    parser, got, at, turn = Frames(), [], 0, 0
    while at < len(wire):
        size = cuts[turn % len(cuts)]
        parser.feed(wire[at : at + size])
        at, turn = at + size, turn + 1
        while (found := parser.next()) is not None:
            got.append(found)
    assert got == frames
    assert parser.next() is None


async def test_frames_come_as_the_engine_sent_them_then_none_at_the_end() -> None:
    attached, engine = pair()
    wire = frame(1, b"out") + frame(2, b"err") + frame(1, b"x" * 3_000_000)
    got: list[object] = []

    def engine_writes() -> None:
        engine.sendall(wire)  # more than the socket buffers hold: written as it is read
        engine.close()

    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, engine_writes)
        while (found := await attached.next_frame()) is not None:
            got.append(found)

    assert got == [(1, b"out"), (2, b"err"), (1, b"x" * 3_000_000)]
    attached.close()


async def test_a_reader_waits_for_a_frame_sent_later_in_pieces() -> None:
    attached, engine = pair()
    got: list[object] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: _read_into(attached, got))
        wire = frame(1, b"late")
        for byte in wire:  # one byte at a time, the reader waiting between them
            await anyio.wait_all_tasks_blocked()
            engine.sendall(bytes([byte]))
    assert got == [(1, b"late")]
    attached.close()
    engine.close()


async def _read_into(attached: AttachSocket, got: list[object]) -> None:
    got.append(await attached.next_frame())


async def test_close_wakes_a_waiting_reader_and_releases_the_descriptor_at_once() -> None:
    attached, engine = pair()
    woken: list[BaseException] = []

    async def read() -> None:
        try:
            await attached.next_frame()
        except anyio.ClosedResourceError as exc:
            woken.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        await anyio.wait_all_tasks_blocked()
        attached.close()

    assert len(woken) == 1
    assert attached.raw.fileno() == -1
    engine.close()


async def test_close_with_no_reader_releases_at_once_and_later_reads_see_the_end() -> None:
    attached, engine = pair()
    attached.close()

    assert attached.raw.fileno() == -1
    assert await attached.next_frame() is None
    attached.close()  # twice: nothing more
    engine.close()


async def test_a_send_larger_than_the_socket_buffers_arrives_whole() -> None:
    attached, engine = pair()
    payload = bytes(range(256)) * 40_000  # ~10 MiB: many partial sends
    received = bytearray()

    def drain() -> None:
        while len(received) < len(payload):
            received.extend(engine.recv(1 << 20))

    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, drain)
        await attached.send(payload)

    assert bytes(received) == payload
    attached.close()
    engine.close()


async def test_close_wakes_a_writer_the_other_end_stopped_reading() -> None:
    attached, engine = pair()
    failed: list[BaseException] = []

    async def write() -> None:
        try:
            await attached.send(b"y" * (16 << 20))  # far beyond the socket buffers
        except (OSError, anyio.ClosedResourceError) as exc:
            failed.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(write)
        await anyio.wait_all_tasks_blocked()  # the writer waits: the buffers are full
        attached.close()

    assert len(failed) == 1
    assert attached.raw.fileno() == -1
    engine.close()
