"""Fixtures for the Kubernetes backend's tests (issue 15): the fake API server of
tests/fake_kube on loopback, and a backend talking to it. No Docker engine is needed.
Every test checks that it left no pod and no ConfigMap behind."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from orchestrator.config import DEFAULT_SANDBOX_IMAGE
from orchestrator.k8s_backend import KubernetesBackend, KubeSettings
from orchestrator.owner import Owner
from tests.fake_kube.server import NAMESPACE, Served, serve

KIOSK_IMAGE = "corral-kiosk:latest"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve(tmp_path_factory.mktemp("kube"), {DEFAULT_SANDBOX_IMAGE, KIOSK_IMAGE}) as served:
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
