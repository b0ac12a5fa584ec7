"""What the engine can hold (issue 14): session networks left in its address pools, and
whether gVisor's `runsc` is registered. Read by `corral doctor`, on any engine (one corral
started with scripts/dockerd.json or one it did not start).

A kiosk session with an allowlist takes one bridge network
(`orchestrator.backends.docker.egress`), whose
subnet comes from the engine's `default-address-pools`. `docker info` lists them when
they are configured (`DefaultAddressPools`); when it lists none, the engine uses its
built-in pools, `DOCKER_BUILTIN_POOLS` (about 31 networks, 29 free on a fresh engine).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.backends.docker.channel_socket import default_runtime_of, describe
from orchestrator.backends.docker.sdk import blocking
from orchestrator.backends.reaper import reap_orphans
from orchestrator.errors import SandboxUnavailable
from sandboxes.ports import AuditSink, DoctorRow

# moby's libnetwork/ipamutils defaults (engine 20.10 .. 27): 172.17-31/16 by /16 and
# 192.168/16 by /20.
DOCKER_BUILTIN_POOLS: tuple[tuple[str, int], ...] = (
    ("172.17.0.0/16", 16),
    ("172.18.0.0/16", 16),
    ("172.19.0.0/16", 16),
    ("172.20.0.0/14", 16),
    ("172.24.0.0/14", 16),
    ("172.28.0.0/14", 16),
    ("192.168.0.0/16", 20),
)
RAISE_HINT = (
    "raise it with `default-address-pools` in the engine's daemon.json (corral's own "
    'scripts/dockerd.json uses [{"base": "10.213.0.0/16", "size": 24}]: 256 networks) '
    "and restart the engine"
)
RUNSC_HINT = (
    'register it in the engine\'s daemon.json: "runtimes": {"runsc": {"path": '
    '"/usr/bin/runsc", "runtimeArgs": ["--platform=ptrace", "--network=none"]}} '
    "(scripts/dockerd.json; scripts/ensure-docker.sh installs Debian's runsc), then reload "
    "the engine (SIGHUP)"
)


@dataclass(frozen=True, slots=True)
class NetworkCapacity:
    pools: tuple[tuple[str, int], ...]  # (base, size) as the engine uses them
    configured: bool  # False: the engine's built-in pools
    total: int  # networks the pools can hand out
    used: int  # networks whose subnet lies in a pool now

    @property
    def free(self) -> int:
        return max(0, self.total - self.used)

    def describe(self) -> str:
        pools = ", ".join(f"{base} by /{size}" for base, size in self.pools)
        where = "daemon.json" if self.configured else "the engine's built-in defaults"
        return (
            f"{self.free} more session networks fit ({self.used} of {self.total} in use; "
            f"pools from {where}: {pools})"
        )


def pools_of(info: Mapping[str, Any]) -> tuple[tuple[tuple[str, int], ...], bool]:
    """The address pools from `docker info` (`DefaultAddressPools`), or the built-in ones."""
    listed = info.get("DefaultAddressPools") or []
    pools = tuple((str(p["Base"]), int(p["Size"])) for p in listed if p.get("Base"))
    if pools:
        return pools, True
    return DOCKER_BUILTIN_POOLS, False


def pool_capacity(pools: Iterable[tuple[str, int]]) -> int:
    """How many networks of each pool's size fit in its base, summed."""
    total = 0
    for base, size in pools:
        net = ipaddress.ip_network(base, strict=False)
        if size >= net.prefixlen:
            total += 2 ** (size - net.prefixlen)
    return total


def network_capacity(info: Mapping[str, Any], subnets: Sequence[str]) -> NetworkCapacity:
    """The capacity from `docker info` and the subnets of the networks that exist now."""
    pools, configured = pools_of(info)
    bases = [ipaddress.ip_network(b, strict=False) for b, _ in pools]
    used = 0
    for subnet in subnets:
        try:
            net = ipaddress.ip_network(subnet, strict=False)
        except ValueError:
            continue
        if any(net.version == b.version and net.subnet_of(b) for b in bases):  # type: ignore[arg-type]
            used += 1
    return NetworkCapacity(pools, configured, pool_capacity(pools), used)


def subnets_of(networks: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every IPv4/IPv6 subnet of the listed networks (`client.api.networks()` entries)."""
    found = []
    for network in networks:
        for entry in (network.get("IPAM") or {}).get("Config") or []:
            if entry.get("Subnet"):
                found.append(str(entry["Subnet"]))
    return found


def runsc_registration(info: Mapping[str, Any]) -> str | None:
    """How runsc is registered with the engine ("path args"), or None."""
    runtime = (info.get("Runtimes") or {}).get("runsc")
    if not runtime:
        return None
    args = " ".join(runtime.get("runtimeArgs") or [])
    return f"{runtime.get('path', 'runsc')} {args}".strip()


async def doctor_rows(backend: DockerBackend, runtime: str) -> list[tuple[str, bool, str]]:
    """`corral doctor`'s rows: session networks left, gVisor (failing only when
    `[container.sandbox] runtime = "runsc"` asks for it and the engine lacks it), and where
    the kiosks' and rigs' channels go (their own socket, or the engine's attach)."""
    client = backend.client
    info: dict[str, Any] = await blocking(backend.url, client.info)
    networks: list[dict[str, Any]] = await blocking(backend.url, client.api.networks)
    capacity = network_capacity(info, subnets_of(networks))
    rows = [
        (
            "session networks",
            capacity.free > 0,
            capacity.describe()
            + f"; {RAISE_HINT}" * (not capacity.configured or capacity.free < 40),
        )
    ]
    runsc = runsc_registration(info)
    if runsc is not None:
        rows.append(("runsc (gVisor)", True, f"registered: {runsc}; scripts use {runtime}"))
    else:
        needed = runtime == "runsc"
        detail = "not registered" + (
            ' but [container.sandbox] runtime = "runsc" asks for it' if needed else " (optional)"
        )
        rows.append(("runsc (gVisor)", not needed, f"{detail}; {RUNSC_HINT}"))
    default = default_runtime_of(info)
    rows.append(("kiosk channels", True, describe(backend.channel_socket, backend.url, default)))
    return rows


async def engine_rows(
    backend: DockerBackend, image: str, runtime: str, audit: AuditSink | None = None
) -> list[DoctorRow]:
    """Every `corral doctor` row for a Docker engine: the engine, the sandbox image, the
    capacity rows above, then the orphans reaped. An engine or image that is not there
    is a failing row naming its fix."""
    try:
        await backend.check(image)
        version: dict[str, Any] = await blocking(backend.url, backend.client.version)
        rows = [
            ("docker engine", True, f"{version.get('Version')} at {backend.url}"),
            ("sandbox image", True, image),
            *await doctor_rows(backend, runtime),
        ]
        reaped = await reap_orphans(backend, audit)
    except SandboxUnavailable as exc:
        return [(f"sandbox ({exc.code.value})", False, f"{exc.reason}. Fix: {exc.fix}")]
    return [*rows, ("orphans", True, f"{len(reaped)} removed")]
