"""The Kubernetes implementation of `ContainerBackend` (SPEC S7), on kr8s.

A run is a Pod built by `sandboxes.k8s_manifests.pod_manifest`; the one directory a
script gets travels as an immutable ConfigMap (no host path). The pod's command is
gated: it waits for one line on stdin, so corral attaches (WebSocket, channel
protocol) before the script writes a byte, then sends the line; output comes back
over that attach stream, stdout and stderr in the order the kubelet sends them.
The exit code and an OOM kill are read from the pod's status; kill and cancel delete
the pod (grace period 1 s). Every object carries the `corral.*` labels, so
`orchestrator.backends.reaper` removes a dead owner's pods, ConfigMaps and policies here as
it does containers on Docker. Errors are translated in `k8s_stream.map_kube_errors`.
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import kr8s
import kr8s.asyncio

from orchestrator.backends.kubernetes.pods import KubeExec, KubeRun
from orchestrator.backends.kubernetes.stream import (
    ClusterTarget,
    map_kube_errors,
)
from orchestrator.backends.owner import LABEL_MANAGED, Owner
from orchestrator.errors import (
    EngineConflict,
    EngineNotFound,
    NotSupported,
    SandboxUnavailable,
    UnavailableCode,
)
from sandboxes.k8s_manifests import (
    PullPolicy,
    deny_all_policy,
)
from sandboxes.ports import (
    AuditSink,
    ContainerSpec,
    DoctorRow,
    EgressFactory,
    ManagedContainer,
    PreparedNetwork,
    WaitingContainer,
)

PLURALS = {"pod": "pods", "configmap": "configmaps", "networkpolicy": "networkpolicies"}
GROUPS = {"networkpolicies": "networking.k8s.io/v1"}
GONE_TIMEOUT = 30.0


@dataclass(frozen=True, slots=True)
class KubeSettings:
    """`[backend] kind = "kubernetes"`, resolved by the CLI (the kubeconfig path is
    absolute; `images` maps a local image name to the name the cluster pulls)."""

    kubeconfig: str
    namespace: str
    context: str | None = None
    pull_policy: PullPolicy = "IfNotPresent"
    images: Mapping[str, str] = field(default_factory=dict)
    # A spec with its own seccomp profile (the kiosk's) gets this Localhost profile;
    # None: RuntimeDefault, as every other pod.
    seccomp_localhost: str | None = None


def resolve_kubeconfig(configured: str | None, environ: Mapping[str, str]) -> str:
    """The kubeconfig file corral uses: the configured one, else $KUBECONFIG's first entry,
    else ~/.kube/config (what kubectl would read)."""
    if configured:
        return os.path.expanduser(configured)
    from_env = environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    if from_env:
        return from_env
    return os.path.join(environ.get("HOME", os.path.expanduser("~")), ".kube", "config")


def _server_of(kubeconfig: str, context: str | None) -> str:
    """The server URL the kubeconfig names for `context` (for messages), or '?'."""
    try:
        import yaml  # type: ignore[import-untyped]  # kr8s's dependency

        data = yaml.safe_load(Path(kubeconfig).read_text())
        ctx_name = context or data.get("current-context")
        ctx = next(c["context"] for c in data["contexts"] if c["name"] == ctx_name)
        return str(
            next(c["cluster"]["server"] for c in data["clusters"] if c["name"] == ctx["cluster"])
        )
    except Exception:
        return "?"


class KubernetesBackend:
    """One API connection (kr8s) shared by every call of this process:
    `sandboxes.ports.ContainerBackend` on a cluster. No warm pools (yet): every script
    runs as a fresh pod, every kiosk and rig starts with its session."""

    supports_pools = False

    def __init__(self, owner: Owner, settings: KubeSettings) -> None:
        self.owner = owner
        self.settings = settings
        self.target = ClusterTarget(
            kubeconfig=settings.kubeconfig,
            context=settings.context,
            namespace=settings.namespace,
            server=_server_of(settings.kubeconfig, settings.context),
        )
        self._api: Any = None
        self._policy_ready = False

    @property
    def url(self) -> str:
        return self.target.server

    async def api(self) -> Any:
        if self._api is None:
            if not await anyio.Path(self.settings.kubeconfig).is_file():
                raise SandboxUnavailable(
                    UnavailableCode.DAEMON_UNREACHABLE,
                    f"no kubeconfig file at {self.settings.kubeconfig} (tried [backend] "
                    "kubeconfig, then $KUBECONFIG, then ~/.kube/config)",
                    "set [backend] kubeconfig in config.toml to your cluster's kubeconfig",
                )
            with map_kube_errors(self.target), warnings.catch_warnings():
                # kr8s warns about API versions newer than it was tested with; corral
                # uses only core objects whose shape has not changed.
                warnings.simplefilter("ignore", UserWarning)
                self._api = await kr8s.asyncio.api(
                    kubeconfig=self.settings.kubeconfig,
                    context=self.settings.context or "",
                    namespace=self.settings.namespace,
                )
        return self._api

    def labels(self, *, kind: str, agent: str, session: str) -> dict[str, str]:
        return self.owner.labels(kind=kind, agent=agent, session=session)

    def cluster_image(self, image: str) -> str:
        return self.settings.images.get(image, image)

    async def request(
        self, method: str, plural: str, name: str = "", *, body: Any = None, **params: Any
    ) -> dict[str, Any]:
        """One API call on a namespaced object or collection; the parsed answer."""
        api = await self.api()
        url = f"{plural}/{name}" if name else plural
        kwargs: dict[str, Any] = {"params": params} if params else {}
        if body is not None:
            kwargs["content"] = json.dumps(body)
        with map_kube_errors(self.target):
            async with api.call_api(
                method,
                version=GROUPS.get(plural, "v1"),
                namespace=self.settings.namespace,
                url=url,
                **kwargs,
            ) as response:
                result: dict[str, Any] = response.json()
                return result

    async def check(self, image: str) -> None:
        """The API answers, the namespace exists, and the deny-all policy is in place.
        Whether a node has `image` shows only when a pod starts (then: image_missing).
        Reading the namespace needs a cluster-wide permission corral's Role may lack
        (docs/kubernetes.md): refused, listing pods in it proves enough."""
        api = await self.api()
        try:
            with map_kube_errors(self.target):
                async with api.call_api(
                    "GET", version="v1", url=f"namespaces/{self.settings.namespace}"
                ):
                    pass
        except SandboxUnavailable as exc:
            if exc.code is not UnavailableCode.PERMISSION_DENIED:
                raise
            await self.request("GET", "pods", limit="1")
        except EngineNotFound as exc:
            raise SandboxUnavailable(
                UnavailableCode.INVALID_CONFIG,
                f"the namespace {self.settings.namespace} does not exist on "
                f"{self.target.describe()}",
                f"kubectl create namespace {self.settings.namespace}",
            ) from exc
        await self.ensure_policy()

    async def ensure_policy(self) -> None:
        """The namespace's deny-all NetworkPolicy for pods without a network (once)."""
        if self._policy_ready:
            return
        with contextlib.suppress(EngineConflict):  # made already (by us, or another process)
            await self.request(
                "POST", "networkpolicies", body=deny_all_policy(self.settings.namespace)
            )
        self._policy_ready = True

    def start(self, spec: ContainerSpec) -> KubeRun:
        return KubeRun(self, spec, gate=True)

    async def open_attached(self, spec: ContainerSpec) -> KubeRun:
        """A long-lived pod attached on stdin/stdout: a kiosk's or rig's channel (the
        desktop agent's JSON lines, the browser rig's CDP pipe), or a proxy's."""
        run = KubeRun(self, spec, gate=False)
        await run.open()
        return run

    async def open_exec(self, container_id: str, argv: Sequence[str], *, user: str) -> KubeExec:
        """`argv` in a running pod over the exec WebSocket. `user` cannot be chosen per
        exec on Kubernetes: it runs as the pod's user (1000:1000)."""
        stream = KubeExec(self, container_id.removeprefix("pod/"), argv)
        await stream.open()
        return stream

    async def list_managed(self, label_filters: Mapping[str, str]) -> list[ManagedContainer]:
        """Pods, ConfigMaps and NetworkPolicies labelled as corral's; the id is
        `KIND/NAME` (what `remove` takes)."""
        selector = ",".join(
            [f"{LABEL_MANAGED}=true"] + [f"{k}={v}" for k, v in label_filters.items()]
        )
        found = []
        for kind, plural in PLURALS.items():
            listed = await self.request("GET", plural, labelSelector=selector)
            for item in listed.get("items") or []:
                meta = item["metadata"]
                found.append(
                    ManagedContainer(
                        id=f"{kind}/{meta['name']}",
                        name=meta["name"],
                        status=str((item.get("status") or {}).get("phase", "")),
                        labels=dict(meta.get("labels") or {}),
                        runs=kind == "pod",
                    )
                )
        return found

    async def remove(self, container_id: str) -> None:
        """Delete and wait (at most GONE_TIMEOUT) until gone; gone already is fine. A bare
        name is a pod."""
        kind, _, name = container_id.rpartition("/")
        plural = PLURALS[kind or "pod"]
        # A pod: grace 1, not 0 (0 is a force delete: the API forgets the pod at once
        # while its containers may still run); its PID 1 gets SIGKILL a second later at
        # most, and DELETED comes once the kubelet has confirmed it stopped.
        grace = 1 if plural == "pods" else 0
        try:
            await self.request("DELETE", plural, name, gracePeriodSeconds=grace)
        except EngineNotFound:
            return
        with anyio.move_on_after(GONE_TIMEOUT):
            async with aclosing(self.watch(plural, name)) as events:
                async for event in events:
                    if event["type"] == "DELETED":
                        return

    async def is_running(self, container_id: str) -> bool:
        """Whether the pod exists and its phase is Running."""
        try:
            pod = await self.request("GET", "pods", container_id.removeprefix("pod/"))
        except EngineNotFound:
            return False
        return (pod.get("status") or {}).get("phase") == "Running"

    async def set_cpu_shares(self, container_id: str, shares: int) -> None:
        raise _no_pools("a pool member's CPU weight")

    async def memory_bytes(self, container_id: str) -> int | None:
        return None  # the metrics API is optional on a cluster: `corral doctor` says unknown

    async def image_id(self, image: str) -> str:
        raise _no_pools("image ids (the nodes pull images by name)")

    async def open_waiting(self, spec: ContainerSpec) -> WaitingContainer:
        raise _no_pools("a warm script pod")

    async def prepare_network(
        self, agent: str, proxy_image: str | None = None, prefix: str = ""
    ) -> PreparedNetwork:
        raise _no_pools("a warm pool (its networks made ahead)")

    def egress_factory(self, proxy_image: str) -> EgressFactory:
        from orchestrator.backends.kubernetes.egress import kube_egress_factory

        return kube_egress_factory(self, proxy_image)

    async def reap_networks(self) -> list[str]:
        """Nothing to do: a session's NetworkPolicies are labelled like its pods, and
        `reap_orphans` removes them with the pods (`list_managed` lists them)."""
        return []

    async def doctor_rows(
        self, image: str, runtime: str, audit: AuditSink | None = None
    ) -> list[DoctorRow]:
        from orchestrator.backends.kubernetes.doctor import kubernetes_rows

        return await kubernetes_rows(self, image, audit)

    async def watch(self, plural: str, name: str) -> AsyncGenerator[dict[str, Any]]:
        """Events on one object, from now: a GET (404: one synthetic DELETED), then the
        watch from its resourceVersion."""
        try:
            current = await self.request("GET", plural, name)
        except EngineNotFound:
            yield {"type": "DELETED", "object": {}}
            return
        yield {"type": "MODIFIED", "object": current}
        params = {
            "watch": "true",
            "fieldSelector": f"metadata.name={name}",
            "resourceVersion": current["metadata"].get("resourceVersion", "0"),
        }
        async with self._streamed(plural, params, GROUPS.get(plural, "v1")) as response:
            async for line in response.aiter_lines():
                if line.strip():
                    yield json.loads(line)

    async def log_bytes(self, pod: str, container: str) -> AsyncGenerator[bytes]:
        """A pod's container log (its merged output), as the API streams it."""
        async with self._streamed(f"pods/{pod}/log", {"container": container}) as response:
            async for chunk in response.aiter_bytes():
                yield chunk

    @contextlib.asynccontextmanager
    async def _streamed(
        self, url: str, params: dict[str, str], version: str = "v1"
    ) -> AsyncIterator[Any]:
        """A GET in the namespace whose answer is read as it comes (no client timeout: the
        caller's deadline bounds it); errors mapped, the body's reading included."""
        api = await self.api()
        with map_kube_errors(self.target):
            async with api.call_api(
                "GET",
                version=version,
                namespace=self.settings.namespace,
                url=url,
                params=params,
                stream=True,
                timeout=None,
            ) as response:
                yield response

    async def close(self) -> None:
        """Close the client's HTTP session (kr8s keeps the Api object cached; it opens a
        new session on its next call)."""
        api, self._api = self._api, None
        session = getattr(api, "_session", None)
        if session is not None:
            await session.aclose()


def _no_pools(what: str) -> NotSupported:
    return NotSupported(
        f"not supported on Kubernetes: {what}; set [container.sandbox] warm = 0 and "
        '[container.kiosk] warm = 0, or use [backend] kind = "docker"'
    )
