"""Building corral's images locally: `corral images build`.

No image is ever pulled implicitly (non-negotiable). The sandbox image is
built from `Dockerfile.sandbox` on top of a base image; when the base is not
on the engine, it is made here with debootstrap (Debian's own packages, from
Debian's mirror) and imported. `--pull-base` is the one explicit, documented
way to use a registry's `debian:bookworm-slim` instead.

A built image is labelled with a digest of its recipe, so a second build with
nothing changed is a no-op that takes well under a second.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker

from orchestrator.backends.docker.sdk import (
    DEFAULT_SOCKET,
    connect,
    image_or_none,
    map_docker_errors,
    remove_unnamed_image,
)
from orchestrator.config import ContainerConfig
from orchestrator.errors import ImageBuildError

REPO_ROOT = Path(__file__).resolve().parents[3]
SANDBOX_DOCKERFILE = REPO_ROOT / "Dockerfile.sandbox"
RECIPE_LABEL = "corral.recipe"
DEBIAN_SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
PULL_BASE = "debian:bookworm-slim"
BASE_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

Say = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class BuildOutcome:
    image: str
    built: bool  # False when the cached image already matched the recipe
    base_built: bool


def recipe_digest(dockerfile_text: str, base_image_id: str) -> str:
    return hashlib.sha256(f"{base_image_id}\n{dockerfile_text}".encode()).hexdigest()[:32]


def debootstrap_base(client: docker.DockerClient, tag: str, say: Say, mirror: str) -> None:
    """Make `tag` from a minimal Debian tree (python3 included)."""
    if shutil.which("debootstrap") is None:
        raise ImageBuildError(
            "the base image is absent and debootstrap is not installed: "
            "`apt-get install debootstrap` (make run does it), or use `--pull-base` "
            f"to pull {PULL_BASE} explicitly"
        )
    if os.geteuid() != 0:
        raise ImageBuildError("building the base image with debootstrap needs root")
    root = Path(tempfile.mkdtemp(prefix="corral-rootfs-"))
    try:
        say(f"base image {tag} is absent: building it with debootstrap from {mirror} (~1 min)")
        proc = subprocess.Popen(
            [
                "debootstrap",
                "--variant=minbase",
                "--include=python3",
                DEBIAN_SUITE,
                str(root),
                mirror,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert proc.stdout is not None
        tail: list[str] = []
        for line in proc.stdout:
            tail = [*tail[-20:], line.rstrip()]
            if line.startswith(("I: Retrieving", "I: Extracting", "I: Installing", "I: Config")):
                say(line.strip()[3:])
        if proc.wait() != 0:
            raise ImageBuildError("debootstrap failed", "\n".join(tail))
        security = mirror.replace("/debian", "/debian-security")
        (root / "etc/apt/sources.list").write_text(
            f"deb {mirror} {DEBIAN_SUITE} main\n"
            f"deb {mirror} {DEBIAN_SUITE}-updates main\n"
            f"deb {security} {DEBIAN_SUITE}-security main\n"
        )
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in (root / cache).glob("*"):
                if entry.is_file():
                    entry.unlink()
        say(f"importing {tag}")
        with tempfile.TemporaryFile() as tar_file:
            with tarfile.open(fileobj=tar_file, mode="w") as tar:
                tar.add(str(root), arcname=".")
            tar_file.seek(0)
            repository, _, image_tag = tag.partition(":")
            client.api.import_image_from_data(
                tar_file.read(),
                repository=repository,
                tag=image_tag or "latest",
                changes=[f"ENV {BASE_PATH}", 'CMD ["/bin/bash"]'],
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _context_tar(files: dict[str, bytes]) -> io.BytesIO:
    """A build context holding only the recipe's files: the repo (and .venv) is never sent."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    return buf


def _stream_build(client: docker.DockerClient, **kwargs: Any) -> Iterator[str]:
    for item in client.api.build(decode=True, **kwargs):
        if "error" in item:
            raise ImageBuildError(f"docker build failed: {item['error'].strip()}")
        text = item.get("stream", "").strip()
        if text:
            yield text


# What a rig's build context takes from elsewhere in the repository, one source and never
# a copy in it: a folder keeps its name, a file of another rig's folder (or of rig_images
# itself: the channel's socket) lands at the top of the context, and a module of corral's
# own packages (standard library only) keeps its package path, so the image imports it as
# the gateway does (`from sandboxes.X import ...`, /opt/corral on sys.path): the
# secret-field probe and the screenshots' PNG encoder (kiosk, desktop) and the host-name
# rule the proxy applies inside its trust boundary.
SHARED_CONTEXT: dict[str, tuple[str, ...]] = {
    "kiosk": ("/sandboxes/secret_fields.py", "/sandboxes/png.py", "channel_socket.py"),
    "desktop": (
        "kiosk/kiosk_agent",
        "channel_socket.py",
        "kiosk/policy.json",
        "/sandboxes/secret_fields.py",
        "/sandboxes/png.py",
    ),
    "browser": ("kiosk/policy.json", "channel_socket.py"),
    "proxy": ("/sandboxes/hostnames.py",),
}


def _folder_files(folder: Path, prefix: str = "") -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for entry in sorted(folder.rglob("*")):
        parts = entry.relative_to(folder).parts
        if entry.is_file() and not any(p.startswith(".") or p == "__pycache__" for p in parts):
            files[prefix + "/".join(parts)] = entry.read_bytes()
    return files


