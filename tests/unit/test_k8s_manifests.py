"""The pod, ConfigMap and NetworkPolicy manifests, field by field against SPEC S1.2
(issue 15), and each one valid under the real Kubernetes 1.37 schemas (strict)."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from orchestrator.config import DEFAULT_KIOSK_IMAGE, DEFAULT_PROXY_IMAGE, DEFAULT_SANDBOX_IMAGE
from sandboxes.isolation import PROXY_PORT, kiosk_spec, proxy_spec
from sandboxes.k8s_manifests import (
    DENY_ALL_POLICY,
    checked_labels,
    configmap_manifest,
    cpu_quantity,
    deny_all_policy,
    gated_command,
    memory_quantity,
    object_name,
    pod_manifest,
    proxy_policy,
    surface_policy,
    tmpfs_size,
)
from sandboxes.ports import ContainerSpec
from sandboxes.script_policy import HARD_CAP_SECONDS, build_script_spec, script_command

pytestmark = pytest.mark.kubernetes

LABELS = {
    "corral.managed": "true",
    "corral.kind": "script",
    "corral.agent": "cli",
    "corral.session": "abc123",
    "corral.instance": "f" * 32,
    "corral.owner.pid": "4242",
    "corral.owner.start": "123456",
    "corral.owner.boot": "0c8e1b7a-1d2e-4f5a-9b8c-7d6e5f4a3b2c",
    "corral.owner.host": "build-host",
}

MARK = "corral-exit-0123456789abcdef"


def script_spec(**overrides: Any) -> ContainerSpec:
    args: dict[str, Any] = {
        "image": DEFAULT_SANDBOX_IMAGE,
        "language": "python",
        "workspace_dir": "/srv/work/exec-1",
        "user": "1001:1001",
        "labels": LABELS,
        "tmp_size_mb": 64,
        "exit_mark": MARK,
    }
    args.update(overrides)
    return build_script_spec(**args)


def script_pod(**overrides: Any) -> dict[str, Any]:
    return pod_manifest(
        script_spec(**overrides),
        name="corral-script-abc123-0001",
        namespace="corral",
        pull_policy="IfNotPresent",
        workspace_configmap="corral-script-abc123-0001",
        gate=True,
    )


def valid(manifest: dict[str, Any]) -> None:
    kubernetes_validate.validate(manifest, "1.37", strict=True)


def test_script_pod_container_is_locked_down_as_s1_2_says() -> None:
    container = script_pod()["spec"]["containers"][0]
    ctx = container["securityContext"]
    assert ctx["runAsUser"] == 1000
    assert ctx["runAsGroup"] == 1000
    assert ctx["runAsNonRoot"] is True
    assert ctx["readOnlyRootFilesystem"] is True
    assert ctx["allowPrivilegeEscalation"] is False
    assert ctx["privileged"] is False
    assert ctx["capabilities"] == {"drop": ["ALL"]}
    assert "add" not in ctx["capabilities"]
    assert ctx["seccompProfile"] == {"type": "RuntimeDefault"}


def test_script_pod_limits_are_2gi_and_one_cpu_with_requests_equal() -> None:
    resources = script_pod()["spec"]["containers"][0]["resources"]
    assert resources["limits"] == {"memory": "2Gi", "cpu": "1"}
    assert resources["requests"] == resources["limits"]


def test_script_pod_has_no_token_no_host_namespace_and_no_restart() -> None:
    spec = script_pod()["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert spec["hostNetwork"] is False
    assert spec["hostPID"] is False
    assert spec["hostIPC"] is False
    assert spec["restartPolicy"] == "Never"
    assert spec["enableServiceLinks"] is False
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_script_pod_hard_cap_is_active_deadline_seconds() -> None:
    assert script_pod()["spec"]["activeDeadlineSeconds"] == HARD_CAP_SECONDS
    assert script_pod(hard_cap_seconds=7)["spec"]["activeDeadlineSeconds"] == 7


def test_script_pod_volumes_are_memory_tmp_and_read_only_configmap_never_a_host_path() -> None:
    pod = script_pod()
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert all("hostPath" not in v for v in volumes.values())
    mounts = {m["mountPath"]: m for m in pod["spec"]["containers"][0]["volumeMounts"]}
    assert set(mounts) == {"/tmp", "/workspace"}
    tmp = volumes[mounts["/tmp"]["name"]]
    assert tmp["emptyDir"] == {"medium": "Memory", "sizeLimit": "64Mi"}
    workspace = volumes[mounts["/workspace"]["name"]]
    assert workspace["configMap"] == {"name": "corral-script-abc123-0001", "defaultMode": 0o444}
    assert mounts["/workspace"]["readOnly"] is True


def test_script_pod_command_is_the_docker_command_behind_a_stdin_gate() -> None:
    container = script_pod()["spec"]["containers"][0]
    expected = script_command("python", HARD_CAP_SECONDS, exit_mark=MARK)
    assert container["command"] == gated_command(expected)
    assert container["command"][-len(expected) :] == list(expected)
    assert container["stdin"] is True and container["stdinOnce"] is True
    assert container["tty"] is False
    assert container["workingDir"] == "/workspace"
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["HOME"] == "/tmp"


def test_script_pod_carries_the_corral_labels_and_is_sealed_by_the_deny_all_policy() -> None:
    labels = script_pod()["metadata"]["labels"]
    assert {k: labels[k] for k in LABELS} == LABELS
    selector = deny_all_policy("corral")["spec"]["podSelector"]["matchLabels"]
    assert all(labels.get(k) == v for k, v in selector.items())


def test_every_manifest_is_valid_under_the_real_schemas() -> None:
    valid(script_pod())
    valid(configmap_manifest(name="cm", namespace="corral", labels=LABELS, files={"main.py": "1"}))
    valid(deny_all_policy("corral"))
    valid(surface_policy(name="k", namespace="corral", labels=LABELS, session="s1"))
    pins = {"example.org": ["93.184.215.14"], "v6.example": ["2001:db8::1"]}
    valid(proxy_policy(name="p", namespace="corral", labels=LABELS, session="s1", pins=pins))


def test_a_pod_with_a_host_path_is_not_built() -> None:
    with pytest.raises(ValueError, match="no host path"):
        pod_manifest(script_spec(), name="x", namespace="corral", pull_policy="Never")


def test_a_root_pod_is_not_built() -> None:
    spec = script_spec()
    root = ContainerSpec(**{**{f: getattr(spec, f) for f in spec.__slots__}, "user": "0:0"})
    with pytest.raises(ValueError, match="root"):
        pod_manifest(
            root, name="x", namespace="corral", pull_policy="Never", workspace_configmap="c"
        )


def test_deny_all_policy_denies_ingress_and_egress_and_is_never_reaped() -> None:
    policy = deny_all_policy("corral")
    assert policy["metadata"]["name"] == DENY_ALL_POLICY
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert policy["spec"]["ingress"] == [] and policy["spec"]["egress"] == []
    assert "corral.owner.host" not in policy["metadata"]["labels"]


NOT_THE_PROXY = {
    "matchLabels": {"corral.managed": "true", "corral.session": "s1"},
    "matchExpressions": [{"key": "corral.kind", "operator": "NotIn", "values": ["proxy"]}],
}


def test_surface_policy_allows_egress_only_to_its_sessions_proxy_pod() -> None:
    """It selects every pod of the session but the proxy: a kiosk and a browser or
    desktop rig alike (and a kind added later, so nothing of a session is unselected)."""
    policy = surface_policy(name="k", namespace="corral", labels=LABELS, session="s1")["spec"]
    assert policy["podSelector"] == NOT_THE_PROXY
    assert policy["ingress"] == []
    [rule] = policy["egress"]
    [peer] = rule["to"]
    assert peer == {
        "podSelector": {
            "matchLabels": {
                "corral.managed": "true",
                "corral.session": "s1",
                "corral.kind": "proxy",
            }
        }
    }
    assert rule["ports"] == [{"protocol": "TCP", "port": PROXY_PORT}]


def test_proxy_policy_allows_only_the_pinned_addresses_on_443() -> None:
    pins = {"a.example": ["203.0.113.7", "203.0.113.8"], "b.example": ["2001:db8::1"]}
    policy = proxy_policy(name="p", namespace="corral", labels=LABELS, session="s1", pins=pins)
    spec = policy["spec"]
    [rule] = spec["egress"]
    cidrs = sorted(peer["ipBlock"]["cidr"] for peer in rule["to"])
    assert cidrs == ["2001:db8::1/128", "203.0.113.7/32", "203.0.113.8/32"]
    assert all("except" not in peer["ipBlock"] for peer in rule["to"])
    assert rule["ports"] == [{"protocol": "TCP", "port": 443}]
    [inbound] = spec["ingress"]
    assert inbound["from"][0]["podSelector"] == NOT_THE_PROXY


def test_proxy_policy_without_pins_has_no_egress_at_all() -> None:
    policy = proxy_policy(name="p", namespace="corral", labels=LABELS, session="s1", pins={})
    assert policy["spec"]["egress"] == []
    assert "Egress" in policy["spec"]["policyTypes"]


def test_kiosk_pod_keeps_its_tmpfs_home_shm_and_stdin_channel() -> None:
    spec = kiosk_spec(image=DEFAULT_KIOSK_IMAGE, labels=LABELS, network="n", seccomp=None)
    pod = pod_manifest(spec, name="corral-kiosk-s1-1", namespace="corral", pull_policy="Never")
    valid(pod)
    container = pod["spec"]["containers"][0]
    assert container["stdin"] is True
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {"/tmp", "/home/sandbox", "/dev/shm"}
    assert pod["metadata"]["labels"]["corral.network"] == "session"
    sizes = sorted(v["emptyDir"]["sizeLimit"] for v in pod["spec"]["volumes"])
    assert sizes == ["256Mi", "256Mi", "512Mi"]


def test_proxy_pod_gets_the_proxy_limits() -> None:
    spec = proxy_spec(
        image=DEFAULT_PROXY_IMAGE,
        name="p",
        labels=LABELS,
        network="n",
        pins={"a.example": ["203.0.113.7"]},
        allow_from="10.0.0.0/24",
    )
    pod = pod_manifest(spec, name="corral-proxy-s1-1", namespace="corral", pull_policy="Never")
    valid(pod)
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"memory": "128Mi", "cpu": "1"}


def test_a_cluster_image_replaces_the_local_name() -> None:
    pod = pod_manifest(
        script_spec(),
        name="x",
        namespace="corral",
        pull_policy="Always",
        image="registry.local:5000/corral-sandbox:latest",
        workspace_configmap="c",
    )
    container = pod["spec"]["containers"][0]
    assert container["image"] == "registry.local:5000/corral-sandbox:latest"
    assert container["imagePullPolicy"] == "Always"


def test_quantities_are_exact() -> None:
    assert memory_quantity(2 * 1024**3) == "2Gi"
    assert memory_quantity(128 * 1024**2) == "128Mi"
    assert memory_quantity(1000) == "1000"
    assert cpu_quantity(1_000_000_000) == "1"
    assert cpu_quantity(500_000_000) == "500m"
    assert tmpfs_size("rw,exec,nosuid,nodev,size=64m") == "64Mi"
    with pytest.raises(ValueError, match="size"):
        tmpfs_size("rw,exec")


def test_labels_the_api_would_refuse_are_an_error_not_rewritten() -> None:
    with pytest.raises(ValueError, match=r"corral\.owner\.host"):
        checked_labels({"corral.owner.host": "x" * 64})
    with pytest.raises(ValueError, match=r"corral\.agent"):
        checked_labels({"corral.agent": "-bad"})
    assert checked_labels({"corral.session": ""}) == {"corral.session": ""}


def test_object_names_are_dns_labels() -> None:
    assert object_name("script", "ABC123", "0a") == "corral-script-abc123-0a"
    with pytest.raises(ValueError):
        object_name("script", "x" * 60, "1")


def test_configmap_over_the_api_limit_is_refused_here() -> None:
    with pytest.raises(ValueError, match="1048576"):
        configmap_manifest(
            name="cm", namespace="corral", labels={}, files={"main.py": "x" * (1024 * 1024)}
        )


def test_a_localhost_seccomp_profile_replaces_runtime_default_everywhere() -> None:
    spec = kiosk_spec(image=DEFAULT_KIOSK_IMAGE, labels=LABELS, network="n", seccomp="/x.json")
    pod = pod_manifest(
        spec,
        name="corral-kiosk-s1-1",
        namespace="corral",
        pull_policy="Never",
        seccomp_localhost="corral/kiosk.json",
    )
    valid(pod)
    expected = {"type": "Localhost", "localhostProfile": "corral/kiosk.json"}
    assert pod["spec"]["securityContext"]["seccompProfile"] == expected
    assert pod["spec"]["containers"][0]["securityContext"]["seccompProfile"] == expected


@pytest.mark.parametrize("kind", ["rig-browser", "rig-desktop"])
def test_rig_pod_is_locked_down_as_a_kiosk_pod_is(kind: str) -> None:
    """A browser or desktop rig's spec (the shared start path's `kiosk_spec`, labelled
    `rig-KIND`) becomes a pod with the S1.2 lockdown, its tmpfs home and /tmp, its
    /dev/shm, stdin for its channel, the node's seccomp profile when configured, and no
    host path; valid under the real schemas."""
    labels = {**LABELS, "corral.kind": kind, "corral.session": "r0123456789"}
    spec = kiosk_spec(
        image="corral-browser:latest", labels=labels, network="session", seccomp="/x.json"
    )
    pod = pod_manifest(
        spec,
        name=object_name(kind, "r0123456789", "1a2b3c4d"),
        namespace="corral",
        pull_policy="IfNotPresent",
        seccomp_localhost="corral/kiosk.json",
    )
    valid(pod)
    [container] = pod["spec"]["containers"]
    ctx = container["securityContext"]
    assert ctx["runAsUser"] == 1000 and ctx["runAsGroup"] == 1000 and ctx["runAsNonRoot"]
    assert ctx["readOnlyRootFilesystem"] is True
    assert ctx["allowPrivilegeEscalation"] is False and ctx["privileged"] is False
    assert ctx["capabilities"] == {"drop": ["ALL"]}
    assert ctx["seccompProfile"] == {"type": "Localhost", "localhostProfile": "corral/kiosk.json"}
    assert container["resources"]["limits"] == {"memory": "2Gi", "cpu": "1"}
    assert container["resources"]["requests"] == container["resources"]["limits"]
    assert container["stdin"] is True and container["tty"] is False
    assert "command" not in container  # the image's own (tini, then the rig's agent)
    assert {m["mountPath"] for m in container["volumeMounts"]} == {
        "/tmp",
        "/home/sandbox",
        "/dev/shm",
    }
    sizes = {v["name"]: v["emptyDir"]["sizeLimit"] for v in pod["spec"]["volumes"]}
    assert sorted(sizes.values()) == ["256Mi", "256Mi", "512Mi"]
    assert all("hostPath" not in v for v in pod["spec"]["volumes"])
    assert {"name": "HOME", "value": "/home/sandbox"} in container["env"]
    assert pod["metadata"]["labels"]["corral.kind"] == kind
    assert pod["metadata"]["labels"]["corral.network"] == "session"
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert pod["spec"]["hostNetwork"] is False and pod["spec"]["hostPID"] is False
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True


def test_a_rig_without_an_allowlist_is_sealed_by_the_deny_all_policy() -> None:
    labels = {**LABELS, "corral.kind": "rig-desktop"}
    spec = kiosk_spec(image="corral-desktop:latest", labels=labels, network=None, seccomp=None)
    pod = pod_manifest(
        spec, name="corral-rig-desktop-r1-1", namespace="corral", pull_policy="Never"
    )
    selector = deny_all_policy("corral")["spec"]["podSelector"]["matchLabels"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    assert "dnsPolicy" not in pod["spec"]
