"""The kiosk channel's bounds on the real engine: a container that floods its stdout, or
never reads its stdin, cannot hold the gateway (a worker thread, memory, a lock) past the
request's deadline. Stand-in containers from the sandbox image play the misbehaving
kiosk; the session-level consequences are in tests/unit/test_session_rules.py. Each runs
on both channels: the engine's attach, and the channel's own socket (`channel_socket`),
which the stand-in takes with the images' own code (rig_images/channel_socket.py) before
it runs its script."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import anyio
import docker
import pytest

from orchestrator.backends.channel import KioskChannel
from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.backends.docker.channel_socket import TARGET as CHANNEL_TARGET
from orchestrator.errors import KioskError
from sandboxes.isolation import locked_down
from sandboxes.liveness import SILENCE_S
from tests.images import DEFAULT_SANDBOX_IMAGE
from tests.kiosk_helpers import taking_the_socket

pytestmark = pytest.mark.anyio

SANDBOX_IMAGE = DEFAULT_SANDBOX_IMAGE
Opener = Callable[[DockerBackend, str], Awaitable[KioskChannel]]


@pytest.fixture(params=["attach", "socket"])
def channel_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def channel_running(backend: DockerBackend, channel_kind: str) -> Opener:
    async def open_one(backend: DockerBackend, script: str) -> KioskChannel:
        socket = channel_kind == "socket"
        spec = locked_down(
            image=SANDBOX_IMAGE,
            command=taking_the_socket(("sh", "-c", script)) if socket else ("sh", "-c", script),
            labels=backend.labels(kind="test-kiosk", agent="bounds", session="bounds"),
            tmpfs={"/tmp": "rw,nosuid,nodev,size=16m"},
            stdin_open=True,
            channel_socket=socket,
        )
        channel = await KioskChannel.open(backend, spec)
        mounts = (await backend.inspect_container(channel.id))["Mounts"]
        assert any(m["Destination"] == CHANNEL_TARGET for m in mounts) is socket
        return channel

    return open_one


def gone(client: docker.DockerClient, container_id: str) -> bool:
    return not client.containers.list(ignore_removed=True, all=True, filters={"id": container_id})


async def test_a_flood_without_line_ends_breaks_the_channel_at_the_bound(
    backend: DockerBackend, docker_client: docker.DockerClient, channel_running: Opener
) -> None:
    channel = await channel_running(backend, "head -c 48000000 /dev/zero | tr '\\0' x; sleep 60")
    container_id = channel.id
    try:
        with pytest.raises(KioskError, match="without a line end"):
            await channel.request("screenshot", 60)
        assert channel.broken is not None and "flood" in channel.broken
        with pytest.raises(KioskError, match="not usable"):
            await channel.request("click", 5)
    finally:
        await channel.close()
    assert gone(docker_client, container_id)


async def test_a_kiosk_that_never_reads_cannot_hold_a_request_past_its_deadline(
    backend: DockerBackend, docker_client: docker.DockerClient, channel_running: Opener
) -> None:
    channel = await channel_running(backend, "exec sleep 60")  # never reads its stdin
    container_id = channel.id
    try:
        started = time.monotonic()
        with anyio.fail_after(30), pytest.raises(KioskError, match="within 2 s"):
            await channel.request("type", 2, text="x" * (16 * 1024 * 1024))
        assert time.monotonic() - started < 10
        # A second caller waiting behind it is not left hanging either.
        with pytest.raises(KioskError):
            await channel.request("click", 2)
    finally:
        await channel.close()
    assert gone(docker_client, container_id)


# Stand-in agents. Each answers its first request at once (the channel's heartbeat is
# armed once an agent has answered: before, it may still be starting up), then:
SILENT_AGENT = """
import json, sys
first = json.loads(sys.stdin.readline())
print(json.dumps({"id": first["id"], "ok": True}), flush=True)
for raw in sys.stdin:  # reads on (a send never blocks) and answers nothing, pings included
    pass
