"""Fixtures for tests that need the real Docker engine and the real sandbox image.

If the engine or the image is missing these tests FAIL (they are never skipped):
`make test` sets both up first.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import docker
import docker.errors
import pytest

from orchestrator.config import DEFAULT_SANDBOX_IMAGE
from orchestrator.docker_backend import DockerBackend
from orchestrator.home import CorralHome
from orchestrator.owner import Owner
from orchestrator.runtime import Runtime, open_runtime
from sandboxes.script import ScriptResult, execute_program
from sandboxes.script_policy import HARD_CAP_SECONDS, parse_params
from tests.helpers import (  # re-exported: test modules import them from here
    bridge_gateway,
    control_labels,
    corral_bin,
    env_with_home,
    host_addresses,
    leaked_containers,
    remove_and_wait,
    wait_until,
    write_config,
)

__all__ = [
    "bridge_gateway",
    "control_labels",
    "corral_bin",
    "env_with_home",
    "host_addresses",
    "leaked_containers",
    "remove_and_wait",
    "wait_until",
    "write_config",
]

TEST_LABEL = "corral.test"


@pytest.fixture(scope="session", autouse=True)
def _no_leaks(no_container_left_behind: None) -> None:
    """Switches the root conftest's leak check on for this folder."""


@pytest.fixture
def host_listener() -> Iterator[int]:
    """A TCP listener on all of this host's IPv4 addresses that answers b'pong'."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", 0))
    server.listen(16)
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.sendall(b"pong")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    server.close()
    thread.join(timeout=5)


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


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def backend() -> AsyncIterator[DockerBackend]:
    """The Docker backend, one per test module (module-scoped kiosks use it)."""
    engine = DockerBackend(Owner.current())
    try:
        yield engine
    finally:
        await engine.close()
