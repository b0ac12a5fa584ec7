"""Network-enforced egress for kiosk sessions (SPEC S2.6, docs/kiosk-internals.md section 3).

A session with an allowlist gets, for its lifetime:

- a network `corral-s-<id>`, `internal=True` (Docker drops forwarding out of it), whose
  bridge is named `crl<id>` so that
- an `iptables -I INPUT -i crl<id> -m conntrack --ctstate NEW -j DROP` rule (and the
  same with ip6tables) can close the path Docker leaves open: the host's own services,
  reachable through the bridge's gateway / link-local addresses (Docker filters FORWARD,
  not INPUT);
- a `corral-proxy` container on the shared `corral-egress` network, connected to the
  session network with the alias `proxy`. It is the session's only way out: it allows
  only `CONNECT host:443` for the allowlisted names, and connects only to the addresses
  pinned here at session start (the proxy never resolves a name, so DNS changes after
  the start, or a client lying about the TLS server name, gain nothing).

Order on enter: resolve, network, firewall rule, proxy. The rule exists before any
container is attached to the network, and a rule is only ever added for a network that
already exists (`reap_networks` relies on that). On exit, shielded from cancellation
and also after a half-failed enter: proxy container, network, rule.

The kiosk container must be attached only to `network_name` (and removed before this
context exits); with an empty allowlist nothing is created, `network_name` is None and
the kiosk runs with `network_mode=none`.

Every Docker SDK call runs in a worker thread, with errors translated by
`orchestrator.backends.docker.sdk.map_docker_errors` (through `sdk.blocking`); the
networks are `networks`', the firewall rule is `firewall`'s, orphans are
`network_reaper`'s, the pins `orchestrator.backends.pins`' and the host-name policy
`sandboxes.hostnames`'.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from functools import partial

import anyio

from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.backends.docker.networks import (
    KIND_PROXY,
    PROXY_URL,
    SESSION_ID_RE,
    SessionNetwork,
    bridge_name,
    ensure_egress_network,
)
from orchestrator.backends.docker.proxy import RunningProxy, pin, start_proxy
from orchestrator.backends.pinned import CONTROL_DEADLINE, PinnedEgress
from orchestrator.backends.scoped import egress_factory_of
from orchestrator.config import DEFAULT_PROXY_IMAGE
from orchestrator.errors import EngineError
from sandboxes.ports import EgressFactory

logger = logging.getLogger("corral.egress")

PROXY_IMAGE = DEFAULT_PROXY_IMAGE


# ---------------------------------------------------------------- the session's egress


class SessionEgress(PinnedEgress):
    """One kiosk session's way out: `async with SessionEgress(...) as egress:`.

    Attributes after enter: `network_name` (None when the allowlist is empty or nothing
    resolved), `proxy_url` (`http://proxy:3128`, or None), `pins` ({host: (ip, ...)}),
    `left_out` ({host: why} for allowlisted hosts that got no pin), `bridge`, `subnet`, `gateway`,
    `dns_servers` (pass as the kiosk container's `dns`: see its docstring).
    """

    def __init__(
        self,
        backend: DockerBackend,
        *,
        session_id: str,
        agent: str,
        allowed_hosts: Sequence[str],
        resolve_override: Mapping[str, str] | None = None,
        image: str = PROXY_IMAGE,
        ready_timeout: float = 30.0,
        network: SessionNetwork | None = None,
    ) -> None:
        if not SESSION_ID_RE.match(session_id):
            raise ValueError(f"session id must be 1-12 of [a-z0-9], got {session_id!r}")
        super().__init__(session_id, agent, allowed_hosts, resolve_override, image)
        self._backend = backend
        self._ready_timeout = ready_timeout
        self.bridge = bridge_name(session_id)
        self.network_id: str | None = None
        self.subnet: str | None = None
        self.gateway: str | None = None
        self.proxy_container_id: str | None = None
        self.proxy_egress_ip: str | None = None
        self._proxy: RunningProxy | None = None
        # A network handed in (the kiosk warm pool's) is its maker's to remove.
        self._network = network
        self._owns_network = network is None

    @property
    def dns_servers(self) -> list[str]:
        """The `dns` to give the kiosk container (empty without a network).

        Docker's embedded resolver forwards names it does not know to the host's
        resolvers; when those are on loopback (systemd-resolved's 127.0.0.53, ...),
        engines before 26.0.0 / 25.0.4 / 23.0.11 do it from the host's namespace even
        for containers on internal networks (CVE-2024-29018): a DNS exfiltration
        channel around `internal=True`. A custom `dns` makes the resolver forward from
        the container's own namespace; pointing it at the session gateway gets every
        such query dropped by the INPUT rule (tests/integration/test_egress.py proves
        both). The name `proxy` still resolves: the resolver answers aliases itself."""
        return [self.gateway] if self.gateway else []

    async def open(self) -> None:
        try:
            await self._enter()
        except BaseException:
            await self._cleanup(raise_errors=False)
            raise

    async def end(self, ok: bool) -> None:
        await self._cleanup(raise_errors=ok)

    async def _enter(self) -> None:
        if not await self._pin():
            return  # no allowlist (or nothing resolved): the kiosk gets network_mode none
        backend = self._backend
        owner_labels = backend.labels(kind=KIND_PROXY, agent=self.agent, session=self.session_id)
        if self._network is None:
            # The rule goes in before any container is attached to the network.
            self._network = SessionNetwork(backend, self.session_id)
            await self._network.create(owner_labels)
        network = self._network
        assert network.network_id is not None and network.subnet is not None
        self.network_id, self.network_name = network.network_id, network.name
        self.subnet, self.gateway = network.subnet, network.gateway
        armed = network.take_proxy()  # a warm pool's, made with its network: pinned now
        if armed is not None:
            self._adopt(armed)
            await pin(armed, self.pins, CONTROL_DEADLINE)
        else:
            await ensure_egress_network(backend)
            self._adopt(
                await start_proxy(
                    backend,
                    image=self.image,
                    name=f"corral-proxy-{self.session_id}",
                    labels=owner_labels,
                    session_network_id=network.network_id,
                    subnet=network.subnet,
                    pins=self.pins,
                    ready_timeout=self._ready_timeout,
                )
            )
        self.proxy_url = PROXY_URL

    def _adopt(self, proxy: RunningProxy) -> None:
        self._proxy = proxy
        self.proxy_container_id = proxy.id
        self.proxy_egress_ip = proxy.egress_ip
        self._control = proxy.control

    async def _cleanup(self, *, raise_errors: bool) -> None:
        """Remove the proxy, the network and the rule; every step is tried."""
        problems: list[str] = []
        with anyio.CancelScope(shield=True):
            if self._proxy is not None:
                try:
                    await self._proxy.close()  # closes the control channel, removes it
                    self._proxy = None
                    self._control = None
                    self.proxy_container_id = None
                except Exception as exc:
                    problems.append(f"proxy container: {exc}")
            if self._network is not None and self._owns_network:
                problems += await self._network._remove()
        self.proxy_url = None
        if problems:
            message = f"session {self.session_id} egress cleanup: " + "; ".join(problems)
            logger.warning("%s", message)
            if raise_errors:
                raise EngineError(message)


def docker_egress_factory(backend: DockerBackend, proxy_image: str) -> EgressFactory:
    """Sessions' ways out on Docker: a `SessionEgress` each (on the pool's network when a
    claimed kiosk brings one)."""
    return egress_factory_of(partial(SessionEgress, backend, image=proxy_image))
