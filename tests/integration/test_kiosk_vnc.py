"""Live view and take over on a real kiosk (SPEC S6.2): x11vnc in the kiosk container, the
relay run through the engine's exec API (`DockerBackend.open_exec`), and the gateway's
bridge (`orchestrator.people.live_view.bridge_vnc`) served by uvicorn to a real WebSocket client
(the `websockets` package, offering no subprotocol, as noVNC does).

Effects are read back from the page (the kiosk's eval op), polled, never slept for; the
order of RFB messages is used as a fence: a small update request is answered only after
everything the viewer sent before it was handled.
"""

from __future__ import annotations

import contextlib
import socket
import statistics
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

import anyio
import docker
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket
from websockets.asyncio.client import ClientConnection, connect

from orchestrator.backends.channel import KioskChannel
from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.people.live_view import BridgeOutcome, bridge_vnc, open_vnc
from sandboxes.ports import ExecStream
from sandboxes.rfb import ClientMessage, key_event, pointer_event
from tests.helpers import host_mounts, wait_until
from tests.kiosk_helpers import (
    RfbViewer,
    data_url,
    exec_output,
    program_processes,
    relay_processes,
    running_kiosk,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

WIDTH, HEIGHT = 800, 600
PAGE = """<!doctype html><title>none</title><body style="margin:0">
<script>window.clicks = [];</script>
<button id="a" style="position:absolute;left:100px;top:100px;width:200px;height:80px"
  onclick="clicks.push('a'); document.title = clicks.join(',')">A</button>
<button id="b" style="position:absolute;left:400px;top:100px;width:200px;height:80px"
  onclick="clicks.push('b'); document.title = clicks.join(',')">B</button>
<input id="t" style="position:absolute;left:100px;top:300px;width:300px;height:40px">
</body>"""
A, B, FIELD = (200, 140), (500, 140), (250, 320)
CTRL, KEY_A, KEY_B, KEY_C = 0xFFE3, 0x61, 0x62, 0x63


@pytest.fixture(scope="module")
async def kiosk(backend: DockerBackend) -> AsyncIterator[KioskChannel]:
    async with running_kiosk(backend, WIDTH, HEIGHT) as (channel, started):
        vnc = started["vnc"]  # none runs until a viewer comes (or the `vnc` op starts one)
        assert isinstance(vnc, dict) and not vnc["running"] and vnc["error"] is None, vnc
        yield channel


@pytest.fixture
async def page(kiosk: KioskChannel) -> KioskChannel:
    """The test page, freshly loaded (no click recorded, empty field)."""
    await kiosk.request("navigate", 30, url=data_url(PAGE))
    return kiosk


@dataclass
class Seat:
    """The caller's side of the bridge: on_input answers from `script` in order (then
    `default`), and records what it was asked."""

    script: list[bool] = field(default_factory=list)
    default: bool = True
    asked: list[str] = field(default_factory=list)
    outcomes: list[BridgeOutcome] = field(default_factory=list)

    async def decide(self, message: ClientMessage) -> bool:
        self.asked.append(message.name)
        return self.script.pop(0) if self.script else self.default


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the test process's signals stay pytest's


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.asynccontextmanager
async def gateway(backend: DockerBackend, kiosk: KioskChannel, seat: Seat) -> AsyncIterator[str]:
    """A WebSocket route as the gateway will have one, on uvicorn on a loopback port:
    open the relay, then bridge. Yields its URL."""

    async def vnc(websocket: WebSocket) -> None:
        stream = await open_vnc(backend, kiosk.id)
        seat.outcomes.append(await bridge_vnc(websocket, stream, seat.decide))

    port = free_port()
    app = Starlette(routes=[WebSocketRoute("/vnc", vnc)])
    config = uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off", log_level="warning")
    server = _Server(config)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(server.serve)
        await wait_until(lambda: server.started, 15)
        try:
            yield f"ws://127.0.0.1:{port}/vnc"
        finally:
            server.should_exit = True


def viewer_on(ws: ClientConnection) -> RfbViewer:
    async def receive() -> bytes:
        data = await ws.recv()
        assert isinstance(data, bytes), "RFB travels in binary frames"
        return data

    return RfbViewer(ws.send, receive)


async def title(kiosk: KioskChannel) -> str:
    return str((await kiosk.request("page", 10))["title"])


async def evaluate(kiosk: KioskChannel, expression: str) -> object:
    return (await kiosk.request("eval", 10, expression=expression))["value"]


async def click(viewer: RfbViewer, x: int, y: int) -> None:
    await viewer.send(pointer_event(x, y, 1) + pointer_event(x, y, 0))


# ---------------------------------------------------------------------------- the tests

# Every listening TCP socket and every bound UDP socket, IPv4 and IPv6 (state 0A: LISTEN).
LISTENING = """
for path in ("/proc/net/tcp", "/proc/net/tcp6", "/proc/net/udp", "/proc/net/udp6"):
    for line in open(path).read().splitlines()[1:]:
        parts = line.split()
        if path.endswith(("udp", "udp6")) or parts[3] == "0A":
            print(path, parts[1])
"""


async def test_x11vnc_listens_on_a_unix_socket_only_and_nothing_is_published(
    backend: DockerBackend, kiosk: KioskChannel, docker_client: docker.DockerClient
) -> None:
    """No TCP or UDP port is listening anywhere in the kiosk, IPv4 or IPv6, and the
    container publishes no port and mounts no host path. Control: x11vnc with only
    `-rfbport 0` (what was thought enough) does listen, on :::5900, and the same check
    sees it."""
    listening = LISTENING
    status = await kiosk.request("vnc", 10, start=True)  # it runs while this is checked
    assert status["running"] and status["socket"] == "/tmp/corral-vnc.sock"

    assert await exec_output(backend, kiosk.id, ["python3", "-c", listening]) == b""
    attrs = docker_client.containers.get(kiosk.id).attrs
    assert not attrs["HostConfig"].get("PortBindings")
    assert not attrs["NetworkSettings"].get("Ports")
    assert host_mounts(attrs) == []

    control = await backend.open_exec(
        kiosk.id,
        ["x11vnc", "-display", ":99", "-unixsock", "/tmp/control.sock", "-rfbport", "0", "-q"],
        user="1000:1000",
    )
    try:
        seen = await wait_until(
            lambda: exec_output(backend, kiosk.id, ["python3", "-c", listening]), 20
        )
        assert b"tcp6" in seen and b":170C" in seen  # port 5900
    finally:
        await exec_output(backend, kiosk.id, ["pkill", "-f", "control.sock"])
        await control.close()


async def test_an_rfb_38_handshake_through_the_exec_relay_gets_the_whole_screen(
    backend: DockerBackend, kiosk: KioskChannel
) -> None:
    stream = await open_vnc(backend, kiosk.id)

    async def receive() -> bytes:
        return await stream.receive() or b""

    try:
        viewer = RfbViewer(stream.send, receive)
        with anyio.fail_after(30):
            await viewer.handshake()
            assert (viewer.width, viewer.height) == (WIDTH, HEIGHT)
            assert await viewer.whole_screen() == WIDTH * HEIGHT
    finally:
        await stream.close()
    assert await relay_processes(backend, kiosk.id) == 0


async def test_a_click_through_the_bridge_reaches_the_page_and_a_refused_one_does_not(
    backend: DockerBackend, page: KioskChannel
) -> None:
    seat = Seat(script=[False, False, True, True])  # A's press and release refused; B's not
    async with gateway(backend, page, seat) as url, connect(url, max_size=None) as ws:
        viewer = viewer_on(ws)
        with anyio.fail_after(30):
            await viewer.handshake()
            await click(viewer, *A)
            await click(viewer, *B)
            await wait_until(lambda: _titled(page, "b"), 10)

    assert await evaluate(page, "clicks") == ["b"]  # A's click, sent first, never landed
    assert seat.asked == ["PointerEvent"] * 4
    await wait_until(lambda: seat.outcomes, 10)
    assert seat.outcomes[0].inputs_dropped == 2 and seat.outcomes[0].inputs_forwarded == 2


async def _titled(kiosk: KioskChannel, expected: str) -> bool:
    return await title(kiosk) == expected


async def test_typing_through_the_bridge_and_a_key_held_when_the_seat_is_lost_is_released(
    backend: DockerBackend, page: KioskChannel
) -> None:
    """Ctrl is held, then the viewer loses the seat (a refused message): the bridge
    releases ctrl on the kiosk, so the next key types a letter instead of ctrl+c (copy).
    Keys are sent as keysyms; x11vnc maps them on the kiosk's keyboard."""
    # click (2), a and b (4), ctrl down: allowed; a pointer move: refused; c down, c up
    seat = Seat(script=[True] * 7 + [False] + [True] * 2)
    async with gateway(backend, page, seat) as url, connect(url, max_size=None) as ws:
        viewer = viewer_on(ws)
        with anyio.fail_after(30):
            await viewer.handshake()
            await click(viewer, *FIELD)
            await viewer.fence()
            await wait_until(lambda: _focused(page), 10)
            for key in (KEY_A, KEY_B):
                await viewer.send(key_event(True, key) + key_event(False, key))
            await viewer.send(key_event(True, CTRL))
            await viewer.send(pointer_event(FIELD[0] + 1, FIELD[1], 0))  # refused
            await viewer.send(key_event(True, KEY_C) + key_event(False, KEY_C))
            await viewer.fence()
            await wait_until(lambda: _field_is(page, "abc"), 10)
    assert seat.asked.count("KeyEvent") == 7


async def _focused(kiosk: KioskChannel) -> bool:
    return await evaluate(kiosk, "document.activeElement.id") == "t"


async def _field_is(kiosk: KioskChannel, expected: str) -> bool:
    return await evaluate(kiosk, "document.getElementById('t').value") == expected


async def test_the_relay_process_ends_when_the_viewer_leaves_or_breaks_the_protocol(
    backend: DockerBackend, kiosk: KioskChannel
) -> None:
    seat = Seat()
    async with gateway(backend, kiosk, seat) as url:
        async with connect(url, max_size=None) as ws:
            viewer = viewer_on(ws)
            with anyio.fail_after(30):
                await viewer.handshake()
            assert await relay_processes(backend, kiosk.id) == 1
        await wait_until(lambda: len(seat.outcomes) == 1, 15)
        assert seat.outcomes[0].by == "viewer"
        assert await relay_processes(backend, kiosk.id) == 0

        async with connect(url, max_size=None) as ws:
            viewer = viewer_on(ws)
            with anyio.fail_after(30):
                await viewer.handshake()
            await ws.send(b"\x07 not an RFB message")
            await wait_until(lambda: len(seat.outcomes) == 2, 15)
        assert seat.outcomes[1].by == "protocol"
        assert ws.close_code == 1008
        assert await relay_processes(backend, kiosk.id) == 0


async def test_a_connected_viewer_does_not_slow_screenshots_or_clicks(
    backend: DockerBackend, page: KioskChannel
) -> None:
    """Not a benchmark: the kiosk's own paths keep their bounds (test_kiosk_agent.py's
    test_timings) while a viewer watches and keeps asking for updates, as noVNC does."""

    async def timings() -> tuple[float, float]:
        shots, clicks = [], []
        for _ in range(7):
            t0 = time.perf_counter()
            await page.request("screenshot", 10)
            shots.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await page.request("click", 10, x=10, y=10, button="left", double=False)
            clicks.append(time.perf_counter() - t0)
        return statistics.median(shots), statistics.median(clicks)

    alone = await timings()
    seat = Seat()
    async with gateway(backend, page, seat) as url, connect(url, max_size=None) as ws:
        viewer = viewer_on(ws)
        await viewer.handshake()
        await viewer.whole_screen()
        async with anyio.create_task_group() as tasks:

            async def watch() -> None:
                while True:
                    await viewer.request(0, 0, WIDTH, HEIGHT, incremental=True)
                    await viewer.update()

            tasks.start_soon(watch)
            watched = await timings()
            tasks.cancel_scope.cancel()
    print(
        f"medians alone: screenshot {alone[0] * 1000:.1f} ms, click {alone[1] * 1000:.1f} ms; "
        f"watched: screenshot {watched[0] * 1000:.1f} ms, click {watched[1] * 1000:.1f} ms"
    )
    assert watched[0] < 0.5 and watched[1] < 0.1


async def test_when_x11vnc_dies_the_kiosk_keeps_working_says_so_and_can_restart_it(
    backend: DockerBackend,
) -> None:
    async with running_kiosk(backend, 640, 480, url=data_url(PAGE)) as (kiosk, _):
        vnc = await kiosk.request("vnc", 10, start=True)
        assert vnc["running"] and vnc["ready"] and vnc["error"] is None, vnc
        pid = vnc["pid"]
        await exec_output(backend, kiosk.id, ["kill", "-KILL", str(pid)])

        status = await wait_until(lambda: _vnc_down(kiosk), 10)
        assert status["error"] == "x11vnc exited with status -9"
        shot = await kiosk.request("screenshot", 10)
        assert shot["probe"]["error"] is None and shot["probe"]["windows"] == 1
        await kiosk.request("click", 10, x=A[0], y=A[1], button="left", double=False)
        await wait_until(lambda: _titled(kiosk, "a"), 10)

        restarted = await kiosk.request("vnc", 10, restart=True)
        assert restarted["running"] and restarted["ready"] and restarted["error"] is None
        stream = await open_vnc(backend, kiosk.id)
        try:

            async def receive() -> bytes:
                return await stream.receive() or b""

            viewer = RfbViewer(stream.send, receive)
            with anyio.fail_after(30):
                await viewer.handshake()
            assert (viewer.width, viewer.height) == (640, 480)
        finally:
            await stream.close()


async def _vnc_down(kiosk: KioskChannel) -> dict[str, object] | None:
    status = await kiosk.request("vnc", 10)
    return None if status["running"] else status


async def test_x11vnc_runs_only_once_a_viewer_comes_one_for_two_at_once_and_again_after_it_died(
    backend: DockerBackend,
) -> None:
    """A kiosk nobody watches runs no x11vnc (issue 23 item 7: its memory). Two viewers
    arriving at the same moment get one server (its start is under a lock), both see the
    screen; after it is killed, the next viewer's relay starts another."""
    async with running_kiosk(backend, 640, 480, url=data_url(PAGE)) as (kiosk, started):
        assert started["vnc"]["running"] is False and started["vnc"]["error"] is None
        assert await program_processes(backend, kiosk.id, "x11vnc") == 0

        async def view(sizes: list[tuple[int, int]]) -> None:
            stream = await open_vnc(backend, kiosk.id)
            try:
                viewer = RfbViewer(stream.send, lambda: _received(stream))
                with anyio.fail_after(30):
                    await viewer.handshake()
                sizes.append((viewer.width, viewer.height))
            finally:
                await stream.close()

        sizes: list[tuple[int, int]] = []
        async with anyio.create_task_group() as both:
            both.start_soon(view, sizes)
            both.start_soon(view, sizes)
        assert sizes == [(640, 480), (640, 480)]
        assert await program_processes(backend, kiosk.id, "x11vnc") == 1
        status = await kiosk.request("vnc", 10)
        assert status["running"] and status["ready"] and status["pid"], status

        await exec_output(backend, kiosk.id, ["kill", "-KILL", str(status["pid"])])
        # gone, not dying: a dying server's socket may still take a connection it never serves
        await wait_until(lambda: _process_gone(backend, kiosk.id, int(status["pid"])), 10)
        assert (await kiosk.request("vnc", 10))["running"] is False
        await view(sizes)
        assert sizes[-1] == (640, 480)
        assert await program_processes(backend, kiosk.id, "x11vnc") == 1


async def _process_gone(backend: DockerBackend, container_id: str, pid: int) -> bool:
    """No process `pid` in the container, not even a zombie (tini reaps the relay's)."""
    probe = ["python3", "-c", f"import os; print(os.path.exists('/proc/{pid}'))"]
    return (await exec_output(backend, container_id, probe)).strip() == b"False"


async def _received(stream: ExecStream) -> bytes:
    return await stream.receive() or b""
