"""Browser and desktop rigs on the Kubernetes backend, against the fake API server: the
shared start path makes their pods (the fake node runs the real rig images in the Docker
engine, from the pods' manifests), they answer a screenshot and an action through the
attach stream, the desktop's live view relay answers over the exec stream, the session's
NetworkPolicies select the rig's pod, and closing the rig removes every pod, ConfigMap
and NetworkPolicy it made (and the node's containers)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from orchestrator.audit import AuditLog
from orchestrator.backends.kubernetes.backend import KubernetesBackend
from orchestrator.config import load_config, render_new_agent
from orchestrator.home import CorralHome
from orchestrator.people.live_view import open_vnc
from orchestrator.surfaces.answers import Answer, Image
from orchestrator.surfaces.rigs import RigManager
from sandboxes.k8s_manifests import DENY_ALL_POLICY
from tests.fake_kube.docker_node import leftover_containers
from tests.fake_kube.server import NAMESPACE, Served
from tests.images import DEFAULT_BROWSER_IMAGE, DEFAULT_DESKTOP_IMAGE
from tests.integration.kubernetes.conftest import PROXY_IMAGE

pytestmark = [pytest.mark.kubernetes, pytest.mark.anyio]

SITE, SITE_IP = "site.corral.test", "203.0.113.7"  # TEST-NET: never contacted


def write_agent(home: CorralHome, flag: str, allowed: list[str]) -> None:
    text = render_new_agent("ann").replace(f"{flag} = false", f"{flag} = true")
    text = text.replace("allowed_domains = []", f"allowed_domains = {allowed!r}".replace("'", '"'))
    path = home.agent_file("ann")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
async def rigs(corral_home: CorralHome, backend: KubernetesBackend) -> AsyncIterator[RigManager]:
    corral_home.config_file.write_text(
        f'[container.kiosk]\nresolve_overrides = {{ "{SITE}" = "{SITE_IP}" }}\n'
        f'[container.rigs]\nbrowser_image = "{DEFAULT_BROWSER_IMAGE}"\n'
        f'desktop_image = "{DEFAULT_DESKTOP_IMAGE}"\n'
    )
    config = load_config(corral_home.config_file)
    audit = AuditLog(corral_home.root / "audit.jsonl")
    manager = RigManager(corral_home, config, backend, audit, backend.egress_factory(PROXY_IMAGE))
    try:
        yield manager
    finally:
        await manager.close_all()
        assert leftover_containers() == []


def objects(cluster: Served) -> list[str]:
    """Every pod, ConfigMap and NetworkPolicy in the fake (the shared deny-all aside)."""
    return sorted(
        f"{plural}/{name}"
        for plural, _, name in cluster.api.store.objects
        if name != DENY_ALL_POLICY
    )


def pods(cluster: Served, kind: str) -> list[dict[str, Any]]:
    return cluster.api.store.list("pods", NAMESPACE, f"corral.kind={kind}", "")


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A LabelSelector's matchLabels and its NotIn/In expressions against `labels`."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for rule in selector.get("matchExpressions", []):
        inside = labels.get(rule["key"]) in rule["values"]
        if inside != (rule["operator"] == "In"):
            return False
    return True


def texts(result: Answer) -> str:
    return result.text


def images(result: Answer) -> tuple[Image, ...]:
    return result.images


async def test_a_browser_rig_runs_as_a_pod_behind_its_sessions_policies(
    corral_home: CorralHome, rigs: RigManager, cluster: Served
) -> None:
    write_agent(corral_home, "browser_use", [SITE])
    shot = await rigs.handle("ann", "browser_use", {"verb": "screenshot"})
    assert not shot.is_error, texts(shot)
    pressed = await rigs.handle("ann", "browser_use", {"verb": "press", "key": "Tab"})
    assert not pressed.is_error, texts(pressed)
    [pod] = pods(cluster, "rig-browser")
    policies = {
        p["metadata"]["name"]: p["spec"]
        for p in cluster.api.store.list("networkpolicies", NAMESPACE, "", "")
    }
    rig_id = rigs.rigs[("ann", "browser", "")].id
    during = objects(cluster)

    closed = await rigs.handle("ann", "rig_close", {})

    assert len(images(shot)) == 1 and images(shot)[0].mime_type == "image/png"
    labels = pod["metadata"]["labels"]
    assert labels["corral.session"] == rig_id and labels["corral.network"] == "session"
    ctx = pod["spec"]["containers"][0]["securityContext"]
    assert ctx["readOnlyRootFilesystem"] and ctx["capabilities"] == {"drop": ["ALL"]}
    surface = policies[f"corral-surface-{rig_id}-net"]
    assert selects(surface["podSelector"], labels)
    [proxy_policy] = [v for k, v in policies.items() if k.startswith(f"corral-proxy-{rig_id}-")]
    assert selects(proxy_policy["ingress"][0]["from"][0]["podSelector"], labels)
    assert not selects(proxy_policy["podSelector"], labels)
    assert sum(name.startswith("pods/") for name in during) == 2  # the rig's and its proxy's
    assert not closed.is_error, texts(closed)
    assert objects(cluster) == []


async def test_a_desktop_rig_runs_as_a_pod_and_its_live_view_relay_answers(
    corral_home: CorralHome, rigs: RigManager, backend: KubernetesBackend, cluster: Served
) -> None:
    write_agent(corral_home, "desktop_use", [])
    shot = await rigs.handle("ann", "computer_use", {"verb": "screenshot"})
    assert not shot.is_error, texts(shot)
    clicked = await rigs.handle("ann", "computer_use", {"verb": "click", "x": 640, "y": 400})
    assert not clicked.is_error, texts(clicked)
    rig = rigs.rigs[("ann", "desktop", "")]
    [pod] = pods(cluster, "rig-desktop")
    stream = await open_vnc(backend, rig.channel.id)
    try:
        with anyio.fail_after(20):
            banner = await stream.receive()
    finally:
        await stream.close()
    during = objects(cluster)

    closed = await rigs.handle("ann", "rig_close", {})

    assert len(images(shot)) == 1
    assert banner is not None and banner.startswith(b"RFB 003.")
    assert pod["metadata"]["labels"]["corral.network"] == "none"  # the deny-all policy's
    assert during == [f"pods/{pod['metadata']['name']}"]  # no allowlist: no proxy, no policy
    assert not closed.is_error, texts(closed)
    assert objects(cluster) == []
