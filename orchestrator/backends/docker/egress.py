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
`orchestrator.backends.docker.backend.map_docker_errors` (through `DockerBackend.call`); the
firewall rule is `orchestrator.backends.docker.firewall`'s, orphans are
`orchestrator.backends.docker.network_reaper`'s,
and the host-name policy is `sandboxes.hostnames`'.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import re
import secrets
import socket
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from types import TracebackType
from typing import Any

import anyio
import docker
import docker.errors

from orchestrator.backends.docker.backend import DockerAttached, DockerBackend
from orchestrator.backends.docker.firewall import add_input_drop, remove_input_drop
from orchestrator.channel import KioskChannel
from orchestrator.config import DEFAULT_PROXY_IMAGE
from orchestrator.errors import EgressError, EngineError
from orchestrator.owner import LABEL_KIND, LABEL_MANAGED
from sandboxes.hostnames import address_class, is_ip_literal, normalise_host, usable_address
from sandboxes.isolation import PROXY_PORT, proxy_spec

logger = logging.getLogger("corral.egress")

PROXY_IMAGE = DEFAULT_PROXY_IMAGE
PROXY_ALIAS = "proxy"
PROXY_URL = f"http://{PROXY_ALIAS}:{PROXY_PORT}"
EGRESS_NETWORK = "corral-egress"
SESSION_NETWORK_PREFIX = "corral-s-"
BRIDGE_PREFIX = "crl"
BRIDGE_NAME_OPTION = "com.docker.network.bridge.name"
KIND_SESSION_NETWORK = "egress-net"
KIND_EGRESS_NETWORK = "egress-shared"
KIND_PROXY = "proxy"

SESSION_ID_LENGTH = 10
SESSION_ID_RE = re.compile(r"^[a-z0-9]{1,12}$")  # crl + 12 = 15, the kernel's IFNAMSIZ-1
RESOLVE_TIMEOUT = 10.0
MAX_ADDRS_PER_HOST = 8
CONTROL_DEADLINE = 10.0