def recipe_files(dockerfile: Path) -> dict[str, bytes]:
    """The build context of a recipe: `Dockerfile.sandbox` alone, or every regular file under a
    rig_images/<name>/ folder, subfolders included (its Dockerfile and what it COPYs, such as
    the kiosk agent's package); hidden files and `__pycache__` are left out."""
    if dockerfile.name != "Dockerfile":
        return {"Dockerfile": dockerfile.read_bytes()}
    folder = dockerfile.parent
    files = _folder_files(folder)
    for shared in SHARED_CONTEXT.get(folder.name, ()):
        if shared.startswith("/"):  # a module of corral's packages, under its package path
            files[shared[1:]] = (REPO_ROOT / shared[1:]).read_bytes()
            continue
        source = folder.parent / shared
        if source.is_file():
            files[source.name] = source.read_bytes()
        else:
            files.update(_folder_files(source, prefix=source.name + "/"))
    return files


def ensure_base(
    client: docker.DockerClient, base_image: str, say: Say, *, pull_base: bool, mirror: str
) -> tuple[str, Any, bool]:
    """The base image (name, object, whether it was built now), made locally if absent."""
    base = image_or_none(client, base_image)
    if base is None and pull_base:
        say(f"pulling {PULL_BASE} (explicit --pull-base)")
        client.images.pull(PULL_BASE)
        base_image = PULL_BASE
        base = image_or_none(client, base_image)
    built = False
    if base is None:
        debootstrap_base(client, base_image, say, mirror)
        base = image_or_none(client, base_image)
        built = True
    if base is None:
        raise ImageBuildError(f"base image {base_image} is still missing after building it")
    return base_image, base, built


def build_recipe(
    client: docker.DockerClient,
    *,
    image: str,
    dockerfile: Path,
    base_image: str,
    base_id: str,
    say: Say,
    rebuild: bool = False,
) -> bool:
    """Build `image` from `dockerfile` on `base_image`; False when the cached image matches."""
    files = recipe_files(dockerfile)
    digest = recipe_digest(
        "\n".join(f"{name}:{hashlib.sha256(data).hexdigest()}" for name, data in files.items()),
        base_id,
    )
    current = image_or_none(client, image)
    if current is not None and not rebuild and current.labels.get(RECIPE_LABEL) == digest:
        say(f"{image} is up to date")
        return False
    recipe = (
        dockerfile.relative_to(REPO_ROOT) if dockerfile.is_relative_to(REPO_ROOT) else dockerfile
    )
    say(f"building {image} from {recipe} on {base_image}")
    for line in _stream_build(
        client,
        fileobj=_context_tar(files),
        custom_context=True,
        tag=image,
        buildargs={"BASE": base_image},
        labels={RECIPE_LABEL: digest, "corral.managed.image": "true"},
        rm=True,
        forcerm=True,
        pull=False,
    ):
        if line.startswith("Step "):
            say(line)
    if current is not None:
        drop_replaced(client, image, str(current.id), say)
    return True


def drop_replaced(client: docker.DockerClient, image: str, old_id: str, say: Say) -> None:
    """Remove the image a rebuild of `image` replaced, once nothing refers to it: each
    rebuild would otherwise leave a dangling image of a gigabyte behind. Only an image left
    with no name is removed, never forced (the engine refuses while a container uses it)."""
    new = image_or_none(client, image)
    if new is None or new.id == old_id:
        return
    if not remove_unnamed_image(client, old_id):  # named, gone, or still in use
        return
    say(f"removed the image {image} replaced ({old_id.removeprefix('sha256:')[:12]})")


def build_sandbox(
    client: docker.DockerClient,
    *,
    image: str,
    base_image: str,
    say: Say,
    rebuild: bool = False,
    pull_base: bool = False,
    mirror: str = DEFAULT_MIRROR,
    dockerfile: Path = SANDBOX_DOCKERFILE,
) -> BuildOutcome:
    base_image, base, base_built = ensure_base(
        client, base_image, say, pull_base=pull_base, mirror=mirror
    )
    built = build_recipe(
        client,
        image=image,
        dockerfile=dockerfile,
        base_image=base_image,
        base_id=base.id,
        say=say,
        rebuild=rebuild,
    )
    return BuildOutcome(image=image, built=built, base_built=base_built)


def rig_dockerfile(name: str) -> Path:
    return REPO_ROOT / "rig_images" / name / "Dockerfile"


RIG_IMAGES = ("kiosk", "proxy", "browser", "desktop")


def build_all(
    container: ContainerConfig,
    say: Say,
    *,
    rebuild: bool = False,
    pull_base: bool = False,
    mirror: str = DEFAULT_MIRROR,
    docker_host: str | None = None,
) -> BuildOutcome:
    """`corral images build`: the sandbox image, then each rig image whose recipe is in
    this checkout, on the engine `docker_host` (as the CLI resolved it) or `[container]
    docker_host` names (errors mapped)."""
    url = docker_host or container.docker_host or DEFAULT_SOCKET
    client = connect(url)
    try:
        with map_docker_errors(url):
            outcome = build_sandbox(
                client,
                image=container.sandbox.image,
                base_image=container.sandbox.base_image,
                say=say,
                rebuild=rebuild,
                pull_base=pull_base,
                mirror=mirror,
            )
            base = client.images.get(container.sandbox.base_image)
            tags = {
                "kiosk": container.kiosk.image,
                "proxy": container.kiosk.proxy_image,
                "browser": container.rigs.browser_image,
                "desktop": container.rigs.desktop_image,
            }
            for rig in RIG_IMAGES:
                if rig_dockerfile(rig).exists():
                    build_recipe(
                        client,
                        image=tags[rig],
                        dockerfile=rig_dockerfile(rig),
                        base_image=container.sandbox.base_image,
                        base_id=base.id or "",
                        say=say,
                        rebuild=rebuild,
                    )
    finally:
        client.close()
    return outcome
