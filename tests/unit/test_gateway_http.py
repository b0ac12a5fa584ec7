"""The front's HTTP/1.1 client for the gateway (mcp_front/gateway_http.py) against real
sockets on loopback: a server written here byte by byte, so each test decides exactly
what the "gateway" says and when it closes. (Against the real gateway app:
tests/unit/test_gateway_channel.py and test_call_events.py.)"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
import anyio.abc
import pytest

from mcp_front.gateway_http import (
    GatewayHttp,
    GatewayHttpError,
    GatewayTimeout,
    GatewayUnreachable,
    request_bytes,
)

pytestmark = pytest.mark.anyio

OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"
Handle = Callable[[anyio.abc.SocketStream, int], Awaitable[None]]


async def _request(stream: anyio.abc.SocketStream) -> bytes:
    """One whole request (its head and the Content-Length body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += await stream.receive()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.lower().split(b"\r\n")
    length = next(int(line.split(b":")[1]) for line in lines if line.startswith(b"content-length"))
    while len(body) < length:
        body += await stream.receive()
    return head


async def answer_once(stream: anyio.abc.SocketStream, _: int) -> None:
    """One request answered OK; the connection then stays open, never read again."""
    await _request(stream)
    await stream.send(OK)
    await anyio.sleep_forever()


def answering(*parts: bytes) -> Handle:
    """One request answered with `parts`, each sent on its own; then the connection stays
    open, never read again."""

    async def handle(stream: anyio.abc.SocketStream, _: int) -> None:
        await _request(stream)
        for part in parts:
            await stream.send(part)
        await anyio.sleep_forever()

    return handle


@asynccontextmanager
async def server(handle: Handle) -> AsyncIterator[str]:
    """A loopback TCP server calling `handle(stream, n)` for its n-th connection."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    count = 0

    async def serve(stream: anyio.abc.SocketStream) -> None:
        nonlocal count
        count += 1
        async with stream:
            await handle(stream, count)

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        yield f"http://127.0.0.1:{port}/api/x"
        tg.cancel_scope.cancel()


async def test_a_connection_is_kept_and_used_again_for_the_next_call() -> None:
    async def handle(stream: anyio.abc.SocketStream, _: int) -> None:
        for _ in range(3):
            await _request(stream)
            await stream.send(OK)
        await anyio.sleep_forever()

    async with server(handle) as url, GatewayHttp(5) as client:
        for _ in range(3):
            async with client.post(url, b"{}", {}, 5) as reply:
                assert (reply.status, await reply.read()) == (200, b"ok")
        assert client.opened == 1 and client.idle(url) == 1


async def test_an_idle_connection_the_gateway_closed_is_not_used_again() -> None:
    closed = anyio.Event()

    async def handle(stream: anyio.abc.SocketStream, n: int) -> None:
        await _request(stream)
        await stream.send(OK)
        if n == 1:  # the gateway restarts, or its keep-alive timeout passes
            await stream.aclose()
            closed.set()
            return
        await anyio.sleep_forever()

    async with server(handle) as url, GatewayHttp(5) as client:
        async with client.post(url, b"{}", {}, 5) as reply:
            await reply.read()
        await closed.wait()
        async with client.post(url, b"{}", {}, 5) as reply:
            assert (reply.status, await reply.read()) == (200, b"ok")
        assert client.opened == 2


async def test_a_connection_idle_longer_than_its_reuse_bound_is_not_used_again() -> None:
    async with server(answer_once) as url, GatewayHttp(5, idle_reuse_s=0) as client:
        for _ in range(2):  # any time idle is too long: each call on a new connection
            async with client.post(url, b"{}", {}, 5) as reply:
                assert (reply.status, await reply.read()) == (200, b"ok")
        assert client.opened == 2


async def test_an_answer_left_unread_closes_its_connection() -> None:
    half = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf"
    async with server(answering(half)) as url, GatewayHttp(5) as client:
        async with client.post(url, b"{}", {}, 5) as reply:
            assert reply.status == 200  # the body is not read
        assert client.idle(url) == 0


async def test_a_gateway_that_does_not_answer_is_a_timeout_and_nothing_is_kept() -> None:
    async def handle(stream: anyio.abc.SocketStream, _: int) -> None:
        await _request(stream)
        await anyio.sleep_forever()

    async with server(handle) as url, GatewayHttp(5) as client:
        with pytest.raises(GatewayTimeout, match=r"longer than 0\.2 s"):
            async with client.post(url, b"{}", {}, 0.2):
                pass
        assert client.idle(url) == 0


async def test_nothing_listening_is_unreachable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: connections are refused
        async with GatewayHttp(5) as client:
            with pytest.raises(GatewayUnreachable):
                async with client.post(f"http://127.0.0.1:{port}/x", b"{}", {}, 5):
                    pass


async def test_a_proxy_in_the_environment_is_never_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hop is loopback to our own gateway: HTTP(S)_PROXY / ALL_PROXY (here a port with
    nothing behind it) must not take the signed call elsewhere."""
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")

    async with (
        server(answer_once) as url,
        GatewayHttp(5) as client,
        client.post(url, b"{}", {}, 5) as reply,
    ):
        assert (reply.status, await reply.read()) == (200, b"ok")


async def test_a_chunked_answer_comes_piece_by_piece_and_its_connection_is_kept() -> None:
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    handle = answering(head + b"3\r\none\r\n", b"3\r\ntwo\r\n", b"0\r\n\r\n")
    async with server(handle) as url, GatewayHttp(5) as client:
        async with client.post(url, b"{}", {}, 5) as reply:
            assert [piece async for piece in reply.chunks()] == [b"one", b"two"]
        assert client.idle(url) == 1


async def test_an_answer_that_says_close_closes_its_connection() -> None:
    closing = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
    async with server(answering(closing)) as url, GatewayHttp(5) as client:
        async with client.post(url, b"{}", {}, 5) as reply:
            assert await reply.read() == b"ok"
        assert client.idle(url) == 0


async def test_bytes_after_the_answer_fail_the_call_and_close_the_connection() -> None:
    async with server(answering(OK + OK)) as url, GatewayHttp(5) as client:
        with pytest.raises(GatewayHttpError, match="more than one answer"):
            async with client.post(url, b"{}", {}, 5) as reply:
                await reply.read()
        assert client.idle(url) == 0


@pytest.mark.parametrize(
    "said",
    [
        b"HTTP/1.1 two hundred\r\n\r\n",
        b"SSH-2.0-OpenSSH_9.2\r\n",
        b"HTTP/1.1 200 OK\r\nbad\r\n\r\n",
    ],
)
async def test_an_answer_that_is_not_http_is_an_error_not_a_result(said: bytes) -> None:
    async with server(answering(said)) as url, GatewayHttp(5) as client:
        with pytest.raises(GatewayHttpError, match="could not be read"):
            async with client.post(url, b"{}", {}, 5) as reply:
                await reply.read()
        assert client.idle(url) == 0


async def test_headers_without_end_are_an_error_not_memory() -> None:
    async def handle(stream: anyio.abc.SocketStream, _: int) -> None:
        await _request(stream)
        await stream.send(b"HTTP/1.1 200 OK\r\n")
        with anyio.move_on_after(30), contextlib.suppress(anyio.BrokenResourceError, OSError):
            while True:  # until the client hangs up (the sends then fail)
                await stream.send(b"X-Filler: " + b"a" * 1000 + b"\r\n")

    async with server(handle) as url, GatewayHttp(5) as client:
        with pytest.raises(GatewayHttpError, match="headers passed"):
            async with client.post(url, b"{}", {}, 5):
                pass


async def test_a_gateway_that_closes_mid_answer_is_an_error() -> None:
    async def handle(stream: anyio.abc.SocketStream, _: int) -> None:
        await _request(stream)
        await stream.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf")
        await stream.aclose()

    async with server(handle) as url, GatewayHttp(5) as client:
        with pytest.raises(GatewayHttpError, match="closed the connection mid-answer"):
            async with client.post(url, b"{}", {}, 5) as reply:
                await reply.read()


@pytest.mark.parametrize(
    ("name", "value"),
    [("X-Corral-Nonce", "a\r\nX-Evil: 1"), ("X-A\nB", "v"), ("X-Z", "nul\x00"), ("", "v")],
)
def test_a_header_with_a_line_break_is_never_sent(name: str, value: str) -> None:
    with pytest.raises(GatewayHttpError, match="cannot be sent"):
        request_bytes("/api/x", [(name, value)], b"{}")


def test_a_request_is_its_head_then_its_body() -> None:
    sent = request_bytes("/api/x", [("Host", "h:1"), ("Content-Length", "2")], b"{}")
    assert sent == b"POST /api/x HTTP/1.1\r\nHost: h:1\r\nContent-Length: 2\r\n\r\n{}"