def new_session_id() -> str:
    """A fresh id for `SessionEgress`: 10 lower-case hex characters."""
    return secrets.token_hex(SESSION_ID_LENGTH // 2)


def session_network_name(session_id: str) -> str:
    return f"{SESSION_NETWORK_PREFIX}{session_id}"


def bridge_name(session_id: str) -> str:
    return f"{BRIDGE_PREFIX}{session_id}"


def _resolve_sync(host: str) -> list[str]:
    infos = socket.getaddrinfo(host, 443, family=socket.AF_INET, type=socket.SOCK_STREAM)
    seen: list[str] = []
    for info in infos:
        addr = str(info[4][0])
        if addr not in seen:
            seen.append(addr)
    return seen


async def resolve_pins(
    hosts: Iterable[str],
    override: Mapping[str, str] | None = None,
    *,
    resolver: Callable[[str], list[str]] = _resolve_sync,
    resolve_seconds: float = RESOLVE_TIMEOUT,
) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    """Resolve each host once (IPv4; in worker threads, concurrently): (pins, left_out),
    left_out mapping each host that got no pin to why.

    An override {host: ip} is used as is (a name you map yourself, for tests and local
    development): only the names listed there may point at private addresses. Every
    other name, and an IP literal in the allowlist, is pinned only to public addresses
    (`sandboxes.hostnames.usable_address`); a name with no answer in time, or only
    non-public ones, is left out, with the reason.
    """
    wanted = list(dict.fromkeys(normalise_host(h) for h in hosts))
    overrides = {
        normalise_host(k): str(ipaddress.ip_address(v)) for k, v in (override or {}).items()
    }
    results: dict[str, list[str]] = {}
    left_out: dict[str, str] = {}

    async def one(host: str) -> None:
        if host in overrides:
            results[host] = [overrides[host]]
            return
        if is_ip_literal(host):
            candidates = [host]
        else:
            candidates = []
            with anyio.move_on_after(resolve_seconds) as scope:
                try:
                    candidates = await anyio.to_thread.run_sync(
                        resolver, host, abandon_on_cancel=True
                    )
                except OSError:
                    left_out[host] = "the name does not resolve"
                    return
            if scope.cancelled_caught:
                left_out[host] = f"no DNS answer within {resolve_seconds:g} s"
                return
        addresses = list(dict.fromkeys(str(ipaddress.ip_address(c)) for c in candidates))
        usable = [a for a in addresses if usable_address(a)]
        if not usable:
            refused = ", ".join(f"{a} ({address_class(a)})" for a in addresses[:3])
            left_out[host] = (
                f"it resolves only to non-public addresses: {refused}; list it in "
                "[container.kiosk] resolve_overrides to allow that"
                if addresses
                else "the name does not resolve"
            )
            return
        results[host] = usable[:MAX_ADDRS_PER_HOST]

    async with anyio.create_task_group() as tg:
        for host in wanted:
            tg.start_soon(one, host)
    pins = {h: tuple(results[h]) for h in wanted if results.get(h)}
    return pins, {h: left_out[h] for h in wanted if h in left_out}


# ---------------------------------------------------------------- engine helpers


def _named_networks(client: docker.DockerClient, name: str) -> list[dict[str, Any]]:
    """Networks named exactly `name` (the engine's name filter matches substrings)."""
    found = client.api.networks(names=[name])
    return [n for n in found if n.get("Name") == name]


def _ensure_egress_network_sync(client: docker.DockerClient) -> str:
    existing = _named_networks(client, EGRESS_NETWORK)
    if not existing:
        try:
            client.api.create_network(
                EGRESS_NETWORK,
                driver="bridge",
                check_duplicate=True,
                labels={LABEL_MANAGED: "true", LABEL_KIND: KIND_EGRESS_NETWORK},
            )
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: another process created it meanwhile
                raise
        existing = _named_networks(client, EGRESS_NETWORK)
    if not existing:
        raise EgressError(f"the network {EGRESS_NETWORK} could not be created")
    existing.sort(key=lambda n: str(n.get("Created", "")))
    return str(existing[0]["Id"])


async def ensure_egress_network(backend: DockerBackend) -> str:
    """Create the shared `corral-egress` bridge network if absent; return its id.

    It is shared by every session (and every corral process) and never removed by one."""
    network_id: str = await backend.call(_ensure_egress_network_sync, backend.client)
    return network_id


def _remove_network_sync(client: docker.DockerClient, network_id: str) -> None:
    """Remove a network; containers still attached (a kiosk left behind) are
    disconnected first, so the network never outlives its session."""
    try:
        client.api.remove_network(network_id)
        return
    except docker.errors.NotFound:
        return
    except docker.errors.APIError as exc:
        if exc.status_code != 403:  # 403: it has active endpoints
            raise
    with contextlib.suppress(docker.errors.NotFound):
        info = client.api.inspect_network(network_id)
        for container_id in info.get("Containers") or {}:
            with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                client.api.disconnect_container_from_network(container_id, network_id, force=True)
        client.api.remove_network(network_id)


def _logs_tail(client: docker.DockerClient, container_id: str) -> bytes:
    out: Any = client.api.logs(container_id, stream=False, tail=20)
    return out if isinstance(out, bytes) else b"".join(out)


def _probe_tcp(addr: str, port: int) -> bool:
    try:
        with socket.create_connection((addr, port), timeout=1.0):
            return True
    except OSError:
        return False


# ---------------------------------------------------------------- the session's network


class SessionNetwork:
    """A session's internal network with its INPUT drop rule (`make_session_network`).
    Made by `SessionEgress` itself, or ahead by the kiosk warm pool
    (`orchestrator.pools.kiosks`), which hands it to `SessionEgress(network=...)` at the
    claim; whoever made it removes it (`remove`: the network, then the rule)."""

    def __init__(self, backend: DockerBackend, session_id: str) -> None:
        self._backend = backend
        self.session_id = session_id
        self.bridge = bridge_name(session_id)
        self.name = session_network_name(session_id)
        self.network_id: str | None = None
        self.subnet: str | None = None
        self.gateway: str | None = None
        self._rule_attempted = False

    async def create(self, labels: Mapping[str, str]) -> None:
        """The network (internal, its bridge named), then the rule, before any container
        is attached; a half-made one is removed again."""
        backend = self._backend
        client = backend.client
        try:
            created = await backend.call(
                partial(
                    client.api.create_network,
                    self.name,
                    driver="bridge",
                    internal=True,
                    check_duplicate=True,
                    options={BRIDGE_NAME_OPTION: self.bridge},
                    labels={**labels, LABEL_KIND: KIND_SESSION_NETWORK},
                ),
            )
            self.network_id = str(created["Id"])
            info = await backend.call(client.api.inspect_network, self.network_id)
            ipam = (info.get("IPAM") or {}).get("Config") or [{}]
            self.subnet = ipam[0].get("Subnet")
            self.gateway = ipam[0].get("Gateway")
            if not self.subnet:
                raise EgressError(f"the network {self.name} has no IPv4 subnet")
            self._rule_attempted = True
            await add_input_drop(self.bridge)
        except BaseException:
            await self.remove(raise_errors=False)
            raise

    async def disconnect(self, container_id: str) -> None:
        """Take a container off this network (it keeps only loopback if it had no other)."""
        backend = self._backend
        assert self.network_id is not None
        await backend.call(
            partial(
                backend.client.api.disconnect_container_from_network,
                container_id,
                self.network_id,
                force=True,
            )
        )

    async def remove(self, *, raise_errors: bool = True) -> None:
        """Remove the network (containers still attached are disconnected first) and the
        rule; both are tried, shielded, idempotent."""
        problems = await self._remove()
        if problems:
            message = f"session {self.session_id} network cleanup: " + "; ".join(problems)
            logger.warning("%s", message)
            if raise_errors:
                raise EngineError(message)

    async def _remove(self) -> list[str]:
        problems: list[str] = []
        backend = self._backend
        with anyio.CancelScope(shield=True):
            if self.network_id is not None:
                try:
                    await backend.call(_remove_network_sync, backend.client, self.network_id)
                    self.network_id = None
                except Exception as exc:
                    problems.append(f"network {self.name}: {exc}")
            if self._rule_attempted:
                try:
                    await remove_input_drop(self.bridge)
                    self._rule_attempted = False
                except Exception as exc:
                    problems.append(f"firewall: {exc}")
        return problems


# ---------------------------------------------------------------- the session's egress


class SessionEgress:
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
        self._backend = backend
        self.session_id = session_id
        self.agent = agent
        self._allowed = list(allowed_hosts)
        self._override = dict(resolve_override or {})
        self.image = image
        self._ready_timeout = ready_timeout
        self.bridge = bridge_name(session_id)
        self.pins: dict[str, tuple[str, ...]] = {}
        self.left_out: dict[str, str] = {}
        self.network_name: str | None = None
        self.network_id: str | None = None
        self.subnet: str | None = None
        self.gateway: str | None = None
        self.proxy_url: str | None = None
        self.proxy_container_id: str | None = None
        self.proxy_egress_ip: str | None = None
        self._proxy: DockerAttached | None = None
        self._control: KioskChannel | None = None
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

    async def __aenter__(self) -> SessionEgress:
        try:
            await self._enter()
        except BaseException:
            await self._cleanup(raise_errors=False)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._cleanup(raise_errors=exc is None)

    async def _enter(self) -> None:
        self.pins, self.left_out = await resolve_pins(self._allowed, self._override)
        if not self.pins:
            return  # no allowlist (or nothing resolved): the kiosk gets network_mode none
        backend = self._backend
        client = backend.client
        owner_labels = backend.owner.labels(
            kind=KIND_PROXY, agent=self.agent, session=self.session_id
        )
        await ensure_egress_network(backend)

        if self._network is None:
            # The rule goes in before any container is attached to the network.
            self._network = SessionNetwork(backend, self.session_id)
            await self._network.create(owner_labels)
        network = self._network
        assert network.network_id is not None and network.subnet is not None
        self.network_id, self.network_name = network.network_id, network.name
        self.subnet, self.gateway = network.subnet, network.gateway

        spec = proxy_spec(
            image=self.image,
            name=f"corral-proxy-{self.session_id}",
            labels=owner_labels,
            network=EGRESS_NETWORK,
            pins=self.pins,
            allow_from=self.subnet,
        )
        network_id = self.network_id

        def join_session_network(container_id: str) -> None:
            self.proxy_container_id = container_id
            client.api.connect_container_to_network(container_id, network_id, aliases=[PROXY_ALIAS])

        # Attached to stdin and stdout only (its decision log on stderr goes to the log
        # driver): the control channel that narrows its pins.
        proxy = await backend.open_attached(spec, before_start=join_session_network, stderr=False)
        self._proxy = proxy
        self.proxy_container_id = proxy.id
        self._control = KioskChannel(proxy, name="egress proxy")
        await self._wait_ready()
        self.proxy_url = PROXY_URL

    async def restrict(self, hosts: Sequence[str]) -> None:
        """Keep only `hosts` of the pinned ones: the proxy drops every other host's pins and
        closes its open tunnels. Never adds a host (one not pinned at start stays out)."""
        if self._control is None:
            self.pins = {h: a for h, a in self.pins.items() if h in hosts}
            return
        answer = await self._control.request("restrict", CONTROL_DEADLINE, hosts=list(hosts))
        kept = {str(h) for h in answer.get("hosts", [])}
        self.pins = {h: a for h, a in self.pins.items() if h in kept}

    async def _wait_ready(self) -> None:
        """Poll until the proxy accepts TCP connections on its `corral-egress` address."""
        backend = self._backend
        container_id = self.proxy_container_id
        assert container_id is not None
        deadline = time.monotonic() + self._ready_timeout
        while True:
            info = await backend.call(backend.client.api.inspect_container, container_id)
            state = info.get("State") or {}
            if state.get("Status") in ("exited", "dead"):
                logs = await backend.call(_logs_tail, backend.client, container_id)
                raise EgressError(
                    f"the egress proxy exited with code {state.get('ExitCode')}: "
                    f"{logs.decode(errors='replace').strip()}"
                )
            networks = (info.get("NetworkSettings") or {}).get("Networks") or {}
            addr = (networks.get(EGRESS_NETWORK) or {}).get("IPAddress")
            if addr and await anyio.to_thread.run_sync(_probe_tcp, addr, PROXY_PORT):
                self.proxy_egress_ip = addr
                return
            if time.monotonic() > deadline:
                raise EgressError(
                    f"the egress proxy did not accept connections within {self._ready_timeout} s"
                )
            await anyio.sleep(0.05)

    async def _cleanup(self, *, raise_errors: bool) -> None:
        """Remove the proxy, the network and the rule; every step is tried."""
        problems: list[str] = []
        backend = self._backend
        with anyio.CancelScope(shield=True):
            if self._proxy is not None:
                try:
                    await self._proxy.close()  # closes the control channel, removes it
                    self._proxy = None
                    self._control = None
                    self.proxy_container_id = None
                except Exception as exc:
                    problems.append(f"proxy container: {exc}")
            if self.proxy_container_id is not None:  # created, then its start failed
                try:
                    await backend.remove(self.proxy_container_id)
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
