"""A session's way out on Kubernetes (SPEC S2.6 on S7): the `Egress` a kiosk session and
a browser or desktop rig get when `[backend] kind = "kubernetes"`.

Where Docker uses an internal network, a proxy container and an iptables rule, a
cluster uses two NetworkPolicies and a proxy pod:

- the session's surface pod (the kiosk, or the rig) may reach only its proxy pod, on
  the proxy port (no DNS, no other pod, nothing outside);
- the proxy pod accepts only that surface pod and may reach only the pinned addresses,
  on 443.

The policies are in place before either pod starts. Narrowing the pins (`restrict`)
tells the proxy over its control channel (the attach stream) and replaces its policy:
the narrower one is created before the wider one is deleted, so no moment leaves the
proxy pod unselected (an unselected pod would be unrestricted).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from functools import partial

import anyio

from orchestrator.backends.channel import KioskChannel
from orchestrator.backends.kubernetes.backend import KubernetesBackend
from orchestrator.backends.kubernetes.pods import KubeRun
from orchestrator.backends.pinned import PinnedEgress
from orchestrator.backends.scoped import egress_factory_of
from orchestrator.config import DEFAULT_PROXY_IMAGE
from orchestrator.errors import EgressError, NotSupported
from sandboxes.isolation import PROXY_PORT, proxy_spec
from sandboxes.k8s_manifests import proxy_policy, surface_policy
from sandboxes.ports import EgressFactory, PreparedNetwork

SESSION_NETWORK = "session"  # a pod label value (`corral.network`), not a Docker network


class KubeEgress(PinnedEgress):
    """`async with KubeEgress(backend, ...) as egress:` (the `Egress` protocol)."""

    def __init__(
        self,
        backend: KubernetesBackend,
        *,
        session_id: str,
        agent: str,
        allowed_hosts: Sequence[str],
        resolve_override: Mapping[str, str] | None = None,
        image: str = DEFAULT_PROXY_IMAGE,
        network: PreparedNetwork | None = None,
    ) -> None:
        if network is not None:  # only a warm pool makes networks ahead: none here
            raise NotSupported("not supported on Kubernetes: a session network made ahead")
        super().__init__(session_id, agent, allowed_hosts, resolve_override, image)
        self._backend = backend
        self.policies: list[str] = []  # NetworkPolicy names, oldest first
        self._generation = 0
        self._proxy: KubeRun | None = None

    @property
    def dns_servers(self) -> list[str]:
        return []  # the surface asks the proxy for names; DNS is not in its policy

    def _labels(self, kind: str) -> dict[str, str]:
        return self._backend.labels(kind=kind, agent=self.agent, session=self.session_id)

    async def open(self) -> None:
        try:
            await self._enter()
        except BaseException:
            await self._cleanup()
            raise

    async def end(self, ok: bool) -> None:
        await self._cleanup()

    async def _enter(self) -> None:
        if not await self._pin():
            return  # the surface pod gets no network: the namespace's deny-all policy
        backend, namespace = self._backend, self._backend.settings.namespace
        name = f"corral-surface-{self.session_id}-net"
        await backend.request(
            "POST",
            "networkpolicies",
            body=surface_policy(
                name=name,
                namespace=namespace,
                labels=self._labels("policy"),
                session=self.session_id,
            ),
        )
        self.policies.append(name)
        await self._add_proxy_policy(self.pins)
        spec = proxy_spec(
            image=self.image,
            name=f"corral-proxy-{self.session_id}",
            labels=self._labels("proxy"),
            network=SESSION_NETWORK,
            pins=self.pins,
            allow_from="0.0.0.0/0",  # the policy admits only the session's surface pod
        )
        self._proxy = await backend.open_attached(spec)
        self._control = KioskChannel(self._proxy, name="egress proxy")
        pod = await backend.request("GET", "pods", self._proxy.name)
        address = (pod.get("status") or {}).get("podIP")
        if not address:
            raise EgressError(f"the proxy pod {self._proxy.name} has no address")
        self.network_name = SESSION_NETWORK
        self.proxy_url = f"http://{address}:{PROXY_PORT}"

    async def _add_proxy_policy(self, pins: Mapping[str, Sequence[str]]) -> None:
        self._generation += 1
        name = f"corral-proxy-{self.session_id}-net-{self._generation}"
        await self._backend.request(
            "POST",
            "networkpolicies",
            body=proxy_policy(
                name=name,
                namespace=self._backend.settings.namespace,
                labels=self._labels("policy"),
                session=self.session_id,
                pins=pins,
            ),
        )
        self.policies.append(name)

    async def _narrowed(self) -> None:
        """The proxy's policy narrows to the kept addresses: the narrower one is created
        before the wider ones are deleted."""
        wider = [p for p in self.policies if p.startswith(f"corral-proxy-{self.session_id}-")]
        await self._add_proxy_policy(self.pins)
        for name in wider:
            await self._backend.remove(f"networkpolicy/{name}")
            self.policies.remove(name)

    async def _cleanup(self) -> None:
        try:
            proxy, self._proxy, self._control = self._proxy, None, None
            if proxy is not None:
                await proxy.close()
        finally:
            with anyio.CancelScope(shield=True):
                for name in reversed(self.policies):
                    with contextlib.suppress(Exception):
                        await self._backend.remove(f"networkpolicy/{name}")
                self.policies = []


def kube_egress_factory(backend: KubernetesBackend, proxy_image: str) -> EgressFactory:
    """Sessions' ways out on a cluster: a `KubeEgress` each (an empty allowlist: no
    objects)."""
    return egress_factory_of(partial(KubeEgress, backend, image=proxy_image))
