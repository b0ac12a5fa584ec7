"""How a Kubernetes channel stream ended: closed by the server (the process ended) or
broken (a network error, a close with an error code, the session failing). Only a
broken one sends a script run's output to the pod's log. Below the fake API server's
real streams (tests/integration/kubernetes/test_k8s_scripts.py breaks one with 1011);
here the ends a test server cannot make on purpose: a network error, the session gone."""

from __future__ import annotations

import anyio
import httpx_ws
import pytest

from orchestrator.backends.kubernetes.stream import ChannelStream, ClusterTarget

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


class Ws:
    """A WebSocket session that gives `frames`, then raises `end`."""

    def __init__(self, frames: list[bytes], end: BaseException) -> None:
        self.frames = frames
        self.end = end

    async def receive_bytes(self) -> bytes:
        if self.frames:
            return self.frames.pop(0)
        raise self.end


def stream_over(ws: Ws) -> ChannelStream:
    stream = ChannelStream(ClusterTarget("kubeconfig", None, "corral"), "pod-a", "attach", {})
    stream._ws = ws  # type: ignore[assignment]
    return stream


async def frames_of(stream: ChannelStream) -> list[tuple[int, bytes]]:
    got = []
    while (frame := await stream.next_frame()) is not None:
        got.append(frame)
    return got


@pytest.mark.parametrize("code", [1000, 1005])
async def test_a_normal_close_is_the_end_of_the_output(code: int) -> None:
    stream = stream_over(Ws([b"\x01out"], httpx_ws.WebSocketDisconnect(code)))
    assert await frames_of(stream) == [(1, b"out")]
    assert stream.broken is None


@pytest.mark.parametrize(
    ("end", "said"),
    [
        (httpx_ws.WebSocketDisconnect(1011, "boom"), "code 1011 boom"),
        (httpx_ws.WebSocketNetworkError(), "WebSocketNetworkError"),
        (anyio.ClosedResourceError(), "ClosedResourceError"),
    ],
)
async def test_any_other_end_breaks_the_stream_and_says_how(end: Exception, said: str) -> None:
    stream = stream_over(Ws([b"\x01out"], end))
    assert await frames_of(stream) == [(1, b"out")]
    assert stream.broken is not None and said in stream.broken


async def test_the_session_failing_is_named_not_the_closed_queue_it_leaves() -> None:
    stream = stream_over(Ws([], anyio.ClosedResourceError()))
    stream._failure = OSError("connection reset by peer")
    assert await frames_of(stream) == []
    assert stream.broken == "OSError: connection reset by peer"


async def test_our_own_close_is_not_a_break() -> None:
    ws = Ws([], anyio.ClosedResourceError())
    stream = stream_over(ws)

    async def closed_meanwhile() -> bytes:
        stream._ws = None  # what `close` does first, while a receive is under way
        raise anyio.ClosedResourceError

    ws.receive_bytes = closed_meanwhile  # type: ignore[method-assign]
    assert await frames_of(stream) == []
    assert stream.broken is None
