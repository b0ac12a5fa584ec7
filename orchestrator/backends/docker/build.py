"""Building the Docker backend, as the rest of corral sees it: a `ContainerBackend`."""

from __future__ import annotations

from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.config import DockerBackendConfig
from orchestrator.owner import Owner
from sandboxes.ports import ContainerBackend


def docker_backend(owner: Owner, chosen: DockerBackendConfig) -> ContainerBackend:
    """The engine `chosen` names (its `docker_host`, else `$DOCKER_HOST`, else the
    local socket); no engine call until the first use."""
    return DockerBackend(owner, chosen.docker_host)
