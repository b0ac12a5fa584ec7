"""The one place a backend is chosen: from `[backend]`, once per process.

`orchestrator.runtime.open_runtime` calls `backend_for`; everything after it (pools,
surfaces, egress, reaping, `corral doctor`) receives that one `ContainerBackend` and
asks it, never the config, what it can do (`supports_pools`, or `NotSupported`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from orchestrator.backends.owner import Owner
from orchestrator.config import CorralConfig, DockerBackendConfig, KubernetesBackendConfig
from orchestrator.errors import ConfigError
from sandboxes.ports import ContainerBackend


def backend_for(
    config: CorralConfig | ConfigError,
    owner: Owner,
    environ: Mapping[str, str],
    audit_file: Path | None = None,
) -> ContainerBackend:
    """`[backend]`'s engine. An invalid config gets the default Docker engine, so that
    reaping and `corral doctor` still work (every call is refused anyway). `audit_file`:
    where what a dead owner left is audited when it is reaped (Docker's watchdog)."""
    if isinstance(config, ConfigError):
        chosen: DockerBackendConfig | KubernetesBackendConfig = DockerBackendConfig()
    else:
        chosen = config.effective_backend()
    if isinstance(chosen, KubernetesBackendConfig):
        from orchestrator.backends.kubernetes.build import kubernetes_backend

        assert not isinstance(config, ConfigError)
        return kubernetes_backend(owner, chosen, config.cluster_images(), environ)
    from orchestrator.backends.docker.build import docker_backend

    return docker_backend(owner, chosen, environ, audit_file)
