"""Fixtures for the Kubernetes backend's tests (issue 15): the fake API server of
tests/fake_kube on loopback, and a backend talking to it. No Docker engine is needed.
Every test checks that it left no pod and no ConfigMap behind. Only the rigs' pods
(test_k8s_rigs.py) need the engine: the fake node runs their images in Docker."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from orchestrator.backends.kubernetes.backend import KubernetesBackend, KubeSettings
from orchestrator.backends.owner import Owner
from tests.fake_kube.docker_node import IN_DOCKER, InDocker
from tests.fake_kube.server import NAMESPACE, Served, serve
from tests.images import (
    DEFAULT_BROWSER_IMAGE,
    DEFAULT_DESKTOP_IMAGE,
    DEFAULT_KIOSK_IMAGE,
    DEFAULT_PROXY_IMAGE,
    DEFAULT_SANDBOX_IMAGE,
)

KIOSK_IMAGE = DEFAULT_KIOSK_IMAGE
PROXY_IMAGE = DEFAULT_PROXY_IMAGE
REPO = Path(__file__).resolve().parents[3]
# The fake node's images and their CMD. The proxy is the real one (rig_images/proxy),
# on a free port of this host (its pod's port would be 3128), with corral's host-name
# rule importable beside it as its image has it (sandboxes/hostnames.py, SHARED_CONTEXT).
# The rigs' images run for real, in the Docker engine (tests/fake_kube/docker_node.py).
IMAGES: dict[str, list[str] | InDocker | None] = {
    DEFAULT_BROWSER_IMAGE: IN_DOCKER,
    DEFAULT_DESKTOP_IMAGE: IN_DOCKER,
    DEFAULT_SANDBOX_IMAGE: None,
    KIOSK_IMAGE: None,
    PROXY_IMAGE: [
        "sh",
        "-c",
        f"PYTHONPATH={REPO} CORRAL_LISTEN_PORT=0 exec python3 {REPO}/rig_images/proxy/proxy.py",
    ],
}


@pytest.fixture(scope="session", autouse=True)
def _no_leaks() -> None:
    """Overrides the folder's Docker leak check: only the rig tests start containers (the
    fake node's, labelled apart from corral's and checked by those tests themselves), and
    the rest need no engine. Their own check is `backend`'s: no pod or ConfigMap left in
    the fake."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve(tmp_path_factory.mktemp("kube"), IMAGES) as served:
        yield served


def leftovers(cluster: Served) -> list[str]:
    """Pods and ConfigMaps still in the fake (the shared deny-all policy may stay)."""
    return [
        f"{plural}/{name}"
        for plural, _, name in cluster.api.store.objects
        if plural != "networkpolicies"
    ]


@pytest.fixture
async def backend(cluster: Served) -> AsyncIterator[KubernetesBackend]:
    settings = KubeSettings(kubeconfig=str(cluster.kubeconfig), namespace=NAMESPACE)
    kube = KubernetesBackend(Owner.current(), settings)
    yield kube
    await kube.close()
    assert leftovers(cluster) == []
