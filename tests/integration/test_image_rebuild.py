"""`corral images build` replacing an image removes the one it replaced, unless something
still uses it: each rebuild would otherwise leave a dangling image behind (a gigabyte for
the desktop rig). Tiny recipes FROM scratch, under names of their own; nothing pulled."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from orchestrator.backends.docker.images import build_recipe

pytestmark = pytest.mark.slow

NAME = "corral-rebuildtest:latest"
OTHER = "corral-rebuildtest-keep:latest"


def build(client: docker.DockerClient, tmp_path: Path, version: str) -> str:
    recipe = tmp_path / f"Dockerfile.{version}"
    recipe.write_text(f"FROM scratch\nLABEL corral.test.version={version}\n")
    said: list[str] = []
    assert build_recipe(
        client, image=NAME, dockerfile=recipe, base_image="scratch", base_id="", say=said.append
    )
    return str(client.images.get(NAME).id)


def exists(client: docker.DockerClient, image_id: str) -> bool:
    try:
        client.images.get(image_id)
    except docker.errors.ImageNotFound:
        return False
    return True


@pytest.fixture
def clean(docker_client: docker.DockerClient) -> Iterator[docker.DockerClient]:
    yield docker_client
    for name in (NAME, OTHER):
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client.images.remove(name, force=True)


def test_a_rebuild_removes_the_image_it_replaced(
    clean: docker.DockerClient, tmp_path: Path
) -> None:
    first = build(clean, tmp_path, "1")
    second = build(clean, tmp_path, "2")
    assert second != first
    assert not exists(clean, first)
    assert exists(clean, second)


def test_an_image_another_tag_still_names_is_kept(
    clean: docker.DockerClient, tmp_path: Path
) -> None:
    first = build(clean, tmp_path, "1")
    clean.images.get(first).tag(OTHER)
    build(clean, tmp_path, "2")
    assert exists(clean, first)  # the engine refused: OTHER still names it
