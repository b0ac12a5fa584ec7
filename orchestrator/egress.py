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
`map_docker_errors`; the firewall tools run with `anyio.run_process`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import re
import secrets
import shutil
import socket
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import anyio
import docker
import docker.errors

from orchestrator.docker_backend import DockerBackend, map_docker_errors
from orchestrator.errors import CorralError, EngineError
from orchestrator.owner import (
    LABEL_KIND,
    LABEL_MANAGED,
    owner_is_alive,
    read_boot_id,
    read_start_time,
)

logger = logging.getLogger("corral.egress")

PROXY_IMAGE = "corral-proxy:latest"
PROXY_PORT = 3128
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
_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
HOST_NAME_RE = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$")
RULE_RE = re.compile(r"^-A INPUT -i (crl[a-z0-9]{1,12}) -m conntrack --ctstate NEW -j DROP$")

PROXY_MEMORY = 128 * 1024**2
PROXY_PIDS = 64
PROXY_NANO_CPUS = 1_000_000_000

T = TypeVar("T")


class EgressError(CorralError):
    """The session's egress could not be set up or torn down."""


def new_session_id() -> str:
    """A fresh id for `SessionEgress`: 10 lower-case hex characters."""
    return secrets.token_hex(SESSION_ID_LENGTH // 2)


def session_network_name(session_id: str) -> str:
    return f"{SESSION_NETWORK_PREFIX}{session_id}"


def bridge_name(session_id: str) -> str:
    return f"{BRIDGE_PREFIX}{session_id}"


def input_drop_rule(bridge: str) -> list[str]:
    """The rule (without the action flag) that drops new connections from `bridge` to the host."""
    return ["INPUT", "-i", bridge, "-m", "conntrack", "--ctstate", "NEW", "-j", "DROP"]


def normalise_host(raw: str) -> str:
    """An allowlist entry in canonical form: a lower-case DNS name without a trailing dot,
    or an IP literal. The proxy applies the same rules to what clients ask for."""
    host = raw.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        return str(ipaddress.IPv6Address(host[1:-1]))
    with contextlib.suppress(ValueError):
        return str(ipaddress.ip_address(host))
    if len(host) > 253 or not HOST_NAME_RE.match(host):
        raise ValueError(f"not a host name: {raw!r}")
    if host.rsplit(".", 1)[-1].isdigit():  # "010.1.2.3": inet_aton would read it as 8.1.2.3
        raise ValueError(f"not a host name nor an IP address: {raw!r}")
    return host


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def usable_address(addr: str, *, allow_private: bool) -> bool:
    """Whether a resolved address may be pinned. Loopback, private, link-local and other
    non-global addresses would turn an allowlisted name with hostile DNS into a way into
    this host or its network, so they need `allow_private` (or an explicit override)."""
    ip = ipaddress.ip_address(addr)
    if ip.is_unspecified or ip.is_multicast:
        return False
    return allow_private or ip.is_global


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
    allow_private: bool = False,
    resolver: Callable[[str], list[str]] = _resolve_sync,
    resolve_seconds: float = RESOLVE_TIMEOUT,
) -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]]:
    """Resolve each host once (IPv4; in worker threads, concurrently): (pins, unresolved).

    An override {host: ip} is used as is (a name you map yourself, for tests and local
    development). An IP literal pins itself. A name that does not resolve in time, or
    only to addresses `usable_address` refuses, is left out and listed as unresolved.
    """
    wanted = list(dict.fromkeys(normalise_host(h) for h in hosts))
    overrides = {
        normalise_host(k): str(ipaddress.ip_address(v)) for k, v in (override or {}).items()
    }
    results: dict[str, list[str]] = {}

    async def one(host: str) -> None:
        if host in overrides:
            results[host] = [overrides[host]]
            return
        if _is_ip_literal(host):
            candidates = [host]
        else:
            candidates = []
            with anyio.move_on_after(resolve_seconds):
                try:
                    candidates = await anyio.to_thread.run_sync(
                        resolver, host, abandon_on_cancel=True
                    )
                except OSError:
                    candidates = []
        usable = [
            a
            for a in dict.fromkeys(str(ipaddress.ip_address(c)) for c in candidates)
            if usable_address(a, allow_private=allow_private)
        ]
        results[host] = usable[:MAX_ADDRS_PER_HOST]

    async with anyio.create_task_group() as tg:
        for host in wanted:
            tg.start_soon(one, host)
    pins = {h: tuple(results[h]) for h in wanted if results.get(h)}
    unresolved = tuple(h for h in wanted if not results.get(h))
    return pins, unresolved


# ---------------------------------------------------------------- firewall (iptables)


def firewall_tools() -> list[str]:
    return [tool for tool in ("iptables", "ip6tables") if shutil.which(tool) is not None]


