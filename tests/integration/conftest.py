"""Fixtures for tests that need the real Docker engine and the real sandbox image.

If the engine or the image is missing these tests FAIL (they are never skipped):
`make test` sets both up first.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import docker
import docker.errors
import pytest

from orchestrator.config import DEFAULT_SANDBOX_IMAGE
from orchestrator.home import CorralHome
from orchestrator.owner import LABEL_MANAGED
from orchestrator.runtime import Runtime, open_runtime
from sandboxes.script import ScriptResult, execute_program
from sandboxes.script_policy import HARD_CAP_SECONDS, parse_params

TEST_LABEL = "corral.test"


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    client = docker.from_env(version="1.41")
    try:
        client.ping()
    except Exception as exc:  # a clear failure, never a skip
        pytest.fail(f"the Docker engine does not answer ({exc}); run `make test`", pytrace=False)
    yield client
    client.close()


def leaked_containers(client: docker.DockerClient) -> list[Any]:
    """corral containers this test process left: owned by it (or by a process of it that
    died). Containers of another live owner (a gateway, another test run) are not ours."""
    import socket as _socket

    from orchestrator.owner import owner_is_alive, read_boot_id, read_start_time

    me = str(os.getpid())
    host, boot = _socket.gethostname(), read_boot_id()
    leaked = []
    for container in client.containers.list(all=True, filters={"label": f"{LABEL_MANAGED}=true"}):
        labels = container.labels
        if (
            labels.get("corral.test.pid") == me
            or labels.get("corral.owner.pid") == me
            or (
                "corral.owner.pid" in labels
                and (
                    owner_is_alive(labels, host=host, boot_id=boot, start_time_of=read_start_time)
                    is False
                )
            )
        ):
            leaked.append(container)
    return leaked


def remove_and_wait(container: Any) -> None:
    """Force-remove; if a removal is already in progress (409), wait for it to finish."""
    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        return
    except docker.errors.APIError as exc:
        if exc.status_code != 409:
            raise
    with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
        container.wait(condition="removed", timeout=60)


def control_labels(kind: str) -> dict[str, str]:
    """Labels for containers a test starts itself (controls, helpers)."""
    return {LABEL_MANAGED: "true", "corral.kind": kind, "corral.test.pid": str(os.getpid())}


@pytest.fixture(scope="session", autouse=True)
def no_container_left_behind(docker_client: docker.DockerClient) -> Iterator[None]:
    """After the whole suite, no container labelled as corral's may remain (SPEC S0)."""
    yield
    left = leaked_containers(docker_client)
    names = [(c.name, c.labels.get("corral.kind"), c.status) for c in left]
    for container in left:
        remove_and_wait(container)
    assert not names, f"containers leaked by the suite: {names}"


@pytest.fixture(scope="session")
def sandbox_image(docker_client: docker.DockerClient) -> str:
    try:
        docker_client.images.get(DEFAULT_SANDBOX_IMAGE)
    except docker.errors.ImageNotFound:
        pytest.fail(f"{DEFAULT_SANDBOX_IMAGE} is missing; run `make test`", pytrace=False)
    return DEFAULT_SANDBOX_IMAGE


@pytest.fixture
async def runtime(corral_home: CorralHome, sandbox_image: str) -> AsyncIterator[Runtime]:
    async with open_runtime(corral_home) as rt:
        yield rt
        left = await rt.backend.list_managed({"corral.instance": rt.owner.instance_id})
        assert not left, f"this test left containers behind: {[c.name for c in left]}"


RunScript = Callable[..., Any]


@pytest.fixture
def run_script(runtime: Runtime) -> RunScript:
    async def run(
        code: str,
        *,
        language: str = "python",
        timeout_seconds: int = 30,
        hard_cap_seconds: int = HARD_CAP_SECONDS,
        agent: str = "test",
    ) -> ScriptResult:
        params = parse_params(
            {"code": code, "language": language, "timeout_seconds": timeout_seconds}
        )
        return await execute_program(
            params, runtime.script_context(agent), hard_cap_seconds=hard_cap_seconds
        )

    return run


def write_config(home: CorralHome, text: str) -> None:
    home.config_file.write_text(text)


def host_addresses() -> list[str]:
    """This machine's own IPv4 addresses (docker0 gateway, primary), never a remote one."""
    out = subprocess.run(
        ["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, check=True
    ).stdout
    addrs = []
    for line in out.splitlines():
        parts = line.split()
        addr = parts[3].split("/")[0]
        if not addr.startswith("127."):
            addrs.append(addr)
    return addrs


def bridge_gateway() -> str:
    """The host's own address on docker0, which containers on the default bridge can reach."""
    out = subprocess.run(
        ["ip", "-4", "-o", "addr", "show", "docker0"], capture_output=True, text=True, check=True
    ).stdout
    return out.split()[3].split("/")[0]


async def wait_until(predicate: Callable[[], Any], limit: float = 30.0) -> Any:
    """Poll `predicate` (sync or async) until truthy; fail after `limit` s. Not a sleep-sync:
    the check is the condition itself, polled."""
    with anyio.fail_after(limit):
        while True:
            value = predicate()
            if hasattr(value, "__await__"):
                value = await value
            if value:
                return value
            await anyio.sleep(0.05)


def env_with_home(home: CorralHome) -> dict[str, str]:
    env = dict(os.environ)
    env["CORRAL_HOME"] = str(home.root)
    return env


def corral_bin() -> str:
    return str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "corral")
