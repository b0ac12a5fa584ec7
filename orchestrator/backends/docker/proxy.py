"""One session's egress proxy container (`corral-proxy`, rig_images/proxy): started on the
shared `corral-egress` network, joined to the session network under the alias `proxy`,
attached to its stdin and stdout (the control channel that pins and narrows it), and
ready once it accepts TCP connections.

Started two ways: with the session's pins in its environment (`SessionEgress` at a cold
start), or *armed* (`pins=None`): no pins, so it refuses every request, until one `pin`
control op sets them, once. A warm pool makes the armed proxy with its network ahead of
any session (`SessionNetwork.arm`); the claim resolves the allowlist and pins it
(`SessionEgress` takes the proxy over), so a warm start with an allowlist costs one
control round trip instead of a container start.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
import docker

from orchestrator.backends.channel import KioskChannel
from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.backends.docker.containers import DockerAttached
from orchestrator.backends.docker.sdk import blocking
from orchestrator.errors import CorralError, EgressError
from sandboxes.isolation import PROXY_PORT, proxy_spec

PROXY_ALIAS = "proxy"
EGRESS_NETWORK = "corral-egress"
READY_POLL = 0.05


@dataclass(eq=False, slots=True)
class RunningProxy:
    """A started proxy: its container, its control channel, its `corral-egress` address."""

    container: DockerAttached
    control: KioskChannel
    egress_ip: str

    @property
    def id(self) -> str:
        return self.container.id

    async def close(self) -> None:
        """Remove it (closes the control channel too)."""
        await self.container.close()


async def start_proxy(
    backend: DockerBackend,
    *,
    image: str,
    name: str,
    labels: Mapping[str, str],
    session_network_id: str,
    subnet: str,
    pins: Mapping[str, Sequence[str]] | None,
    ready_timeout: float,
) -> RunningProxy:
    """The proxy of the session network `session_network_id` (serving only `subnet`),
    ready; `pins=None` starts it armed. Removed again if a step fails."""
    spec = proxy_spec(
        image=image,
        name=name,
        labels=labels,
        network=EGRESS_NETWORK,
        pins=pins or {},
        allow_from=subnet,
        pin_later=pins is None,
    )
    created: list[str] = []

    def join_session_network(container_id: str) -> None:
        created.append(container_id)
        backend.client.api.connect_container_to_network(
            container_id, session_network_id, aliases=[PROXY_ALIAS]
        )

    attached: DockerAttached | None = None
    try:
        # Attached to stdin and stdout only (its decision log on stderr goes to the log
        # driver): the control channel.
        attached = await backend.open_attached(
            spec, before_start=join_session_network, stderr=False
        )
        control = KioskChannel(attached, name="egress proxy")
        egress_ip = await _wait_ready(backend, attached.id, ready_timeout)
        return RunningProxy(attached, control, egress_ip)
    except BaseException:
        with anyio.CancelScope(shield=True):
            if attached is not None:
                with contextlib.suppress(CorralError):
                    await attached.close()
            elif created:  # created, then its start failed
                with contextlib.suppress(CorralError):
                    await backend.remove(created[0])
        raise


async def pin(proxy: RunningProxy, pins: Mapping[str, Sequence[str]], deadline: float) -> None:
    """Set an armed proxy's pins (its one `pin` op); EgressError if it refuses."""
    answer = await proxy.control.request(
        "pin", deadline, pins={host: list(addrs) for host, addrs in pins.items()}
    )
    if sorted(str(h) for h in answer.get("hosts", [])) != sorted(pins):
        raise EgressError(f"the egress proxy pinned {answer.get('hosts')}, not {sorted(pins)}")


async def _wait_ready(backend: DockerBackend, container_id: str, within: float) -> str:
    """Poll until the proxy accepts TCP connections on its `corral-egress` address (that
    address); EgressError if it exits or the deadline passes."""
    deadline = time.monotonic() + within
    while True:
        info = await backend.inspect_container(container_id)
        state = info.get("State") or {}
        if state.get("Status") in ("exited", "dead"):
            logs = await blocking(backend.url, partial(_logs_tail, backend.client, container_id))
            raise EgressError(
                f"the egress proxy exited with code {state.get('ExitCode')}: "
                f"{logs.decode(errors='replace').strip()}"
            )
        networks = (info.get("NetworkSettings") or {}).get("Networks") or {}
        addr = (networks.get(EGRESS_NETWORK) or {}).get("IPAddress")
        if addr and await anyio.to_thread.run_sync(_probe_tcp, addr, PROXY_PORT):
            return str(addr)
        if time.monotonic() > deadline:
            raise EgressError(f"the egress proxy did not accept connections within {within} s")
        await anyio.sleep(READY_POLL)


def _logs_tail(client: docker.DockerClient, container_id: str) -> bytes:
    out: Any = client.api.logs(container_id, stream=False, tail=20)
    return out if isinstance(out, bytes) else b"".join(out)


def _probe_tcp(addr: str, port: int) -> bool:
    try:
        with socket.create_connection((addr, port), timeout=1.0):
            return True
    except OSError:
        return False
