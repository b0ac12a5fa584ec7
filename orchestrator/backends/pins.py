"""Pinning an allowlist (SPEC S2.6): each allowed name resolved once, at a session's
start, to the public addresses its proxy may reach. Engine-free: both backends' egress
pins through here (`orchestrator.backends.docker.egress`, `...kubernetes.egress`).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable, Mapping

import anyio

from sandboxes.hostnames import address_class, is_ip_literal, normalise_host, usable_address

RESOLVE_TIMEOUT = 10.0
MAX_ADDRS_PER_HOST = 8


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
