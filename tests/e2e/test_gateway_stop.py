"""`corral gateway` stopped with SIGTERM or Ctrl-C (SIGINT) ends every session itself, its
containers removed, before the process exits; it does not leave them to the owner
watchdog (which acts only once the owner is dead)."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator

import docker
import httpx
import mcp_types as types
import pytest

from orchestrator.audit import AuditLog
from orchestrator.config import render_new_agent
from orchestrator.home import CorralHome
from tests.e2e.conftest import connect, free_port, wait_until
from tests.helpers import corral_bin, env_with_home

pytestmark = pytest.mark.anyio


@pytest.fixture
def gateway(corral_home: CorralHome) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    port = free_port()
    corral_home.config_file.write_text(f"[gateway]\nport = {port}\n")
    agent = corral_home.agent_file("alice")
    agent.parent.mkdir(parents=True, exist_ok=True)
    agent.write_text(
        render_new_agent("alice").replace("computer_use = false", "computer_use = true")
    )
    with (corral_home.root / "gateway.stderr").open("wb") as err:  # a file, never a pipe
        proc = subprocess.Popen(
            [corral_bin(), "gateway"],
            env=env_with_home(corral_home),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def text_of(result: types.CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, types.TextContent))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_stopped_gateway_ends_its_sessions_before_it_exits(
    corral_home: CorralHome,
    gateway: tuple[subprocess.Popen[bytes], int],
    docker_client: docker.DockerClient,
    signum: signal.Signals,
) -> None:
    proc, port = gateway

    async def healthy() -> bool:
        assert proc.poll() is None, "the gateway exited early"
        try:
            async with httpx.AsyncClient() as client:
                return (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200
        except httpx.TransportError:
            return False

    await wait_until(healthy, limit=30)
    async with connect(corral_home, "stdio", agent="alice") as mcp:
        started = await mcp.client.call_tool("computer_session_start", {})
        assert not started.is_error, text_of(started)
    owned = {"label": [f"corral.owner.pid={proc.pid}"]}
    assert (
        len(docker_client.containers.list(ignore_removed=True, all=True, filters=owned)) == 1
    )  # the kiosk

    proc.send_signal(signum)
    assert proc.wait(timeout=60) == 0

    # Gone the moment the process has exited, and ended by the gateway itself.
    assert docker_client.containers.list(ignore_removed=True, all=True, filters=owned) == []
    ended = [
        e for e in AuditLog(corral_home.audit_file).read() if e["event"] == "computer_session_ended"
    ]
    assert [e["details"]["why"] for e in ended] == ["the gateway stopped"]
