"""A `corral mcp` whose client goes away (its stdin closed) removes its warm pool, then
leaves without the interpreter's teardown (`corral_cli.serve.leave_at_once`): exit code
0, every answer written before, no error on stderr, and none of the containers it owned
left at the moment it is gone (so none was left for the owner watchdog to find)."""

from __future__ import annotations

import json
import subprocess
from typing import IO, Any

import docker
import pytest

from tests.e2e.conftest import AGENT
from tests.helpers import corral_bin, env_with_home, wait_until, write_config

pytestmark = pytest.mark.anyio


def _send(stdin: IO[bytes], message: dict[str, Any]) -> None:
    stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
    stdin.flush()


def _owned(client: docker.DockerClient, pid: int) -> list[str]:
    found = client.containers.list(
        ignore_removed=True,
        all=True,
        filters={"label": ["corral.managed=true", f"corral.owner.pid={pid}"]},
    )
    return [c.id for c in found]


def _full_pool(client: docker.DockerClient, pid: int) -> list[str] | None:
    """The front's containers once its warm pool of 2 is full (one engine query)."""
    owned = _owned(client, pid)
    return owned if len(owned) == 2 else None


async def test_a_front_whose_client_leaves_removes_its_pool_and_exits_cleanly(
    agent_home: Any, docker_client: docker.DockerClient
) -> None:
    write_config(agent_home, "[container.sandbox]\nwarm = 2\n")
    proc = subprocess.Popen(
        [corral_bin(), "mcp", "--agent", AGENT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env_with_home(agent_home),
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        hello = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        _send(proc.stdin, {"id": 1, "method": "initialize", "params": hello})
        assert json.loads(proc.stdout.readline())["id"] == 1
        _send(proc.stdin, {"method": "notifications/initialized"})
        _send(proc.stdin, {"id": 2, "method": "tools/list"})
        listed = json.loads(proc.stdout.readline())
        assert listed["id"] == 2 and listed["result"]["tools"], listed
        pool = await wait_until(lambda: _full_pool(docker_client, proc.pid))
        proc.stdin.close()
        await wait_until(lambda: proc.poll() is not None, limit=60)
        errors = proc.stderr.read().decode(errors="replace")
        assert proc.returncode == 0, errors
        assert proc.stdout.read() == b""  # nothing half written after the last answer
        still = set(pool) & set(_owned(docker_client, proc.pid))
        assert not still, "the front left its pool containers behind"
        assert "Traceback" not in errors
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()
