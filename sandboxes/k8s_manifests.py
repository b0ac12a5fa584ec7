"""Kubernetes objects for a `ContainerSpec` (SPEC S7), as pure functions: no I/O here.

`pod_manifest` is the one translation of a spec into a Pod, as
`orchestrator.backends.docker.spec.create_kwargs` is for Docker. The S1.2 isolation
becomes the pod's and container's `securityContext`, its limits the
container's `resources` (requests equal to limits), its tmpfs mounts
size-limited `emptyDir`s in memory. What Kubernetes cannot say per pod (the
256-process limit is the kubelet's `podPidsLimit`; swap is off on a node by
default) is in docs/kubernetes.md. A pod has no host path: the one
read-only directory a script gets arrives as a ConfigMap.

NetworkPolicies: every pod without a network (`spec.network is None`) is
selected by one namespace-wide policy that allows no ingress and no egress; a
session's surface pod (a kiosk, a browser or desktop rig: every pod of the session
but its proxy) may reach only the session's proxy pod, which may reach only the
pinned addresses on 443. Kiosk and rig pods are made by the same `pod_manifest`
with the same lockdown; only their `corral.kind` label differs.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from sandboxes.isolation import PROXY_PORT
from sandboxes.ports import ContainerSpec

PullPolicy = Literal["Always", "IfNotPresent", "Never"]

# S1.2 on a cluster: always 1000:1000 (no host directory is shared, so the host user
# does not matter; the image's own user is 1000:1000 too).
POD_UID = 1000
POD_GID = 1000
CONTAINER = "main"
WORKSPACE_VOLUME = "workspace"
CONFIGMAP_MAX_BYTES = 1024 * 1024  # the API server's limit on a ConfigMap's data

LABEL_NETWORK = "corral.network"  # "none": sealed by the deny-all policy
LABEL_POLICY = "corral.policy"
DENY_ALL_POLICY = "corral-sandbox-deny-all"
HTTPS_PORT = 443

_LABEL_NAME_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SIZE_RE = re.compile(r"^(\d+)([kmg]?)$")


def label_problem(key: str, value: str) -> str | None:
    """Why the API server would refuse this label, or None. corral's keys have no
    `prefix/`: a name of at most 63 characters; values at most 63 too."""
    if len(key) > 63 or not _LABEL_NAME_RE.fullmatch(key):
        return f"label key {key!r} is not a valid Kubernetes label name"
    if len(value) > 63 or not _LABEL_VALUE_RE.fullmatch(value):
        return (
            f"label {key}={value!r}: a value is at most 63 characters, letters, digits, "
            "'-', '_' or '.', starting and ending with a letter or digit"
        )
    return None


def checked_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """`labels` as they are, or ValueError naming the first the API would refuse
    (never rewritten: a reaper selects on the exact values)."""
    for key, value in labels.items():
        problem = label_problem(key, value)
        if problem is not None:
            raise ValueError(problem)
    return dict(labels)


def dns_label_problem(value: str) -> str | None:
    if len(value) > 63 or not _DNS_LABEL_RE.fullmatch(value):
        return (
            f"{value!r} is not a DNS label (1-63 lower-case letters, digits or '-', "
            "starting and ending with a letter or digit)"
        )
    return None


def object_name(kind: str, session: str, suffix: str) -> str:
    """`corral-KIND-SESSION-SUFFIX`: a DNS label, else ValueError."""
    name = f"corral-{kind}-{session}-{suffix}".lower()
    problem = dns_label_problem(name)
    if problem is not None:
        raise ValueError(f"object name {problem}")
    return name


def memory_quantity(size_bytes: int) -> str:
    """Bytes as a Kubernetes quantity, exact (2 GiB -> "2Gi")."""
    for unit, factor in (("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024)):
        if size_bytes % factor == 0:
            return f"{size_bytes // factor}{unit}"
    return str(size_bytes)


def cpu_quantity(nano_cpus: int) -> str:
    """Docker's nano-CPUs as a Kubernetes quantity (1e9 -> "1", 5e8 -> "500m")."""
    if nano_cpus % 1_000_000_000 == 0:
        return str(nano_cpus // 1_000_000_000)
    if nano_cpus % 1_000_000 == 0:
        return f"{nano_cpus // 1_000_000}m"
    raise ValueError(f"{nano_cpus} nano-CPUs is finer than a millicore")


def tmpfs_size(options: str) -> str:
    """The `size=` of a Docker tmpfs option string as a quantity ("size=64m" -> "64Mi").
    A tmpfs without a size would be unbounded in memory: ValueError."""
    for option in options.split(","):
        if option.startswith("size="):
            found = _SIZE_RE.fullmatch(option.removeprefix("size=").lower())
            if found is None:
                break
            number, unit = int(found.group(1)), found.group(2)
            factor = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[unit]
            return memory_quantity(number * factor)
    raise ValueError(f"tmpfs options {options!r} have no size=N[kmg]")


def gated_command(command: Sequence[str]) -> list[str]:
    """`command`, started only once a line arrives on stdin (then with stdin from
    /dev/null, as a Docker run's is): the backend attaches first, so no byte of output is
    missed. `exec` keeps the command's PID 1 (`timeout`, for a script). Stdin closed
    without a line (the owner is gone): the pod ends without running anything."""
    return ["sh", "-c", 'read -r _ || exit 0; exec "$@" </dev/null', "sh", *command]


def _security_context(seccomp_localhost: str | None) -> dict[str, Any]:
    seccomp: dict[str, Any] = (
        {"type": "RuntimeDefault"}
        if seccomp_localhost is None
        else {"type": "Localhost", "localhostProfile": seccomp_localhost}
    )
    return {
        "runAsUser": POD_UID,
        "runAsGroup": POD_GID,
        "runAsNonRoot": True,
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": seccomp,
    }


def _volumes(
    spec: ContainerSpec, workspace_configmap: str | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    for index, (path, options) in enumerate(sorted(spec.tmpfs.items())):
        volumes.append(
            {
                "name": f"tmpfs-{index}",
                "emptyDir": {"medium": "Memory", "sizeLimit": tmpfs_size(options)},
            }
        )
        mounts.append({"name": f"tmpfs-{index}", "mountPath": path})
    if spec.shm_size_bytes is not None:
        size = memory_quantity(spec.shm_size_bytes)
        volumes.append({"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": size}})
        mounts.append({"name": "shm", "mountPath": "/dev/shm"})
    if len(spec.mounts) > 1 or (spec.mounts and workspace_configmap is None):
        raise ValueError("a pod gets no host path: only one directory, as a ConfigMap")
    if spec.mounts:
        mount = spec.mounts[0]
        volumes.append(
            {
                "name": WORKSPACE_VOLUME,
                "configMap": {"name": workspace_configmap, "defaultMode": 0o444},
            }
        )
        mounts.append({"name": WORKSPACE_VOLUME, "mountPath": mount.target, "readOnly": True})
    return volumes, mounts


def _container(
    spec: ContainerSpec,
    image: str | None,
    pull_policy: PullPolicy,
    volume_mounts: list[dict[str, Any]],
    gate: bool,
    seccomp_localhost: str | None,
) -> dict[str, Any]:
    """The pod's one container: the spec's image, limits (= requests), env and command."""
    limits = {"memory": memory_quantity(spec.memory_bytes), "cpu": cpu_quantity(spec.nano_cpus)}
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": image or spec.image,
        "imagePullPolicy": pull_policy,
        "securityContext": _security_context(seccomp_localhost),
        "resources": {"limits": dict(limits), "requests": dict(limits)},
        "env": [{"name": k, "value": v} for k, v in sorted(spec.environment.items())],
        "volumeMounts": volume_mounts,
        "stdin": spec.stdin_open or gate,
        "stdinOnce": spec.stdin_open or gate,
        "tty": False,
        "terminationMessagePolicy": "File",
    }
    if spec.command is not None:
        container["command"] = gated_command(spec.command) if gate else list(spec.command)
    if spec.working_dir is not None:
        container["workingDir"] = spec.working_dir
    return container


