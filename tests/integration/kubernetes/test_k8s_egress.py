"""A kiosk session's egress on Kubernetes, against the fake: the kiosk and proxy
NetworkPolicies exist before the proxy pod starts, the real proxy (rig_images/proxy)
answers its control channel over the attach stream, narrowing replaces the proxy's
policy without a gap, and leaving removes everything."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.backends.kubernetes.backend import KubernetesBackend
from orchestrator.backends.kubernetes.egress import KubeEgress
from sandboxes.isolation import PROXY_PORT
from sandboxes.k8s_manifests import DENY_ALL_POLICY
from tests.fake_kube.server import NAMESPACE, Served
from tests.integration.kubernetes.conftest import PROXY_IMAGE

pytestmark = [pytest.mark.kubernetes, pytest.mark.anyio]

PINS = {"a.example": "203.0.113.7", "b.example": "203.0.113.8"}  # TEST-NET: never contacted


def policies(cluster: Served) -> dict[str, dict[str, Any]]:
    found = cluster.api.store.list("networkpolicies", NAMESPACE, "", "")
    return {
        p["metadata"]["name"]: p["spec"] for p in found if p["metadata"]["name"] != DENY_ALL_POLICY
    }


def cidrs(spec: dict[str, Any]) -> list[str]:
    return sorted(peer["ipBlock"]["cidr"] for rule in spec["egress"] for peer in rule["to"])


async def test_session_egress_policies_proxy_pod_and_narrowing(
    backend: KubernetesBackend, cluster: Served
) -> None:
    before = len(cluster.api.requests)
    async with KubeEgress(
        backend,
        session_id="s1",
        agent="alice",
        allowed_hosts=list(PINS),
        resolve_override=PINS,
        image=PROXY_IMAGE,
    ) as egress:
        calls = [(m, p.rsplit("/", 1)[-1]) for m, p in cluster.api.requests[before:] if m == "POST"]
        at_start = policies(cluster)
        await egress.restrict(["a.example"])
        narrowed = policies(cluster)
        pods = [p["metadata"]["name"] for p in cluster.api.store.list("pods", NAMESPACE, "", "")]
    # The session's two policies first (then the shared deny-all's, already there), the
    # proxy pod after them.
    assert calls[:2] == [("POST", "networkpolicies")] * 2
    assert calls.index(("POST", "pods")) >= 2
    assert egress.proxy_url == f"http://10.244.0.9:{PROXY_PORT}"
    assert egress.network_name == "session"
    assert pods == ["corral-proxy-s1-" + pods[0].rsplit("-", 1)[-1]]
    assert set(at_start) == {"corral-surface-s1-net", "corral-proxy-s1-net-1"}
    assert cidrs(at_start["corral-proxy-s1-net-1"]) == ["203.0.113.7/32", "203.0.113.8/32"]
    assert set(narrowed) == {"corral-surface-s1-net", "corral-proxy-s1-net-2"}
    assert cidrs(narrowed["corral-proxy-s1-net-2"]) == ["203.0.113.7/32"]
    assert egress.pins == {"a.example": ("203.0.113.7",)}
    assert policies(cluster) == {}


async def test_no_allowlist_means_no_objects_and_no_network(
    backend: KubernetesBackend, cluster: Served
) -> None:
    async with KubeEgress(backend, session_id="s2", agent="alice", allowed_hosts=[]) as egress:
        assert egress.network_name is None and egress.proxy_url is None
    assert policies(cluster) == {}
