"""`corral images push REGISTRY` (issue 15) against a registry of our own on loopback
(tests/fake_registry.py), with five tiny images built FROM scratch (nothing pulled;
new names, so no shared image is touched)."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest
from click.testing import CliRunner

from corral_cli.main import main
from tests.fake_registry import serve_registry

pytestmark = pytest.mark.kubernetes

NAMES = [
    "corral-pushtest-sandbox",
    "corral-pushtest-kiosk",
    "corral-pushtest-proxy",
    "corral-pushtest-browser",
    "corral-pushtest-desktop",
]


def _context(marker: str) -> io.BytesIO:
    files = {"Dockerfile": b"FROM scratch\nCOPY marker /marker\n", "marker": marker.encode()}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    return buffer


@pytest.fixture
def tiny_images(docker_client: docker.DockerClient) -> Iterator[list[str]]:
    tags = []
    for name in NAMES:
        tag = f"{name}:latest"
        docker_client.images.build(fileobj=_context(name), custom_context=True, tag=tag, rm=True)
        tags.append(tag)
    yield tags
    for image in docker_client.images.list():
        for tag in image.tags:
            if any(f"{name}:" in tag for name in NAMES):
                docker_client.images.remove(tag, noprune=False)


def _home(tmp_path: Path, sandbox: str, kiosk: str, proxy: str, browser: str, desktop: str) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        f'[container.sandbox]\nimage = "{sandbox}"\n'
        f'[container.kiosk]\nimage = "{kiosk}"\nproxy_image = "{proxy}"\n'
        f'[container.rigs]\nbrowser_image = "{browser}"\ndesktop_image = "{desktop}"\n'
    )
    return home


def test_push_tags_and_pushes_the_five_images_and_prints_the_config(
    tiny_images: list[str], tmp_path: Path
) -> None:
    home = _home(tmp_path, *tiny_images)
    with serve_registry() as (registry, port):
        result = CliRunner().invoke(
            main, ["images", "push", f"127.0.0.1:{port}"], env={"CORRAL_HOME": str(home)}
        )
        pushed = sorted(repo for repo, tag in registry.manifests if tag == "latest")
        manifest = json.loads(registry.manifests[(NAMES[0], "latest")])
    assert result.exit_code == 0, result.output
    assert pushed == sorted(NAMES)
    # Every blob the manifest names arrived, digest checked.
    digests = [manifest["config"]["digest"]] + [layer["digest"] for layer in manifest["layers"]]
    assert all(d in registry.blobs for d in digests)
    assert f'sandbox_image = "127.0.0.1:{port}/{NAMES[0]}:latest"' in result.output
    assert f'desktop_image = "127.0.0.1:{port}/{NAMES[4]}:latest"' in result.output


def test_push_of_an_image_not_built_says_to_build_first(tmp_path: Path) -> None:
    home = _home(tmp_path, "corral-pushtest-absent:latest", "a:latest", "b:latest", "c", "d")
    with serve_registry() as (registry, port):
        result = CliRunner().invoke(
            main, ["images", "push", f"127.0.0.1:{port}"], env={"CORRAL_HOME": str(home)}
        )
    assert result.exit_code == 1
    assert "corral images build" in " ".join(result.output.split())
    assert registry.manifests == {}
