"""The reaper on Kubernetes deletes only the objects of an owner that is gone; a
long-lived pod's attach channel and an exec stream work over the WebSocket."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import anyio
import pytest

from orchestrator.audit import AuditLog
from orchestrator.backends.kubernetes.backend import KubernetesBackend
from orchestrator.backends.owner import Owner, read_boot_id
from orchestrator.backends.reaper import reap_orphans
from sandboxes.isolation import locked_down
from sandboxes.k8s_manifests import DENY_ALL_POLICY, configmap_manifest, pod_manifest
from tests.fake_kube.server import NAMESPACE, Served
from tests.integration.kubernetes.conftest import KIOSK_IMAGE

pytestmark = [pytest.mark.kubernetes, pytest.mark.anyio]


def dead_owner() -> Owner:
    """An owner whose process has exited (a real pid, reaped)."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    return Owner(
        instance_id="d" * 32,
        pid=gone.pid,
        start_time=1,
        boot_id=read_boot_id(),
        host=socket.gethostname(),
    )


async def objects_of(backend: KubernetesBackend, owner: Owner, session: str) -> None:
    """A Pending pod (an image no node has, so nothing runs) and a ConfigMap, labelled
    as `owner`'s."""
    labels = owner.labels(kind="script", agent="cli", session=session)
    spec = locked_down(image="corral-unpulled:latest", labels=labels, command=("true",))
    name = f"corral-script-{session}-1"
    await backend.request(
        "POST",
        "pods",
        body=pod_manifest(spec, name=name, namespace=NAMESPACE, pull_policy="Never"),
    )
    await backend.request(
        "POST",
        "configmaps",
        body=configmap_manifest(name=name, namespace=NAMESPACE, labels=labels, files={}),
    )


def names(cluster: Served) -> set[str]:
    return {f"{plural}/{name}" for plural, _, name in cluster.api.store.objects}


async def test_reaper_deletes_only_objects_whose_owner_is_gone(
    backend: KubernetesBackend, cluster: Served, tmp_path: Path
) -> None:
    await backend.ensure_policy()
    other_host = Owner("e" * 32, 1, 1, read_boot_id(), "another-host")
    await objects_of(backend, dead_owner(), "dead")
    await objects_of(backend, backend.owner, "live")
    await objects_of(backend, other_host, "elsewhere")

    audit = AuditLog(tmp_path / "audit.jsonl")
    removed = await reap_orphans(backend, audit)

    left = names(cluster)
    for session in ("live", "elsewhere"):
        await backend.remove(f"pod/corral-script-{session}-1")
        await backend.remove(f"configmap/corral-script-{session}-1")
    assert sorted(removed) == ["corral-script-dead-1", "corral-script-dead-1"]
    assert left == {
        "pods/corral-script-live-1",
        "configmaps/corral-script-live-1",
        "pods/corral-script-elsewhere-1",
        "configmaps/corral-script-elsewhere-1",
        f"networkpolicies/{DENY_ALL_POLICY}",
    }
    # The pod is audited as a container a dead owner left; its ConfigMap goes with it.
    (reaped,) = [e for e in audit.read() if e["event"] == "container_reaped"]
    assert reaped["agent"] == "cli"
    assert reaped["details"]["kind"] == "script" and reaped["details"]["session"] == "dead"
    assert reaped["details"]["why"] == "its owner process ended without removing it"


async def test_an_attached_pod_answers_on_its_stdin_channel_and_exec_streams(
    backend: KubernetesBackend, cluster: Served
) -> None:
    labels = backend.labels(kind="kiosk", agent="cli", session="chan")
    echo = 'while read -r line; do echo "got:$line"; done'
    spec = locked_down(
        image=KIOSK_IMAGE, labels=labels, command=("sh", "-c", echo), stdin_open=True
    )
    run = await backend.open_attached(spec)
    try:
        await run.send(b"hello\n")
        with anyio.fail_after(10):
            answer = await run.receive()
        exec_stream = await backend.open_exec(
            run.id, ["sh", "-c", "read -r x; echo exec:$x"], user="1000:1000"
        )
        try:
            await exec_stream.send(b"ping\n")
            with anyio.fail_after(10):
                got = await exec_stream.receive()
                end = await exec_stream.receive()
        finally:
            await exec_stream.close()
    finally:
        await run.close()
    assert answer == b"got:hello\n"
    assert got == b"exec:ping\n"
    assert end is None
    assert exec_stream.exit_code == 0
    assert [k for k in names(cluster) if k.startswith("pods/")] == []


async def test_remove_of_an_object_already_gone_is_not_an_error(backend: KubernetesBackend) -> None:
    await backend.remove("pod/corral-script-never-1")
    await backend.remove("configmap/corral-script-never-1")


async def test_a_kiosk_pod_gets_the_nodes_localhost_seccomp_profile_when_configured(
    cluster: Served,
) -> None:
    from orchestrator.backends.kubernetes.backend import KubeSettings
    from orchestrator.backends.owner import Owner

    settings = KubeSettings(
        kubeconfig=str(cluster.kubeconfig),
        namespace=NAMESPACE,
        seccomp_localhost="corral/kiosk.json",
    )
    kube = KubernetesBackend(Owner.current(), settings)
    labels = kube.labels(kind="kiosk", agent="cli", session="sec")
    spec = locked_down(
        image=KIOSK_IMAGE,
        labels=labels,
        command=("sh", "-c", "cat >/dev/null"),
        stdin_open=True,
        seccomp="/host/path/seccomp.json",
    )
    run = await kube.open_attached(spec)
    try:
        stored = cluster.api.store.get("pods", NAMESPACE, run.name)
    finally:
        await run.close()
        await kube.close()
    profile = stored["spec"]["containers"][0]["securityContext"]["seccompProfile"]
    assert profile == {"type": "Localhost", "localhostProfile": "corral/kiosk.json"}
