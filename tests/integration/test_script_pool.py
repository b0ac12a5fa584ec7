"""Issue 14: the warm pool of the script sandbox, on the real engine. A container is used
once; one that died or whose image changed is never handed out; the pool holds no slot
of its own; killing its owner leaves nothing behind."""

from __future__ import annotations

import io
import signal
import subprocess
import sys
from collections.abc import Iterator
from functools import partial

import anyio
import docker
import docker.errors
import pytest

from orchestrator.backends.owner import LABEL_OWNER_PID
from orchestrator.errors import SandboxBusy
from orchestrator.home import CorralHome
from orchestrator.runtime import Runtime, open_runtime
from sandboxes.script import ScriptResult, execute_program
from sandboxes.script_policy import parse_params
from tests.integration.conftest import (
    env_with_home,
    only_idle_pool_left,
    pool_full,
    wait_until,
    write_config,
)

pytestmark = pytest.mark.anyio

POOL_IMAGE = "corral-test-pool:latest"
SLOW = "import time\nprint('started', flush=True)\ntime.sleep(120)\n"


@pytest.fixture
def warm() -> int:
    return 2


def _warm_flags(rt: Runtime) -> list[bool]:
    return [e["details"]["warm"] for e in rt.audit.read() if e["event"] == "script_executed"]


async def _print_one(rt: Runtime) -> ScriptResult:
    result = await execute_program(parse_params({"code": "print(1)"}), rt.script_context("t"))
    assert (result.exit_code, result.output) == (0, "1\n")
    return result


async def test_each_pool_container_runs_one_script_and_is_removed_then_replaced(
    runtime: Runtime,
) -> None:
    pool = runtime.pool
    assert pool is not None
    used: set[str] = set()
    for _ in range(3):
        await pool_full(runtime)
        idle = pool.idle_ids()
        assert not idle & used, "a used pool container is back in the pool"
        await _print_one(runtime)
        claimed = idle - pool.idle_ids()
        assert len(claimed) == 1
        used |= claimed
        await only_idle_pool_left(runtime)  # the used one is gone, not back in the pool
    assert len(used) == 3
    assert _warm_flags(runtime) == [True, True, True]


async def test_a_pool_container_that_died_is_replaced_never_handed_out(
    runtime: Runtime, docker_client: docker.DockerClient
) -> None:
    pool = runtime.pool
    assert pool is not None
    await pool_full(runtime)
    victims = [docker_client.containers.get(i) for i in pool.idle_ids()]
    for container in victims:
        container.kill()

    def all_exited() -> bool:
        for container in victims:
            container.reload()
        return all(c.status == "exited" for c in victims)

    await wait_until(all_exited)
    await _print_one(runtime)  # both idle ones are dead: the cold path serves it
    assert _warm_flags(runtime) == [False]
    assert pool.discarded == 2
    await pool_full(runtime)  # replaced
    await _print_one(runtime)
    assert _warm_flags(runtime) == [False, True]
    await only_idle_pool_left(runtime)


@pytest.fixture
def pool_image(docker_client: docker.DockerClient, sandbox_image: str) -> Iterator[str]:
    docker_client.images.get(sandbox_image).tag(POOL_IMAGE)
    yield POOL_IMAGE
    docker_client.images.remove(POOL_IMAGE, force=True)


def _rebuild(docker_client: docker.DockerClient, sandbox_image: str, generation: int) -> str:
    """What `corral images build` does to a tag: point it at a new image id."""
    dockerfile = f"FROM {sandbox_image}\nLABEL corral.test.generation={generation}\n"
    image, _ = docker_client.images.build(
        fileobj=io.BytesIO(dockerfile.encode()), tag=POOL_IMAGE, rm=True, pull=False
    )
    return str(image.id)


async def test_pool_containers_of_a_replaced_image_are_never_handed_out(
    corral_home: CorralHome,
    pool_image: str,
    sandbox_image: str,
    docker_client: docker.DockerClient,
) -> None:
    write_config(corral_home, f'[container.sandbox]\nimage = "{pool_image}"\nwarm = 2\n')
    async with open_runtime(corral_home, warm=True) as rt:
        pool = rt.pool
        assert pool is not None
        await pool_full(rt)
        old = pool.idle_ids()
        new_id = _rebuild(docker_client, sandbox_image, 2)
        await _print_one(rt)
        assert _warm_flags(rt) == [False]  # stale: the cold path ran it, on the new image
        assert pool.discarded == 2
        await pool_full(rt)
        assert not pool.idle_ids() & old
        for cid in pool.idle_ids():
            assert docker_client.containers.get(cid).attrs["Image"] == new_id
        await _print_one(rt)
        assert _warm_flags(rt) == [False, True]
        await only_idle_pool_left(rt)
    gone = {c.id for c in docker_client.containers.list(all=True, ignore_removed=True)}
    assert not old & gone


async def test_a_warm_container_never_runs_a_script_beyond_the_slot_limit(
    corral_home: CorralHome, sandbox_image: str
) -> None:
    write_config(
        corral_home,
        "[container.sandbox]\nwarm = 2\nmax_concurrent = 1\nmax_queued = 0\n"
        "queue_timeout_seconds = 60\n",
    )
    async with open_runtime(corral_home, warm=True) as rt:
        pool = rt.pool
        assert pool is not None
        await pool_full(rt)
        running = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                partial(
                    execute_program,
                    parse_params({"code": SLOW}),
                    rt.script_context("t"),
                    on_output=lambda _: running.set(),
                )
            )
            with anyio.fail_after(30):
                await running.wait()
            await pool_full(rt)
            idle = pool.idle_ids()
            with pytest.raises(SandboxBusy):
                await execute_program(parse_params({"code": "print(1)"}), rt.script_context("t"))
            assert pool.idle_ids() == idle  # nothing was claimed for the refused call
            tg.cancel_scope.cancel()
        await only_idle_pool_left(rt)


OWNER = """
import os, sys, anyio
from orchestrator.home import CorralHome
from orchestrator.runtime import open_runtime

async def main():
    async with open_runtime(CorralHome.from_env(os.environ), warm=True) as rt:
        with anyio.fail_after(60):
            while len(rt.pool.idle_ids()) < 2:
                await anyio.sleep(0.05)
        print("full", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.read)

anyio.run(main)
"""


async def test_killing_the_owner_with_a_full_pool_leaves_no_container(
    corral_home: CorralHome, sandbox_image: str, docker_client: docker.DockerClient
) -> None:
    write_config(corral_home, "[container.sandbox]\nwarm = 2\n")
    proc = subprocess.Popen(
        [sys.executable, "-c", OWNER],
        env=env_with_home(corral_home),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"full\n"
        owned = {"label": [f"{LABEL_OWNER_PID}={proc.pid}"]}
        assert len(docker_client.containers.list(all=True, filters=owned, ignore_removed=True)) == 2
        proc.send_signal(signal.SIGKILL)  # no cleanup code runs in the owner
        proc.wait()
        await wait_until(
            lambda: not docker_client.containers.list(all=True, filters=owned, ignore_removed=True)
        )
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()