def pod_manifest(
    spec: ContainerSpec,
    *,
    name: str,
    namespace: str,
    pull_policy: PullPolicy,
    image: str | None = None,
    workspace_configmap: str | None = None,
    gate: bool = False,
    seccomp_localhost: str | None = None,
) -> dict[str, Any]:
    """The Pod for `spec`. `image` replaces the spec's (a registry name for the cluster);
    the one bind mount, if any, becomes `workspace_configmap` mounted read-only; `gate`
    wraps the command in `gated_command`. Never restarted, no service account token,
    no host namespaces, the spec's hard cap as `activeDeadlineSeconds`."""
    if spec.user.split(":", 1)[0] in ("0", "root"):
        raise ValueError("corral never runs a pod as root")
    if gate and spec.command is None:
        raise ValueError("a gated pod needs an explicit command")
    labels = checked_labels(
        {**spec.labels, LABEL_NETWORK: "none" if spec.network is None else "session"}
    )
    volumes, volume_mounts = _volumes(spec, workspace_configmap)
    container = _container(spec, image, pull_policy, volume_mounts, gate, seccomp_localhost)
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "hostNetwork": False,
        "hostPID": False,
        "hostIPC": False,
        "terminationGracePeriodSeconds": 0,
        "securityContext": {
            "runAsUser": POD_UID,
            "runAsGroup": POD_GID,
            "runAsNonRoot": True,
            "seccompProfile": _security_context(seccomp_localhost)["seccompProfile"],
        },
        "containers": [container],
        "volumes": volumes,
    }
    if spec.deadline_seconds is not None:
        pod_spec["activeDeadlineSeconds"] = spec.deadline_seconds
    if spec.dns:
        pod_spec["dnsPolicy"] = "None"
        pod_spec["dnsConfig"] = {"nameservers": list(spec.dns)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": pod_spec,
    }


