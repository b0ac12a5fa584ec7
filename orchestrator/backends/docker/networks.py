"""Docker networks for egress (SPEC S2.6): the shared `corral-egress` bridge and a
session's internal network with its INPUT drop rule (`SessionNetwork`, the
`sandboxes.ports.PreparedNetwork` the kiosk warm pool makes ahead). Names, labels and
the id format that `network_reaper` reads back live here too.

Every SDK call runs through `orchestrator.backends.docker.sdk` (a worker thread, errors
mapped by `map_docker_errors`); the firewall rule is `firewall`'s.
"""

from __future__ import annotations

import contextlib
import logging
import re
import secrets
from collections.abc import Mapping
from functools import partial
from typing import Any

import anyio
import docker

from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.backends.docker.firewall import add_input_drop, remove_input_drop
from orchestrator.backends.docker.proxy import (
    EGRESS_NETWORK,
    PROXY_ALIAS,
    RunningProxy,
    start_proxy,
)
from orchestrator.backends.docker.sdk import blocking, map_docker_errors
from orchestrator.backends.owner import LABEL_KIND, LABEL_MANAGED
from orchestrator.errors import EgressError, EngineConflict, EngineError, EngineNotFound
from sandboxes.isolation import PROXY_PORT

logger = logging.getLogger("corral.egress")

PROXY_URL = f"http://{PROXY_ALIAS}:{PROXY_PORT}"
SESSION_NETWORK_PREFIX = "corral-s-"
BRIDGE_PREFIX = "crl"
BRIDGE_NAME_OPTION = "com.docker.network.bridge.name"
KIND_SESSION_NETWORK = "egress-net"
KIND_EGRESS_NETWORK = "egress-shared"
KIND_PROXY = "proxy"

SESSION_ID_LENGTH = 10
SESSION_ID_RE = re.compile(r"^[a-z0-9]{1,12}$")  # crl + 12 = 15, the kernel's IFNAMSIZ-1


def new_session_id() -> str:
    """A fresh id for `SessionEgress`: 10 lower-case hex characters."""
    return secrets.token_hex(SESSION_ID_LENGTH // 2)


def session_network_name(session_id: str) -> str:
    return f"{SESSION_NETWORK_PREFIX}{session_id}"


def bridge_name(session_id: str) -> str:
    return f"{BRIDGE_PREFIX}{session_id}"


def _named_networks(client: docker.DockerClient, name: str) -> list[dict[str, Any]]:
    """Networks named exactly `name` (the engine's name filter matches substrings)."""
    found = client.api.networks(names=[name])
    return [n for n in found if n.get("Name") == name]


def _ensure_egress_network_sync(client: docker.DockerClient, url: str | None = None) -> str:
    """(Blocking.) `url` names the engine in errors; the client's own when not given."""
    url = url or str(client.api.base_url)
    with map_docker_errors(url):
        existing = _named_networks(client, EGRESS_NETWORK)
    if not existing:
        # A conflict: another process created it meanwhile.
        with contextlib.suppress(EngineConflict), map_docker_errors(url):
            client.api.create_network(
                EGRESS_NETWORK,
                driver="bridge",
                check_duplicate=True,
                labels={LABEL_MANAGED: "true", LABEL_KIND: KIND_EGRESS_NETWORK},
            )
        with map_docker_errors(url):
            existing = _named_networks(client, EGRESS_NETWORK)
    if not existing:
        raise EgressError(f"the network {EGRESS_NETWORK} could not be created")
    existing.sort(key=lambda n: str(n.get("Created", "")))
    return str(existing[0]["Id"])


async def ensure_egress_network(backend: DockerBackend) -> str:
    """Create the shared `corral-egress` bridge network if absent; return its id.

    It is shared by every session (and every corral process) and never removed by one."""
    return await anyio.to_thread.run_sync(_ensure_egress_network_sync, backend.client, backend.url)


def _remove_network_sync(client: docker.DockerClient, url: str, network_id: str) -> None:
    """Remove a network; containers still attached (a kiosk left behind) are
    disconnected first, so the network never outlives its session. (Blocking.)"""
    try:
        with map_docker_errors(url):
            client.api.remove_network(network_id)
        return
    except EngineNotFound:
        return
    except EngineConflict:  # it has active endpoints
        pass
    with contextlib.suppress(EngineNotFound), map_docker_errors(url):
        info = client.api.inspect_network(network_id)
        for container_id in info.get("Containers") or {}:
            with contextlib.suppress(EngineError), map_docker_errors(url):
                client.api.disconnect_container_from_network(container_id, network_id, force=True)
        client.api.remove_network(network_id)


class SessionNetwork:
    """A session's internal network with its INPUT drop rule: `sandboxes.ports.PreparedNetwork`.
    Made by `SessionEgress` itself, or ahead by a warm pool (`orchestrator.pools`), which
    hands it to `SessionEgress(network=...)` at the claim; whoever made it removes it
    (`remove`: an armed proxy it still holds, the network, then the rule). A pool's
    network may hold an armed proxy made with it (`arm`): the claim's egress takes it
    over (`take_proxy`) and pins it."""

    def __init__(self, backend: DockerBackend, session_id: str) -> None:
        self._backend = backend
        self.session_id = session_id
        self.bridge = bridge_name(session_id)
        self.name = session_network_name(session_id)
        self.network_id: str | None = None
        self.subnet: str | None = None
        self.gateway: str | None = None
        self._rule_attempted = False
        self._proxy: RunningProxy | None = None

    async def arm(self, image: str, labels: Mapping[str, str], ready_timeout: float) -> None:
        """Start this network's proxy ahead, armed: no pins, so it refuses everything until
        its session's claim pins it (orchestrator/backends/docker/proxy.py)."""
        assert self.network_id is not None and self.subnet is not None
        await ensure_egress_network(self._backend)
        self._proxy = await start_proxy(
            self._backend,
            image=image,
            name=f"corral-proxy-{self.session_id}",
            labels=labels,
            session_network_id=self.network_id,
            subnet=self.subnet,
            pins=None,
            ready_timeout=ready_timeout,
        )

    def take_proxy(self) -> RunningProxy | None:
        """The armed proxy, now the caller's to remove (None if there is none)."""
        proxy, self._proxy = self._proxy, None
        return proxy

    @property
    def proxy_url(self) -> str:
        """The session's proxy, once it joins under its alias (`SessionEgress`)."""
        return PROXY_URL

    async def create(self, labels: Mapping[str, str]) -> None:
        """The network (internal, its bridge named), then the rule, before any container
        is attached; a half-made one is removed again."""
        backend = self._backend
        client = backend.client
        try:
            created = await blocking(
                backend.url,
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
            info = await blocking(backend.url, partial(client.api.inspect_network, self.network_id))
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
        await blocking(
            backend.url,
            partial(
                backend.client.api.disconnect_container_from_network,
                container_id,
                self.network_id,
                force=True,
            ),
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
            proxy = self.take_proxy()
            if proxy is not None:
                try:
                    await proxy.close()
                except Exception as exc:
                    problems.append(f"proxy container: {exc}")
            if self.network_id is not None:
                try:
                    await anyio.to_thread.run_sync(
                        _remove_network_sync, backend.client, backend.url, self.network_id
                    )
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
