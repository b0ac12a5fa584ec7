"""Fixtures for tests that need the real Docker engine and the real sandbox image.

If the engine or the image is missing these tests FAIL (they are never skipped):
`make test` sets both up first.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import docker
import docker.errors
import pytest

from orchestrator.backends.channel import KioskChannel, load_seccomp
from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.backends.owner import Owner
from orchestrator.home import CorralHome
from orchestrator.runtime import Runtime, open_runtime
from sandboxes.isolation import kiosk_spec
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
from tests.images import DEFAULT_DESKTOP_IMAGE, DEFAULT_SANDBOX_IMAGE

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
def sandbox_runtime() -> str:
    """`[container.sandbox] runtime` for the `runtime` fixture; the S1 attack tests run on
    both runc and runsc (gVisor)."""
    return "runc"


@pytest.fixture
def warm() -> int:
    """`[container.sandbox] warm` for the `runtime` fixture. The S1 test modules override
    it with both 0 and 2, so every S1 test runs with the pool off and on."""
    return 0


async def pool_full(rt: Runtime) -> None:
    """Wait (polled, bounded) until the runtime's warm pool holds all its containers."""
    pool = rt.pool
    if pool is not None:
        await wait_until(lambda: len(pool.idle_ids()) == pool.settings.size, limit=60)


async def only_idle_pool_left(rt: Runtime) -> None:
    """Wait (polled, bounded) until the only containers of this runtime are idle warm
    pool containers: a finished run's container is gone (a warm one is removed just after
    the call returns), and no other container of this owner exists."""
    mine = {"corral.instance": rt.owner.instance_id}

    async def others() -> list[str]:
        idle = rt.pool.idle_ids() if rt.pool is not None else set()
        return [c.name for c in await rt.backend.list_managed(mine) if c.id not in idle]

    async def none_left() -> bool:
        return not await others()

    try:
        await wait_until(none_left, limit=30)
    except TimeoutError:
        raise AssertionError(f"containers left behind: {await others()}") from None


@pytest.fixture
async def runtime(
    corral_home: CorralHome, sandbox_image: str, warm: int, sandbox_runtime: str
) -> AsyncIterator[Runtime]:
    write_config(
        corral_home, f'[container.sandbox]\nwarm = {warm}\nruntime = "{sandbox_runtime}"\n'
    )
    async with open_runtime(corral_home, warm=True) as rt:
        assert (rt.pool is not None) == (warm > 0)
        yield rt
        await only_idle_pool_left(rt)
    left = await rt.backend.list_managed({"corral.instance": rt.owner.instance_id})
    assert not left, f"this test left containers behind: {[c.name for c in left]}"


RunScript = Callable[..., Any]


@pytest.fixture
def run_script(runtime: Runtime) -> RunScript:
    """Run one script through `execute_program`; with a pool, only once it is full, and
    the audit must say the run was warm (so the warm path is what the test proves)."""

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
        await pool_full(runtime)
        result = await execute_program(
            params, runtime.script_context(agent), hard_cap_seconds=hard_cap_seconds
        )
        executed = [e for e in runtime.audit.read() if e["event"] == "script_executed"]
        assert executed[-1]["details"]["warm"] is (runtime.pool is not None)
        return result

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


@contextlib.asynccontextmanager
async def desktop_rig(
    backend: DockerBackend, name: str, apps: tuple[str, ...]
) -> AsyncIterator[KioskChannel]:
    """A desktop rig on the real image with the rig's hardening and no network, started
    at 1280x800 with `apps` opened through the agent's `app` op; removed after."""
    channel = await KioskChannel.open(
        backend,
        kiosk_spec(
            image=DEFAULT_DESKTOP_IMAGE,
            labels=backend.labels(kind="rig-desktop", agent=f"{name}-test", session=f"r{name}"),
            network=None,
            seccomp=load_seccomp(),
        ),
    )
    try:
        await channel.request("start", 60, width=1280, height=800, proxy=None)
        for app in apps:
            await channel.request("app", 60, app=app)
        yield channel
    finally:
        await channel.close()
