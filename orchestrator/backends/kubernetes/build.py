"""Building the Kubernetes backend, as the rest of corral sees it: a `ContainerBackend`."""

from __future__ import annotations

from collections.abc import Mapping

from orchestrator.backends.kubernetes.backend import (
    KubernetesBackend,
    KubeSettings,
    resolve_kubeconfig,
)
from orchestrator.backends.owner import Owner
from orchestrator.config import KubernetesBackendConfig
from sandboxes.ports import ContainerBackend


def kubernetes_backend(
    owner: Owner,
    chosen: KubernetesBackendConfig,
    images: Mapping[str, str],
    environ: Mapping[str, str],
) -> ContainerBackend:
    """The cluster `chosen` names; `images` maps local image names to the names the
    cluster pulls (`CorralConfig.cluster_images`). No API call until the first use."""
    settings = KubeSettings(
        kubeconfig=resolve_kubeconfig(chosen.kubeconfig, environ),
        namespace=chosen.namespace,
        context=chosen.context,
        pull_policy=chosen.image_pull_policy,
        images=dict(images),
        seccomp_localhost=chosen.kiosk_seccomp_profile,
    )
    return KubernetesBackend(owner, settings)
