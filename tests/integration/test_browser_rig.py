"""The browser rig's channel and rules against the real engine and real Chromium (no
network: these rigs get none): no TCP port anywhere, a private CDP socket that takes
one client, the action budget, and removal by rig_close and by idle expiry."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import docker
import pytest
from websockets.asyncio.client import unix_connect
from websockets.exceptions import ConnectionClosed

from orchestrator.config import load_config, render_new_agent
from orchestrator.home import CorralHome
from orchestrator.runtime import Runtime
from orchestrator.surfaces.answers import Answer
from orchestrator.surfaces.kiosk.sessions import no_egress
from orchestrator.surfaces.rigs import RigManager
from tests.helpers import host_mounts, wait_until
from tests.kiosk_helpers import exec_output

pytestmark = [pytest.mark.anyio]

# The rigs this process started (its RigManager is in-process): another test run's are not.
MINE = f"corral.owner.pid={os.getpid()}"
LISTENING = """
for path in ("/proc/net/tcp", "/proc/net/tcp6", "/proc/net/udp", "/proc/net/udp6"):
    for line in open(path).read().splitlines()[1:]:
        parts = line.split()
        if path.endswith(("udp", "udp6")) or parts[3] == "0A":
            print(path, parts[1])
"""


def agent(home: CorralHome, **cu: object) -> None:
    text = render_new_agent("ann").replace("browser_use = false", "browser_use = true")
    for key, value in cu.items():
        text = text.replace(
            "[capabilities.computer_use_config]\n",
            f"[capabilities.computer_use_config]\n{key} = {value}\n",
        )
        text = text.replace("max_actions = 50\n", "") if key == "max_actions" else text
    path = home.agent_file("ann")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@contextlib.asynccontextmanager
async def browser_rigs(home: CorralHome, runtime: Runtime) -> AsyncIterator[RigManager]:
    """A rig manager (no egress) for agent ann with browser_use on; its rigs closed after."""
    agent(home)
    manager = RigManager(
        home, load_config(home.config_file), runtime.backend, runtime.audit, no_egress
    )
    try:
        yield manager
    finally:
        await manager.close_all()


@pytest.fixture
async def rigs(corral_home: CorralHome, runtime: Runtime) -> AsyncIterator[RigManager]:
    async with browser_rigs(corral_home, runtime) as manager:
        yield manager


async def call(rigs: RigManager, verb: str, **args: object) -> Answer:
    return await rigs.handle("ann", "browser_use", {"verb": verb, **args})


def text(result: Answer) -> str:
    return result.text


async def test_no_port_listens_in_the_rig_and_its_cdp_socket_is_private_and_single_use(
    rigs: RigManager, runtime: Runtime, docker_client: docker.DockerClient
) -> None:
    assert not (await call(rigs, "tabs")).is_error
    rig = rigs.rigs[("ann", "browser", "")]

    assert await exec_output(runtime.backend, rig.container.id, ["python3", "-c", LISTENING]) == b""
    attrs = docker_client.containers.get(rig.container.id).attrs
    assert attrs["HostConfig"]["NetworkMode"] == "none"
    assert not attrs["HostConfig"].get("PortBindings")
    assert host_mounts(attrs) == []
    assert attrs["HostConfig"]["ReadonlyRootfs"] and attrs["Config"]["User"] == "1000:1000"
    assert attrs["HostConfig"]["CapDrop"] == ["ALL"]
    socket_path = Path(rig.bridge.socket_path)
    assert stat.S_IMODE(socket_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(socket_path.parent.stat().st_mode) == 0o700
    # Playwright holds the one connection; a second client is closed at once.
    async with unix_connect(str(socket_path), uri="ws://localhost/devtools/browser/x") as ws:
        with pytest.raises(ConnectionClosed) as closed:
            await ws.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    assert not (await call(rigs, "tabs")).is_error  # Playwright's connection still works


async def test_counted_verbs_stop_at_max_actions_and_reads_stay_free(
    corral_home: CorralHome, rigs: RigManager
) -> None:
    agent(corral_home, max_actions=2)
    await call(rigs, "clipboard_set", text="a")  # counted (it may fail on about:blank)
    await call(rigs, "press", key="Tab")  # counted
    refused = await call(rigs, "press", key="Tab")

    assert refused.is_error
    assert "2 actions are used up" in text(refused) and "rig_close" in text(refused)
    for verb in ("screenshot", "tabs"):
        assert not (await call(rigs, verb)).is_error, verb
    assert not (await call(rigs, "extract", mode="console")).is_error


async def test_rig_close_and_idle_expiry_remove_the_container(
    corral_home: CorralHome, rigs: RigManager, docker_client: docker.DockerClient
) -> None:
    def containers() -> list[object]:
        return docker_client.containers.list(
            all=True, ignore_removed=True, filters={"label": ["corral.kind=rig-browser", MINE]}
        )

    await call(rigs, "tabs")
    socket_dir = Path(rigs.rigs[("ann", "browser", "")].bridge.socket_path).parent
    closed = await rigs.handle("ann", "rig_close", {})
    assert not closed.is_error and containers() == []
    assert not socket_dir.exists()

    now = [0.0]
    rigs.clock = lambda: now[0]
    agent(corral_home, idle_timeout_seconds=5)
    await call(rigs, "tabs")
    assert len(containers()) == 1
    expired = rigs.rigs[("ann", "browser", "")].id
    now[0] = 4.0
    assert await rigs.expire() == []
    now[0] = 5.0
    assert await rigs.expire() == [("ann", "browser", "")]
    await wait_until(lambda: containers() == [], limit=10)
    assert "idle for 5 s" in rigs.ended[("ann", "browser", "")]
    # The next call starts a new rig, and its answer says first why the old one ended.
    again = await call(rigs, "tabs")
    fresh = rigs.rigs[("ann", "browser", "")].id
    told = f"Your browser rig {expired} ended: it was idle for 5 s; this call started a new one"
    told += f", {fresh}."
    assert not again.is_error and text(again).startswith(told), text(again)
    assert not (await call(rigs, "tabs")).text.startswith("Your browser rig")


async def test_the_desktop_rig_listens_on_no_port_and_serves_vnc_on_its_socket_only(
    corral_home: CorralHome, runtime: Runtime, docker_client: docker.DockerClient
) -> None:
    text = render_new_agent("dee").replace("desktop_use = false", "desktop_use = true")
    corral_home.agent_file("dee").parent.mkdir(parents=True, exist_ok=True)
    corral_home.agent_file("dee").write_text(text)
    manager = RigManager(
        corral_home, load_config(corral_home.config_file), runtime.backend, runtime.audit, no_egress
    )
    try:
        result = await manager.handle("dee", "computer_use", {"verb": "screenshot"})
        assert not result.is_error, text(result)
        rig = manager.rigs[("dee", "desktop", "")]
        cid = rig.channel.id  # type: ignore[union-attr]
        assert await exec_output(runtime.backend, cid, ["python3", "-c", LISTENING]) == b""
        vnc = await rig.channel.request("vnc", 10)  # type: ignore[union-attr]
        assert vnc["running"] and vnc["ready"] and vnc["socket"] == "/tmp/corral-vnc.sock"
        attrs = docker_client.containers.get(cid).attrs
        assert attrs["HostConfig"]["NetworkMode"] == "none"
        assert attrs["HostConfig"]["ReadonlyRootfs"] and attrs["Config"]["User"] == "1000:1000"
        assert host_mounts(attrs) == [] and not attrs["HostConfig"].get("PortBindings")
    finally:
        await manager.close_all()
    assert (
        docker_client.containers.list(
            all=True, ignore_removed=True, filters={"label": ["corral.kind=rig-desktop", MINE]}
        )
        == []
    )


async def test_a_rig_whose_agent_loses_browser_use_is_removed_at_the_next_check(
    corral_home: CorralHome, rigs: RigManager, docker_client: docker.DockerClient
) -> None:
    await call(rigs, "tabs")
    assert await rigs.expire() == []
    corral_home.agent_file("ann").write_text(render_new_agent("ann"))  # browser_use off

    assert await rigs.expire() == [("ann", "browser", "")]
    assert "revoked" in rigs.ended[("ann", "browser", "")]
    assert (
        docker_client.containers.list(
            all=True, ignore_removed=True, filters={"label": ["corral.kind=rig-browser", MINE]}
        )
        == []
    )