"""
# ... answers pings at once, and its second request only after it has seen `WANT` pings
# (the heartbeat, not a clock, paces it): a busy agent.
BUSY_AGENT = """
import json, sys
first = json.loads(sys.stdin.readline())
print(json.dumps({"id": first["id"], "ok": True}), flush=True)
pings, waiting = 0, None
for raw in sys.stdin:
    req = json.loads(raw)
    if req["op"] != "ping":
        waiting = req["id"]
        continue
    pings += 1
    print(json.dumps({"id": req["id"], "ok": True, "pong": True}), flush=True)
    if pings == WANT and waiting is not None:
        print(json.dumps({"id": waiting, "ok": True, "pings": pings}), flush=True)
"""


async def test_an_agent_that_answers_nothing_breaks_its_channel_long_before_the_deadline(
    backend: DockerBackend, docker_client: docker.DockerClient, channel_running: Opener
) -> None:
    """Once it has answered, it answers nothing, pings included: a hung agent, seen by
    the heartbeat, not by the request's 60 s deadline."""
    channel = await channel_running(backend, f"exec python3 -c '{SILENT_AGENT}'")
    container_id = channel.id
    try:
        await channel.request("start", 30)
        with anyio.fail_after(30), pytest.raises(KioskError, match=r"no sign of life for 2\.5 s"):
            await channel.request("click", 60, x=1, y=1)
        assert channel.broken is not None and "while it ran click" in channel.broken
    finally:
        await channel.close()
    assert gone(docker_client, container_id)


async def test_an_agent_that_never_answered_is_left_its_deadline_to_start(
    backend: DockerBackend, docker_client: docker.DockerClient, channel_running: Opener
) -> None:
    """Before its first answer an agent may still be starting (its interpreter, on a
    loaded host): silence then is not a hang, and only the request's deadline ends it."""
    channel = await channel_running(backend, "exec cat > /dev/null")
    container_id = channel.id
    try:
        with anyio.fail_after(30), pytest.raises(KioskError, match="no answer to start within 4"):
            await channel.request("start", 4)
    finally:
        await channel.close()
    assert gone(docker_client, container_id)


async def test_a_busy_agent_that_answers_its_pings_keeps_its_channel(
    backend: DockerBackend, docker_client: docker.DockerClient, channel_running: Opener
) -> None:
    """Its answer comes after eight pings (4 s), that is after more than the silence that
    breaks a channel: the pongs are signs of life, and the request gets its answer."""
    channel = await channel_running(backend, f"exec python3 -c '{BUSY_AGENT.replace('WANT', '8')}'")
    container_id = channel.id
    try:
        await channel.request("start", 30)
        with anyio.fail_after(30):
            answer = await channel.request("navigate", 60, url="about:blank")
        assert answer["pings"] == 8 and channel.broken is None
    finally:
        await channel.close()
    assert gone(docker_client, container_id)


async def test_a_gateway_stalled_longer_than_the_silence_does_not_take_its_agent_for_hung(
    backend: DockerBackend, docker_client: docker.DockerClient, channel_running: Opener
) -> None:
    """Series run f-2: the gateway's side stalled (a loaded host) right after it read a
    pong; no ping went out while it stalled, so the busy agent had nothing to answer. The
    stall is injected as it happens: the event loop blocked, after the first pong was
    read, for longer than the silence that breaks a channel (a fault, not a wait). The
    agent owed no answer for that time: the request gets its answer after its pings."""
    script = BUSY_AGENT.replace("WANT", "3")
    channel = await channel_running(backend, f"exec python3 -c '{script}'")
    container_id = channel.id
    attached = channel._container
    receive = attached.receive
    pongs = 0

    async def stalling_receive() -> bytes | None:
        nonlocal pongs
        if pongs == 1:  # the first pong was read (and counted as a sign of life): stall
            pongs += 1
            time.sleep(SILENCE_S + 1)  # the loop is blocked: this is the fault injected
        data = await receive()
        if data and b'"pong"' in data and pongs == 0:
            pongs = 1
        return data

    try:
        await channel.request("start", 30)
        attached.receive = stalling_receive  # type: ignore[method-assign]
        with anyio.fail_after(30):
            answer = await channel.request("navigate", 60, url="about:blank")
        assert pongs == 2, "the stall was never injected"
        assert answer["pings"] == 3 and channel.broken is None
    finally:
        attached.receive = receive  # type: ignore[method-assign]
        await channel.close()
    assert gone(docker_client, container_id)