def configmap_manifest(
    *, name: str, namespace: str, labels: Mapping[str, str], files: Mapping[str, str]
) -> dict[str, Any]:
    """The ConfigMap holding a script's directory; ValueError past the API's 1 MiB."""
    size = sum(len(k.encode()) + len(v.encode()) for k, v in files.items())
    if size > CONFIGMAP_MAX_BYTES:
        raise ValueError(
            f"the script's files take {size} bytes; a ConfigMap holds at most {CONFIGMAP_MAX_BYTES}"
        )
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": checked_labels(labels)},
        "immutable": True,
        "data": dict(files),
    }


def _policy(
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    selector: Mapping[str, Any],
    ingress: list[dict[str, Any]],
    egress: list[dict[str, Any]],
) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": checked_labels(labels)},
        "spec": {
            "podSelector": dict(selector),
            "policyTypes": ["Ingress", "Egress"],
            "ingress": ingress,
            "egress": egress,
        },
    }


def deny_all_policy(namespace: str) -> dict[str, Any]:
    """One per namespace, shared by every corral process: every corral pod without a
    network gets no ingress and no egress. It carries no owner labels, so no reaper ever
    takes it (`orchestrator.backends.owner.owner_is_alive` answers None)."""
    return _policy(
        DENY_ALL_POLICY,
        namespace,
        {"corral.managed": "true", LABEL_POLICY: "deny-all"},
        {"matchLabels": {"corral.managed": "true", LABEL_NETWORK: "none"}},
        [],
        [],
    )


PROXY_KIND = "proxy"


def _session_pods(session: str, kind: str) -> dict[str, Any]:
    """A selector of the session's pods of `kind`."""
    labels = {"corral.managed": "true", "corral.session": session, "corral.kind": kind}
    return {"matchLabels": checked_labels(labels)}


def _session_surface(session: str) -> dict[str, Any]:
    """A selector of every pod of the session except its proxy: the kiosk, a browser or a
    desktop rig. A pod of a kind added later is restricted too (fail closed)."""
    labels = {"corral.managed": "true", "corral.session": session}
    not_proxy = {"key": "corral.kind", "operator": "NotIn", "values": [PROXY_KIND]}
    return {"matchLabels": checked_labels(labels), "matchExpressions": [not_proxy]}


def surface_policy(
    *, name: str, namespace: str, labels: Mapping[str, str], session: str
) -> dict[str, Any]:
    """A session's surface pod (kiosk or rig): no ingress (corral reaches it over the
    API's attach and exec streams); egress only to its session's proxy pod, on the proxy
    port."""
    proxy = {"podSelector": _session_pods(session, PROXY_KIND)}
    egress = [{"to": [proxy], "ports": [{"protocol": "TCP", "port": PROXY_PORT}]}]
    return _policy(name, namespace, labels, _session_surface(session), [], egress)


def proxy_policy(
    *,
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    session: str,
    pins: Mapping[str, Sequence[str]],
) -> dict[str, Any]:
    """A session's proxy pod: ingress only from its surface pod (kiosk or rig) on the
    proxy port; egress only to the pinned addresses, on 443. No pins: no egress at all."""
    surface = {"podSelector": _session_surface(session)}
    ingress = [{"from": [surface], "ports": [{"protocol": "TCP", "port": PROXY_PORT}]}]
    addresses = sorted({a for found in pins.values() for a in found})
    blocks = []
    for address in addresses:
        parsed = ipaddress.ip_address(address)
        width = 32 if parsed.version == 4 else 128
        blocks.append({"ipBlock": {"cidr": f"{parsed}/{width}"}})
    egress = [{"to": blocks, "ports": [{"protocol": "TCP", "port": HTTPS_PORT}]}] if blocks else []
    return _policy(name, namespace, labels, _session_pods(session, PROXY_KIND), ingress, egress)
