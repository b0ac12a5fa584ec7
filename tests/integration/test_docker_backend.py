"""DockerBackend's own contract on the real engine: removal waits until the container is
gone, also when another removal of it is already in progress (the engine answers 409);
the memory a container holds is a number, or None once it is gone or going."""

from __future__ import annotations

from typing import Any

import anyio
import docker
import docker.errors
import pytest

from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.backends.owner import Owner
from tests.helpers import control_labels, gone
from tests.images import DEFAULT_SANDBOX_IMAGE

pytestmark = pytest.mark.anyio

SANDBOX_IMAGE = DEFAULT_SANDBOX_IMAGE


def sleeper(docker_client: docker.DockerClient, kind: str) -> Any:
    """A container of the sandbox image that only sleeps, labelled for the leak check."""
    return docker_client.containers.run(
        SANDBOX_IMAGE,
        ["sleep", "120"],
        labels=control_labels(kind),
        detach=True,
        network_mode="none",
        user="1000:1000",
    )


@pytest.mark.parametrize("removals", [2, 6])
async def test_concurrent_removals_all_return_once_the_container_is_gone(
    docker_client: docker.DockerClient, removals: int
) -> None:
    container = sleeper(docker_client, "test-remove")
    backend = DockerBackend(Owner.current())
    finished: list[bool] = []

    async def remove() -> None:
        await backend.remove(container.id or "")
        # Every caller, including one that met "removal already in progress", returns only
        # once the container no longer exists.
        finished.append(gone(docker_client, container.id or ""))

    try:
        async with anyio.create_task_group() as tg:
            for _ in range(removals):
                tg.start_soon(remove)
    finally:
        await backend.close()
        if not gone(docker_client, container.id or ""):
            container.remove(force=True)

    assert finished == [True] * removals


async def test_removing_a_container_that_is_already_gone_is_not_an_error() -> None:
    backend = DockerBackend(Owner.current())
    try:
        await backend.remove("0" * 64)
    finally:
        await backend.close()


async def test_memory_held_is_a_number_while_running_and_none_once_removed(
    docker_client: docker.DockerClient,
) -> None:
    """`corral doctor` asks for the memory of pool members the pool may be removing at
    that moment: while a removal runs, every answer is a number or None, never an error
    (the engine answers an empty body to a stats call on a container mid-removal)."""
    container = sleeper(docker_client, "test-memory")
    backend = DockerBackend(Owner.current())
    answers: list[int | None] = []
    removed = anyio.Event()

    async def ask_until_removed() -> None:
        while not removed.is_set():
            answers.append(await backend.memory_bytes(container.id or ""))

    async def remove() -> None:
        await backend.remove(container.id or "")
        removed.set()

    try:
        running = await backend.memory_bytes(container.id or "")
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask_until_removed)
            tg.start_soon(remove)
        after = await backend.memory_bytes(container.id or "")
    finally:
        await backend.close()
        if not gone(docker_client, container.id or ""):
            container.remove(force=True)

    assert isinstance(running, int) and running > 0
    assert all(answer is None or isinstance(answer, int) for answer in answers)
    assert after is None