def _ipv6_enabled() -> bool:
    try:
        return Path("/proc/sys/net/ipv6/conf/all/disable_ipv6").read_text().strip() == "0"
    except OSError:
        return False


async def _run_tool(tool: str, *args: str) -> tuple[int, str]:
    proc = await anyio.run_process([tool, "-w", *args], check=False)
    return proc.returncode, (proc.stderr or b"").decode(errors="replace").strip()


async def add_input_drop(bridge: str) -> None:
    """Insert the INPUT drop rule for `bridge` with iptables, and ip6tables if present.

    Fails when iptables is missing or refuses; an ip6tables failure is tolerated only
    when IPv6 is disabled on this host (then there is nothing to filter)."""
    tools = firewall_tools()
    if "iptables" not in tools:
        raise EgressError(
            "iptables is not installed: a kiosk session's network cannot be closed "
            "to this host (apt-get install iptables)"
        )
    for tool in tools:
        code, err = await _run_tool(tool, "-I", *input_drop_rule(bridge))
        if code != 0:
            if tool == "ip6tables" and not _ipv6_enabled():
                continue
            raise EgressError(f"{tool} could not add the INPUT rule for {bridge}: {err}")


async def remove_input_drop(bridge: str) -> int:
    """Delete every copy of the INPUT drop rule for `bridge` (idempotent); return how
    many rules were deleted."""
    problems = []
    deleted = 0
    for tool in firewall_tools():
        for _ in range(16):
            code, _err = await _run_tool(tool, "-C", *input_drop_rule(bridge))
            if code != 0:
                break  # no (more) such rule
            code, err = await _run_tool(tool, "-D", *input_drop_rule(bridge))
            if code != 0:
                problems.append(f"{tool}: {err}")
                break
            deleted += 1
    if problems:
        raise EgressError(f"could not remove the INPUT rule for {bridge}: {'; '.join(problems)}")
    return deleted


async def input_drop_bridges() -> set[str]:
    """Bridges that have a corral INPUT drop rule, in any of the firewall tools."""
    found: set[str] = set()
    for tool in firewall_tools():
        proc = await anyio.run_process([tool, "-w", "-S", "INPUT"], check=False)
        if proc.returncode != 0:
            continue
        for line in proc.stdout.decode(errors="replace").splitlines():
            match = RULE_RE.match(line.strip())
            if match:
                found.add(match.group(1))
    return found


# ---------------------------------------------------------------- engine helpers


async def _engine(backend: DockerBackend, func: Callable[[], T], image: str | None = None) -> T:
    def run() -> T:
        with map_docker_errors(backend.url, image):
            return func()

    return await anyio.to_thread.run_sync(run)


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
    return await _engine(backend, lambda: _ensure_egress_network_sync(backend.client))


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


def _remove_container_sync(client: docker.DockerClient, container_id: str) -> None:
    with contextlib.suppress(docker.errors.NotFound):
        client.api.remove_container(container_id, force=True, v=True)
    with contextlib.suppress(docker.errors.NotFound):
        client.api.wait(container_id, condition="removed", timeout=30)


def _logs_tail(client: docker.DockerClient, container_id: str) -> bytes:
    out: Any = client.api.logs(container_id, stream=False, tail=20)
    return out if isinstance(out, bytes) else b"".join(out)


def _probe_tcp(addr: str, port: int) -> bool:
    try:
        with socket.create_connection((addr, port), timeout=1.0):
            return True
    except OSError:
        return False


# ---------------------------------------------------------------- the session's egress


@dataclass(frozen=True, slots=True)
class ProxySpec:
    """Keyword arguments for the SDK's `containers.create` of one session's proxy (pure)."""

    image: str
    name: str
    pins: Mapping[str, tuple[str, ...]]
    allow_from: str
    labels: Mapping[str, str]

    def create_kwargs(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "name": self.name,
            "labels": dict(self.labels),
            "environment": {
                "CORRAL_PINS": json.dumps({h: list(a) for h, a in self.pins.items()}),
                "CORRAL_ALLOW_FROM": self.allow_from,
            },
            "user": "1000:1000",
            "read_only": True,
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "pids_limit": PROXY_PIDS,
            "mem_limit": PROXY_MEMORY,
            "memswap_limit": PROXY_MEMORY,
            "nano_cpus": PROXY_NANO_CPUS,
            "network": EGRESS_NETWORK,
            # The decision log (host, port, decision; never payloads), bounded.
            "log_config": {"type": "json-file", "config": {"max-size": "1m", "max-file": "2"}},
            "detach": True,
        }


