"""The fake API server refuses what the real API refuses, and speaks watch, delete by
label selector and exec as the real one does (kr8s's own exec client talks to it)."""

from __future__ import annotations

import copy
import json
from typing import Any

import anyio
import httpx
import pytest
from kr8s.asyncio.objects import Pod

from orchestrator.backends.kubernetes.backend import KubernetesBackend
from sandboxes.isolation import locked_down
from sandboxes.k8s_manifests import pod_manifest
from tests.fake_kube.server import NAMESPACE, Served
from tests.images import DEFAULT_SANDBOX_IMAGE
from tests.integration.kubernetes.conftest import KIOSK_IMAGE
from tests.unit.test_k8s_manifests import LABELS, script_pod

pytestmark = [pytest.mark.kubernetes, pytest.mark.anyio]

PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
CONFIGMAPS = f"/api/v1/namespaces/{NAMESPACE}/configmaps"


def pod(name: str = "corral-script-t-1", **labels: str) -> dict[str, Any]:
    manifest = copy.deepcopy(script_pod())
    manifest["metadata"].update(name=name, namespace=NAMESPACE)
    manifest["metadata"]["labels"].update(labels)
    manifest["spec"]["containers"][0]["image"] = "corral-never-pulled:latest"  # stays Pending
    return manifest


async def post(cluster: Served, path: str, body: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient(base_url=cluster.url) as client:
        return await client.post(path, content=json.dumps(body))


async def delete_all(cluster: Served) -> None:
    async with httpx.AsyncClient(base_url=cluster.url) as client:
        for path in (PODS, CONFIGMAPS):
            await client.delete(path, params={"labelSelector": "corral.managed=true"})


async def test_corrals_script_pod_is_accepted(cluster: Served) -> None:
    answer = await post(cluster, PODS, pod())
    await delete_all(cluster)
    assert answer.status_code == 201, answer.text


@pytest.mark.parametrize(
    ("change", "code", "words"),
    [
        (lambda p: p["spec"].update(automountServiceAccountTokn=False), 422, "Additional"),
        (
            lambda p: p["spec"]["containers"][0]["securityContext"].update(runAsUser="1000"),
            422,
            "runAsUser",
        ),
        (lambda p: p["spec"].update(restartPolicy="Sometimes"), 422, "restartPolicy"),
        (lambda p: p["metadata"].update(name="Not_A_Name"), 422, "metadata.name"),
        (lambda p: p["metadata"]["labels"].update({"corral.agent": "-x-"}), 422, "labels"),
        (
            lambda p: p["spec"]["containers"][0]["resources"]["requests"].update(memory="3Gi"),
            422,
            "less than or equal",
        ),
        (
            lambda p: p["spec"]["containers"][0]["securityContext"]["capabilities"].update(drop=[]),
            403,
            "PodSecurity",
        ),
        (
            lambda p: p["spec"]["containers"][0]["securityContext"].update(
                allowPrivilegeEscalation=True
            ),
            403,
            "allowPrivilegeEscalation",
        ),
        (
            lambda p: p["spec"]["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
            403,
            "hostPath",
        ),
        (
            lambda p: [
                p["spec"].pop("securityContext"),
                p["spec"]["containers"][0]["securityContext"].pop("seccompProfile"),
            ],
            403,
            "seccompProfile",
        ),
    ],
)
async def test_the_fake_refuses_pods_the_real_api_refuses(
    cluster: Served, change: Any, code: int, words: str
) -> None:
    manifest = pod()
    change(manifest)
    answer = await post(cluster, PODS, manifest)
    assert answer.status_code == code, answer.text
    assert words in answer.json()["message"]
    assert answer.json()["kind"] == "Status"
    assert cluster.api.store.list("pods", NAMESPACE, "", "") == []


async def test_a_configmap_over_one_mebibyte_is_refused(cluster: Served) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "big"},
        "data": {"main.py": "x" * (1024 * 1024)},
    }
    answer = await post(cluster, CONFIGMAPS, body)
    assert answer.status_code == 422
    assert "Too long" in answer.json()["message"]


async def test_a_second_object_of_the_same_name_conflicts(cluster: Served) -> None:
    first = await post(cluster, PODS, pod("corral-script-dup-1"))
    second = await post(cluster, PODS, pod("corral-script-dup-1"))
    await delete_all(cluster)
    assert (first.status_code, second.status_code) == (201, 409)


async def test_delete_by_label_selector_deletes_only_what_it_selects(cluster: Served) -> None:
    await post(cluster, PODS, pod("corral-script-a-1", **{"corral.session": "a"}))
    await post(cluster, PODS, pod("corral-script-b-1", **{"corral.session": "b"}))
    async with httpx.AsyncClient(base_url=cluster.url) as client:
        gone = await client.delete(PODS, params={"labelSelector": "corral.session=a"})
    left = [p["metadata"]["name"] for p in cluster.api.store.list("pods", NAMESPACE, "", "")]
    await delete_all(cluster)
    assert [p["metadata"]["name"] for p in gone.json()["items"]] == ["corral-script-a-1"]
    assert left == ["corral-script-b-1"]


async def test_watch_streams_added_and_deleted_from_a_resource_version(cluster: Served) -> None:
    async with httpx.AsyncClient(base_url=cluster.url) as client:
        listed = await client.get(PODS)
        version = listed.json()["metadata"]["resourceVersion"]
        params = {"watch": "true", "resourceVersion": version, "labelSelector": "corral.session=w"}
        async with client.stream("GET", PODS, params=params) as stream:
            await post(cluster, PODS, pod("corral-script-w-1", **{"corral.session": "w"}))
            await post(cluster, PODS, pod("corral-script-o-1", **{"corral.session": "o"}))
            await client.delete(f"{PODS}/corral-script-w-1")
            seen: list[tuple[str, str]] = []
            with anyio.fail_after(10):
                async for line in stream.aiter_lines():
                    event = json.loads(line)
                    seen.append((event["type"], event["object"]["metadata"]["name"]))
                    if event["type"] == "DELETED":
                        break
    await delete_all(cluster)
    assert seen[0] == ("ADDED", "corral-script-w-1")
    assert seen[-1] == ("DELETED", "corral-script-w-1")
    assert all(name == "corral-script-w-1" for _, name in seen)


async def test_kr8s_exec_client_runs_a_command_over_the_v4_channel_protocol(
    cluster: Served, backend: KubernetesBackend
) -> None:
    spec = locked_down(
        image=KIOSK_IMAGE,
        labels={**LABELS, "corral.kind": "kiosk"},
        command=("sh", "-c", "cat >/dev/null"),
        stdin_open=True,
    )
    run = await backend.open_attached(spec)
    try:
        api = await backend.api()  # kr8s's Api, made as corral makes it
        target = await Pod.get(run.name, namespace=NAMESPACE, api=api)
        done = await target.exec(["sh", "-c", "echo out; echo err >&2; exit 3"], check=False)
    finally:
        await run.close()
    assert done.stdout == b"out\n"
    assert done.stderr == b"err\n"
    assert done.returncode == 3


def test_the_manifest_builder_and_the_fake_agree_on_the_image_field() -> None:
    manifest = pod_manifest(
        locked_down(image=DEFAULT_SANDBOX_IMAGE, labels=LABELS, command=("true",)),
        name="x",
        namespace=NAMESPACE,
        pull_policy="Never",
    )
    assert manifest["spec"]["containers"][0]["image"] == DEFAULT_SANDBOX_IMAGE
