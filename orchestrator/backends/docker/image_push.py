"""`corral images push REGISTRY`: tag the locally built images a cluster pulls
(sandbox, kiosk, proxy, and the browser and desktop rigs, which run on Kubernetes too)
as REGISTRY/NAME:TAG and push them (SPEC S7, issue 15).

The plan (which local image becomes which remote name) is pure and unit-tested; the
push goes through the Docker engine that built the images. Nothing is pulled.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import docker

from orchestrator.backends.docker.sdk import connect, image_or_none, map_docker_errors
from orchestrator.errors import ImageBuildError

# host[:port][/path]: what `docker push` accepts before the repository name.
_REGISTRY_RE = re.compile(
    r"^(?:localhost|[a-zA-Z0-9-]+(?:\.[a-zA-Z0-9-]+)+|\[[0-9a-fA-F:]+\]|[a-zA-Z0-9-]+(?=:))"
    r"(?::[0-9]{1,5})?"
    r"(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$"
)
CONFIG_KEYS = ("sandbox_image", "kiosk_image", "proxy_image", "browser_image", "desktop_image")


@dataclass(frozen=True, slots=True)
class PushStep:
    local: str  # the name on this engine, e.g. corral-sandbox:latest
    remote: str  # what the cluster pulls, e.g. registry.example:5000/corral-sandbox:latest
    config_key: str  # the [backend] key that names it

    @property
    def repository(self) -> str:
        return self.remote.rsplit(":", 1)[0]

    @property
    def tag(self) -> str:
        return self.remote.rsplit(":", 1)[1]


def _strip_registry(image: str) -> str:
    first, _, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return rest
    return image


def push_plan(registry: str, images: Sequence[str]) -> list[PushStep]:
    """One step per image (in `CONFIG_KEYS`' order); ValueError naming the
    registry when it is not `host[:port][/path]` (no scheme, no tag)."""
    registry = registry.rstrip("/")
    if not _REGISTRY_RE.fullmatch(registry):
        raise ValueError(
            f"REGISTRY {registry!r} must be host[:port][/path], e.g. 'localhost:5000' or "
            "'registry.example.com/team' (no https://, no tag)"
        )
    if len(images) != len(CONFIG_KEYS):
        raise ValueError(f"expected {len(CONFIG_KEYS)} images, got {len(images)}")
    steps = []
    for key, local in zip(CONFIG_KEYS, images, strict=True):
        name = _strip_registry(local)
        if ":" not in name.rsplit("/", 1)[-1]:
            name += ":latest"
        steps.append(PushStep(local=local, remote=f"{registry}/{name}", config_key=key))
    return steps


def config_snippet(steps: Iterable[PushStep]) -> str:
    lines = ["[backend]", 'kind = "kubernetes"']
    lines += [f'{step.config_key} = "{step.remote}"' for step in steps]
    return "\n".join(lines)


def push(
    client: docker.DockerClient, steps: Sequence[PushStep], say: Callable[[str], None]
) -> None:
    """Tag and push each step; ImageBuildError naming the image on the first failure."""
    for step in steps:
        image = image_or_none(client, step.local)
        if image is None:
            raise ImageBuildError(
                f"{step.local} is not on this engine: run `corral images build` first"
            )
        image.tag(step.repository, tag=step.tag)
        say(f"pushing {step.remote}")
        lines: Iterable[dict[str, Any]] = client.images.push(
            step.repository, tag=step.tag, stream=True, decode=True
        )
        for line in lines:
            if "error" in line:
                raise ImageBuildError(f"pushing {step.remote} failed: {line['error']}")


def push_to_registry(url: str, steps: Sequence[PushStep], say: Callable[[str], None]) -> None:
    """Push `steps` through the engine at `url`, as the CLI resolved it (engine errors
    mapped here)."""
    client = connect(url)
    try:
        with map_docker_errors(url):
            push(client, steps, say)
    finally:
        client.close()
