"""Building the Docker backend, as the rest of corral sees it: a `ContainerBackend`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.backends.docker.sdk import engine_url
from orchestrator.backends.owner import Owner
from orchestrator.config import DockerBackendConfig
from sandboxes.ports import ContainerBackend


def docker_backend(
    owner: Owner,
    chosen: DockerBackendConfig,
    environ: Mapping[str, str],
    audit_file: Path | None = None,
) -> ContainerBackend:
    """The engine `chosen` names (its `docker_host`, else DOCKER_HOST as the CLI read it,
    else the local socket); no engine call until the first use."""
    url = engine_url(chosen.docker_host, environ)
    return DockerBackend(owner, url, audit_file, channel_socket=chosen.channel_socket)