class SessionEgress:
    """One kiosk session's way out: `async with SessionEgress(...) as egress:`.

    Attributes after enter: `network_name` (None when the allowlist is empty or nothing
    resolved), `proxy_url` (`http://proxy:3128`, or None), `pins` ({host: (ip, ...)}),
    `unresolved` (allowlisted hosts left out), `bridge`, `subnet`, `gateway`,
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
        allow_private: bool = False,
        image: str = PROXY_IMAGE,
        ready_timeout: float = 30.0,
    ) -> None:
        if not SESSION_ID_RE.match(session_id):
            raise ValueError(f"session id must be 1-12 of [a-z0-9], got {session_id!r}")
        self._backend = backend
        self.session_id = session_id
        self.agent = agent
        self._allowed = list(allowed_hosts)
        self._override = dict(resolve_override or {})
        self._allow_private = allow_private
        self.image = image
        self._ready_timeout = ready_timeout
        self.bridge = bridge_name(session_id)
        self.pins: dict[str, tuple[str, ...]] = {}
        self.unresolved: tuple[str, ...] = ()
        self.network_name: str | None = None
        self.network_id: str | None = None
        self.subnet: str | None = None
        self.gateway: str | None = None
        self.proxy_url: str | None = None
        self.proxy_container_id: str | None = None
        self.proxy_egress_ip: str | None = None
        self._rule_attempted = False

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
        self.pins, self.unresolved = await resolve_pins(
            self._allowed, self._override, allow_private=self._allow_private
        )
        if not self.pins:
            return  # no allowlist (or nothing resolved): the kiosk gets network_mode none
        backend = self._backend
        client = backend.client
        owner_labels = backend.owner.labels(
            kind=KIND_PROXY, agent=self.agent, session=self.session_id
        )
        await ensure_egress_network(backend)

        name = session_network_name(self.session_id)
        net_labels = {**owner_labels, LABEL_KIND: KIND_SESSION_NETWORK}
        created = await _engine(
            backend,
            partial(
                client.api.create_network,
                name,
                driver="bridge",
                internal=True,
                check_duplicate=True,
                options={BRIDGE_NAME_OPTION: self.bridge},
                labels=net_labels,
            ),
        )
        self.network_id = str(created["Id"])
        self.network_name = name
        info = await _engine(backend, partial(client.api.inspect_network, self.network_id))
        ipam = (info.get("IPAM") or {}).get("Config") or [{}]
        self.subnet = ipam[0].get("Subnet")
        self.gateway = ipam[0].get("Gateway")
        if not self.subnet:
            raise EgressError(f"the network {name} has no IPv4 subnet")

        # The rule goes in before any container is attached to the network.
        self._rule_attempted = True
        await add_input_drop(self.bridge)

        await anyio.to_thread.run_sync(backend._watchdog.ensure_started)
        spec = ProxySpec(
            image=self.image,
            name=f"corral-proxy-{self.session_id}",
            pins=self.pins,
            allow_from=self.subnet,
            labels=owner_labels,
        )
        container = await _engine(
            backend, partial(client.containers.create, **spec.create_kwargs()), image=self.image
        )
        self.proxy_container_id = str(container.id)
        await _engine(
            backend,
            partial(
                client.api.connect_container_to_network,
                self.proxy_container_id,
                self.network_id,
                aliases=[PROXY_ALIAS],
            ),
        )
        await _engine(backend, container.start)
        await self._wait_ready()
        self.proxy_url = PROXY_URL

    async def _wait_ready(self) -> None:
        """Poll until the proxy accepts TCP connections on its `corral-egress` address."""
        backend = self._backend
        container_id = self.proxy_container_id
        assert container_id is not None
        deadline = time.monotonic() + self._ready_timeout
        while True:
            info = await _engine(
                backend, partial(backend.client.api.inspect_container, container_id)
            )
            state = info.get("State") or {}
            if state.get("Status") in ("exited", "dead"):
                logs = await _engine(backend, partial(_logs_tail, backend.client, container_id))
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
            if self.proxy_container_id is not None:
                try:
                    await _engine(
                        backend,
                        partial(_remove_container_sync, backend.client, self.proxy_container_id),
                    )
                    self.proxy_container_id = None
                except Exception as exc:
                    problems.append(f"proxy container: {exc}")
            if self.network_id is not None:
                try:
                    await _engine(
                        backend, partial(_remove_network_sync, backend.client, self.network_id)
                    )
                    self.network_id = None
                except Exception as exc:
                    problems.append(f"network {self.network_name}: {exc}")
            if self._rule_attempted:
                try:
                    await remove_input_drop(self.bridge)
                    self._rule_attempted = False
                except Exception as exc:
                    problems.append(f"firewall: {exc}")
        self.proxy_url = None
        if problems:
            message = f"session {self.session_id} egress cleanup: " + "; ".join(problems)
            logger.warning("%s", message)
            if raise_errors:
                raise EngineError(message)


# ---------------------------------------------------------------- reaping orphans


def network_is_orphan(
    labels: Mapping[str, str],
    *,
    attached: int,
    age_seconds: float,
    host: str,
    boot_id: str,
    start_time_of: Callable[[int], int | None],
    stale_after: float | None,
) -> bool:
    """Whether a session network may be removed (pure).

    Never while a container is attached. Yes when its owner process is gone; also when
    its owner lives but it has had no container for longer than `stale_after` seconds
    (a live session always has its proxy attached). A network of another host: never.
    """
    if attached:
        return False
    alive = owner_is_alive(labels, host=host, boot_id=boot_id, start_time_of=start_time_of)
    if alive is None:
        return False
    if alive is False:
        return True
    return stale_after is not None and age_seconds > stale_after


def _age_seconds(created: str, now: float) -> float:
    """Seconds since a Docker `Created` timestamp (RFC 3339 with nanoseconds)."""
    from datetime import datetime

    match = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", created)
    if not match:
        return 0.0
    zone = "+00:00" if match.group(3) == "Z" else match.group(3)
    stamp = datetime.fromisoformat(match.group(1) + zone).timestamp()
    return now - stamp


@dataclass(frozen=True, slots=True)
class ReapedNetworks:
    networks: tuple[str, ...]  # session networks removed
    rules: tuple[str, ...]  # bridges whose orphaned INPUT rules were removed


async def reap_networks(
    backend: DockerBackend,
    *,
    stale_after: float | None = 600.0,
    label_filters: Mapping[str, str] | None = None,
    sweep_rules: bool | Collection[str] = True,
) -> ReapedNetworks:
    """Remove orphaned `corral-s-*` networks (see `network_is_orphan`) with their INPUT
    rules, then INPUT rules of `crl*` bridges that no network has any more.

    `label_filters` narrows the networks considered (all corral session networks by
    default); `sweep_rules` is True (every orphaned corral rule), False, or the bridge
    names whose orphaned rules may be removed.

    Run it after the container reaper (a network with a container attached is kept).
    The rule snapshot is taken before the network listing: a rule is only ever added
    for a network that already exists, so a live session's rule is never taken for an
    orphan."""
    client = backend.client
    host, boot_id = socket.gethostname(), read_boot_id()
    rule_bridges = await input_drop_bridges()
    if sweep_rules is False:
        rule_bridges = set()
    elif sweep_rules is not True:
        rule_bridges &= set(sweep_rules)
    wanted = dict(label_filters or {})

    def list_networks() -> list[dict[str, Any]]:
        return list(client.api.networks())

    networks = await _engine(backend, list_networks)
    removed: list[str] = []
    now = time.time()
    live_bridges: set[str] = set()
    for summary in networks:
        name = str(summary.get("Name", ""))
        labels = summary.get("Labels") or {}
        bridge = (summary.get("Options") or {}).get(BRIDGE_NAME_OPTION)
        is_session = (
            name.startswith(SESSION_NETWORK_PREFIX)
            and labels.get(LABEL_MANAGED) == "true"
            and labels.get(LABEL_KIND) == KIND_SESSION_NETWORK
        )
        if not is_session or any(labels.get(k) != v for k, v in wanted.items()):
            if bridge:
                live_bridges.add(str(bridge))
            continue
        try:
            info = await _engine(backend, partial(client.api.inspect_network, summary["Id"]))
        except EngineError:
            continue
        if not network_is_orphan(
            labels,
            attached=len(info.get("Containers") or {}),
            age_seconds=_age_seconds(str(info.get("Created", "")), now),
            host=host,
            boot_id=boot_id,
            start_time_of=read_start_time,
            stale_after=stale_after,
        ):
            if bridge:
                live_bridges.add(str(bridge))
            continue

        def remove(network_id: str = str(summary["Id"])) -> None:
            with contextlib.suppress(docker.errors.NotFound):
                client.api.remove_network(network_id)

        try:
            await _engine(backend, remove)
        except EngineError as exc:  # e.g. a container got attached meanwhile
            logger.warning("could not remove orphaned network %s: %s", name, exc)
            if bridge:
                live_bridges.add(str(bridge))
            continue
        removed.append(name)
        if bridge and sweep_rules is not False:
            rule_bridges.add(str(bridge))  # removed below even if it was not in the snapshot
    rules_removed = []
    for bridge in sorted(rule_bridges - live_bridges):
        try:
            deleted = await remove_input_drop(bridge)
        except EgressError as exc:
            logger.warning("%s", exc)
            continue
        if deleted:
            rules_removed.append(bridge)
    return ReapedNetworks(networks=tuple(removed), rules=tuple(rules_removed))
