"""A kiosk's channel on its own socket (orchestrator/backends/docker/channel_socket.py) on
the real engine: the agent speaks on it, the socket is one read-only file the container
cannot replace, and once the agent is connected nothing else can connect, from inside the
container or from the host. A container whose main process never connects fails its open
and is removed."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import docker
import pytest

from orchestrator.backends.channel import KioskChannel
from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.backends.docker.channel_socket import TARGET
from orchestrator.backends.owner import LABEL_SESSION
from orchestrator.errors import EngineError
from sandboxes.isolation import locked_down
from tests.images import DEFAULT_SANDBOX_IMAGE
from tests.kiosk_helpers import running_kiosk

pytestmark = pytest.mark.anyio

# Run inside the kiosk as its own user: every way at the channel's socket.
ATTACK = """
import json, os, socket
seen = {}
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(TARGET)
    seen["connect"] = "connected"
except OSError as exc:
    seen["connect"] = type(exc).__name__
for name, attempt in (
    ("write", lambda: open(TARGET, "w")),
    ("unlink", lambda: os.unlink(TARGET)),
    ("rename", lambda: os.rename(TARGET, "/tmp/x")),
    ("chmod", lambda: os.chmod(TARGET, 0o777)),
):
    try:
        attempt()
        seen[name] = "done"
    except OSError as exc:
        seen[name] = type(exc).__name__
seen["variable"] = os.environ.get("CORRAL_CHANNEL")
print(json.dumps(seen))
""".replace("TARGET", repr(TARGET))


async def test_the_kiosk_speaks_on_its_own_socket_and_nothing_else_connects(
    backend: DockerBackend, docker_client: docker.DockerClient
) -> None:
    async with running_kiosk(backend, 640, 480) as (channel, started):
        assert started["ok"] is True
        mounts = (await backend.inspect_container(channel.id))["Mounts"]
        [mount] = [m for m in mounts if m["Destination"] == TARGET]
        source = Path(mount["Source"])
        assert mount["RW"] is False
        assert not source.exists()  # unlinked once the agent connected
        assert source.parent.stat().st_mode & 0o777 == 0o700  # the gateway's own folder
        container = docker_client.containers.get(channel.id)
        result = container.exec_run(["python3", "-c", ATTACK], user="1000")
        seen = json.loads(result.output.decode().strip().splitlines()[-1])
        assert seen["connect"] == "ConnectionRefusedError", seen
        assert all(seen[k] != "done" for k in ("write", "unlink", "rename", "chmod")), seen
        assert seen["variable"] == TARGET  # a new process sees the name, and nothing there
        # From the host: the path is gone, so no one reaches the listener either.
        with pytest.raises(OSError), socket.socket(socket.AF_UNIX) as outsider:
            outsider.connect(str(source))
        # The agent's own connection is untouched by all of it.
        shot = await channel.request("screenshot", 60)
        assert shot["ok"] is True and shot["png"]
        container_id = channel.id
    assert not docker_client.containers.list(all=True, filters={"id": container_id})


async def test_a_container_that_never_connects_fails_its_open_and_is_removed(
    backend: DockerBackend, docker_client: docker.DockerClient
) -> None:
    labels = backend.labels(kind="test-kiosk", agent="channel", session="never-connects")
    spec = locked_down(
        image=DEFAULT_SANDBOX_IMAGE, command=("true",), labels=labels, channel_socket=True
    )
    with pytest.raises(EngineError, match="stopped before its channel connected") as raised:
        await KioskChannel.open(backend, spec)
    assert "[backend] channel_socket = false" in str(raised.value)  # what to do about it
    session = f"{LABEL_SESSION}={labels[LABEL_SESSION]}"
    assert docker_client.containers.list(all=True, filters={"label": session}) == []
    assert list(Path(backend.channel_folder.socket_path()).parent.iterdir()) == []


async def test_a_backend_told_so_keeps_every_channel_on_the_attach(
    backend: DockerBackend,
) -> None:
    """`[backend] channel_socket = false`: the same kiosk, spoken to over the attach (no
    socket mounted, nothing named in its environment)."""
    attach_only = DockerBackend(backend.owner, backend.url, channel_socket=False)
    try:
        async with running_kiosk(attach_only, 640, 480) as (channel, started):
            assert started["ok"] is True
            attrs = await attach_only.inspect_container(channel.id)
            assert all(m["Destination"] != TARGET for m in attrs["Mounts"])
            assert not any(e.startswith("CORRAL_CHANNEL=") for e in attrs["Config"]["Env"])
    finally:
        await attach_only.close()
