"""The fake API server's object store: validation as the real API does it, label
selectors, resource versions and the watch event log.

Every object created is checked against the real OpenAPI schemas of Kubernetes 1.37
(`kubernetes-validate`, strict: an unknown field is refused, as with
`fieldValidation=Strict`), then against the rules the API server checks in code and the
schemas cannot say: object and label name syntax, a ConfigMap's 1 MiB, requests not above
limits, and - because the fake namespace is labelled
`pod-security.kubernetes.io/enforce=restricted` - the Pod Security "restricted" profile.
"""

from __future__ import annotations

import copy
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import kubernetes_validate

K8S_VERSION = "1.37.0"
_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_CONFIG_KEY_RE = re.compile(r"^[-._a-zA-Z0-9]+$")

# apimachinery's validation (its own copy here, not corral's): a label key is a
# qualified name, [prefix/]name, the name at most 63 characters; a value at most 63.
_QUALIFIED_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def label_problem(key: str, value: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _SUBDOMAIN_RE.fullmatch(prefix)):
        return f"{key!r}: prefix part must be a DNS-1123 subdomain"
    if not name or len(name) > 63 or not _QUALIFIED_NAME_RE.fullmatch(name):
        return f"{key!r}: name part must consist of alphanumeric characters, '-', '_' or '.'"
    if len(value) > 63 or not _LABEL_VALUE_RE.fullmatch(value):
        return (
            f"{value!r}: a valid label must be an empty string or consist of alphanumeric "
            "characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        )
    return None


KINDS = {  # plural -> (apiVersion, kind)
    "pods": ("v1", "Pod"),
    "configmaps": ("v1", "ConfigMap"),
    "networkpolicies": ("networking.k8s.io/v1", "NetworkPolicy"),
}


class ApiRefusal(Exception):
    """What the real API server would answer instead: a Status with this code."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message

    def status(self) -> dict[str, Any]:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }


def _invalid(kind: str, name: str, problem: str) -> ApiRefusal:
    return ApiRefusal(422, "Invalid", f'{kind} "{name}" is invalid: {problem}')


def parse_selector(text: str) -> list[Callable[[Mapping[str, str]], bool]]:
    """A label selector (`a=b`, `a==b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x)`)."""
    tests: list[Callable[[Mapping[str, str]], bool]] = []
    for part in re.findall(r"[^,(]+(?:\([^)]*\))?", text):
        term = part.strip()
        if not term:
            continue
        found = re.fullmatch(r"(\S+)\s+(in|notin)\s+\(([^)]*)\)", term)
        if found:
            key, op = found.group(1), found.group(2)
            values = {v.strip() for v in found.group(3).split(",")}
            if op == "in":
                tests.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
            else:
                tests.append(lambda labels, k=key, vs=values: labels.get(k) not in vs)
        elif "!=" in term:
            key, value = term.split("!=", 1)
            tests.append(lambda labels, k=key, v=value: labels.get(k) != v)
        elif "=" in term:
            key, value = re.split("==?", term, maxsplit=1)
            tests.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif term.startswith("!"):
            tests.append(lambda labels, k=term[1:]: k not in labels)
        else:
            tests.append(lambda labels, k=term: k in labels)
    return tests


def matches(obj: Mapping[str, Any], label_selector: str, field_selector: str) -> bool:
    labels = obj["metadata"].get("labels") or {}
    if not all(test(labels) for test in parse_selector(label_selector)):
        return False
    for term in filter(None, field_selector.split(",")):
        key, value = term.split("=", 1)
        if key == "metadata.name" and obj["metadata"]["name"] != value:
            return False
        if key == "status.phase" and obj.get("status", {}).get("phase") != value:
            return False
    return True


def _check_restricted(name: str, pod: Mapping[str, Any]) -> None:
    """Pod Security Admission, profile "restricted" (as enforced on the namespace)."""
    spec = pod["spec"]
    pod_ctx = spec.get("securityContext") or {}
    problems = []
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(flag):
            problems.append(f"{flag}=true")
    for volume in spec.get("volumes") or []:
        if "hostPath" in volume:
            problems.append(f'restricted volume types (volume "{volume["name"]}" uses hostPath)')
    for container in spec["containers"] + (spec.get("initContainers") or []):
        ctx = container.get("securityContext") or {}
        cname = container["name"]
        if ctx.get("privileged"):
            problems.append(f'privileged (container "{cname}")')
        if ctx.get("allowPrivilegeEscalation") is not False:
            problems.append(f'allowPrivilegeEscalation != false (container "{cname}")')
        if "ALL" not in ((ctx.get("capabilities") or {}).get("drop") or []):
            problems.append(f'unrestricted capabilities (container "{cname}" must drop ALL)')
        if (ctx.get("capabilities") or {}).get("add"):
            problems.append(f'unrestricted capabilities (container "{cname}" adds some)')
        if not (ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot"))):
            problems.append(f'runAsNonRoot != true (container "{cname}")')
        if ctx.get("runAsUser", pod_ctx.get("runAsUser")) == 0:
            problems.append(f'runAsUser=0 (container "{cname}")')
        seccomp = ctx.get("seccompProfile") or pod_ctx.get("seccompProfile") or {}
        if seccomp.get("type") not in ("RuntimeDefault", "Localhost"):
            problems.append(f'seccompProfile (container "{cname}" must set RuntimeDefault)')
    if problems:
        raise ApiRefusal(
            403,
            "Forbidden",
            f'pods "{name}" is forbidden: violates PodSecurity "restricted:latest": '
            + ", ".join(problems),
        )


def _quantity(text: str) -> float:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9}
    for unit, factor in units.items():
        if text.endswith(unit):
            return float(text[: -len(unit)]) * factor
    return float(text)


def validate(plural: str, namespace: str, obj: Mapping[str, Any]) -> None:
    api_version, kind = KINDS[plural]
    meta = obj.get("metadata") or {}
    name = str(meta.get("name", ""))
    if obj.get("kind") != kind or obj.get("apiVersion") != api_version:
        raise ApiRefusal(400, "BadRequest", f"expected {api_version} {kind} on /{plural}")
    try:
        kubernetes_validate.validate(dict(obj), K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        path = ".".join(str(p) for p in exc.absolute_path) or "(root)"
        raise _invalid(kind, name, f"{path}: {exc.message}") from exc
    if not name or len(name) > 253 or not _SUBDOMAIN_RE.fullmatch(name):
        raise _invalid(kind, name, "metadata.name: Invalid value: must be a DNS subdomain")
    if meta.get("namespace", namespace) != namespace:
        raise ApiRefusal(400, "BadRequest", "the namespace of the object does not match")
    for key, value in (meta.get("labels") or {}).items():
        problem = label_problem(key, value)
        if problem is not None:
            raise _invalid(kind, name, f"metadata.labels: Invalid value: {problem}")
    if kind == "ConfigMap":
        data = obj.get("data") or {}
        for key in data:
            if not _CONFIG_KEY_RE.fullmatch(key):
                raise _invalid(kind, name, f"data[{key}]: Invalid value: a valid config key")
        if sum(len(k.encode()) + len(v.encode()) for k, v in data.items()) > 1024 * 1024:
            raise _invalid(kind, name, "[]: Too long: must have at most 1048576 bytes")
    _check_enums(kind, name, obj)
    if kind == "Pod":
        if len(name) > 63 or not _DNS_LABEL_RE.fullmatch(name):
            raise _invalid(kind, name, "metadata.name: Invalid value: must be a DNS label")
        for container in obj["spec"]["containers"]:
            resources = container.get("resources") or {}
            limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
            for resource, wanted in requests.items():
                if resource in limits and _quantity(wanted) > _quantity(limits[resource]):
                    raise _invalid(
                        kind,
                        name,
                        f"spec.containers[0].resources.requests[{resource}]: "
                        "must be less than or equal to the limit",
                    )
        _check_restricted(name, obj)


# Enumerations the API server checks in code (the OpenAPI schemas say only "string").
_POD_ENUMS = {
    "restartPolicy": {"Always", "OnFailure", "Never"},
    "dnsPolicy": {"ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"},
}
_CONTAINER_ENUMS = {
    "imagePullPolicy": {"Always", "IfNotPresent", "Never"},
    "terminationMessagePolicy": {"File", "FallbackToLogsOnError"},
}


def _check_enums(kind: str, name: str, obj: Mapping[str, Any]) -> None:
    spec = obj.get("spec") or {}
    found: list[tuple[str, Any, set[str]]] = []
    if kind == "Pod":
        found += [(f"spec.{k}", spec[k], allowed) for k, allowed in _POD_ENUMS.items() if k in spec]
        for i, container in enumerate(spec.get("containers") or []):
            found += [
                (f"spec.containers[{i}].{k}", container[k], allowed)
                for k, allowed in _CONTAINER_ENUMS.items()
                if k in container
            ]
            seccomp = (container.get("securityContext") or {}).get("seccompProfile") or {}
            if "type" in seccomp:
                found.append(
                    (
                        "seccompProfile.type",
                        seccomp["type"],
                        {"RuntimeDefault", "Localhost", "Unconfined"},
                    )
                )
    if kind == "NetworkPolicy":
        for policy_type in spec.get("policyTypes") or []:
            found.append(("spec.policyTypes", policy_type, {"Ingress", "Egress"}))
        for direction in ("ingress", "egress"):
            for rule in spec.get(direction) or []:
                for port in rule.get("ports") or []:
                    found.append(
                        ("ports.protocol", port.get("protocol", "TCP"), {"TCP", "UDP", "SCTP"})
                    )
    for path, value, allowed in found:
        if value not in allowed:
            raise _invalid(
                kind,
                name,
                f"{path}: Unsupported value: {value!r}: supported values: "
                + ", ".join(sorted(allowed)),
            )


@dataclass
class Store:
    """Objects by (plural, namespace, name), a resource version counter and an event log."""

    namespaces: set[str] = field(default_factory=lambda: {"default"})
    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    events: list[tuple[int, str, str, dict[str, Any]]] = field(default_factory=list)
    version: int = 1
    changed: anyio.Event | None = None  # made in the server's event loop, when watched

    def _bump(self, plural: str, kind: str, obj: dict[str, Any]) -> None:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        self.events.append((self.version, plural, kind, copy.deepcopy(obj)))
        if self.changed is not None:
            self.changed.set()
            self.changed = None

    def create(self, plural: str, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        if namespace not in self.namespaces:
            raise ApiRefusal(404, "NotFound", f'namespaces "{namespace}" not found')
        validate(plural, namespace, obj)
        key = (plural, namespace, obj["metadata"]["name"])
        if key in self.objects:
            raise ApiRefusal(409, "AlreadyExists", f'{plural} "{key[2]}" already exists')
        stored = copy.deepcopy(obj)
        stored["metadata"].update(namespace=namespace, uid=str(uuid.uuid4()))
        self.objects[key] = stored
        self._bump(plural, "ADDED", stored)
        return copy.deepcopy(stored)

    def get(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        try:
            return self.objects[(plural, namespace, name)]
        except KeyError:
            raise ApiRefusal(404, "NotFound", f'{plural} "{name}" not found') from None

    def modified(self, plural: str, obj: dict[str, Any]) -> None:
        self._bump(plural, "MODIFIED", obj)

    def delete(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        obj = self.get(plural, namespace, name)
        del self.objects[(plural, namespace, name)]
        self._bump(plural, "DELETED", obj)
        return copy.deepcopy(obj)

    def list(
        self, plural: str, namespace: str | None, label_selector: str, field_selector: str
    ) -> list[dict[str, Any]]:
        return [
            copy.deepcopy(obj)
            for (kind, ns, _), obj in sorted(self.objects.items())
            if kind == plural
            and (namespace is None or ns == namespace)
            and matches(obj, label_selector, field_selector)
        ]
