"""Removing orphaned session networks and their firewall rules.

A session network outlives its session only when its owner died before cleaning up;
`network_is_orphan` (pure) decides, `reap_networks` lists and removes. A network of
a live owner, with a container attached, or of another host is never touched.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.backends.docker.firewall import input_drop_bridges, remove_input_drop
from orchestrator.backends.docker.networks import (
    BRIDGE_NAME_OPTION,
    KIND_SESSION_NETWORK,
    SESSION_NETWORK_PREFIX,
)
from orchestrator.backends.docker.sdk import blocking
from orchestrator.backends.owner import (
    LABEL_KIND,
    LABEL_MANAGED,
    owner_is_alive,
    read_boot_id,
    read_start_time,
)
from orchestrator.errors import EgressError, EngineError, EngineNotFound

logger = logging.getLogger("corral.egress")


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


def bridge_exists(bridge: str) -> bool:
    """Whether this host has a network interface of that name."""
    return os.path.exists(os.path.join("/sys/class/net", bridge))


def rule_is_orphan(bridge: str, freed: Collection[str], exists: Callable[[str], bool]) -> bool:
    """Whether the INPUT rule of `bridge`, which no network of this engine has, may go
    (pure): when this sweep removed its network, or when the host has no such bridge
    any more. A bridge that still exists may be a network of another engine on this host
    (the rules are the host's, the network list is one engine's): its rule stays, or
    that engine's session network would be open to this host."""
    return bridge in freed or not exists(bridge)


@dataclass(frozen=True, slots=True)
class ReapedNetworks:
    networks: tuple[str, ...]  # session networks removed
    rules: tuple[str, ...]  # bridges whose orphaned INPUT rules were removed


@dataclass
class _Sweep:
    """One pass over the engine's networks: what it removed, and which bridges live on."""

    wanted: dict[str, str]
    stale_after: float | None
    now: float
    host: str = field(default_factory=socket.gethostname)
    boot_id: str = field(default_factory=read_boot_id)
    removed: list[str] = field(default_factory=list)
    live_bridges: set[str] = field(default_factory=set)
    freed_bridges: set[str] = field(default_factory=set)

    def keep(self, bridge: object) -> None:
        if bridge:
            self.live_bridges.add(str(bridge))


def _is_session_network(name: str, labels: Mapping[str, str]) -> bool:
    return (
        name.startswith(SESSION_NETWORK_PREFIX)
        and labels.get(LABEL_MANAGED) == "true"
        and labels.get(LABEL_KIND) == KIND_SESSION_NETWORK
    )


async def _consider(backend: DockerBackend, summary: dict[str, Any], sweep: _Sweep) -> None:
    """Remove this network if it is an orphaned session network; else note its bridge."""
    client = backend.client
    name, labels = str(summary.get("Name", "")), summary.get("Labels") or {}
    bridge = (summary.get("Options") or {}).get(BRIDGE_NAME_OPTION)
    if not _is_session_network(name, labels) or any(
        labels.get(k) != v for k, v in sweep.wanted.items()
    ):
        sweep.keep(bridge)
        return
    try:
        info = await blocking(backend.url, partial(client.api.inspect_network, summary["Id"]))
    except EngineError:
        return
    orphan = network_is_orphan(
        labels,
        attached=len(info.get("Containers") or {}),
        age_seconds=_age_seconds(str(info.get("Created", "")), sweep.now),
        host=sweep.host,
        boot_id=sweep.boot_id,
        start_time_of=read_start_time,
        stale_after=sweep.stale_after,
    )
    if not orphan:
        sweep.keep(bridge)
        return
    try:
        with contextlib.suppress(EngineNotFound):
            await blocking(backend.url, partial(client.api.remove_network, str(summary["Id"])))
    except EngineError as exc:  # e.g. a container got attached meanwhile
        logger.warning("could not remove orphaned network %s: %s", name, exc)
        sweep.keep(bridge)
        return
    sweep.removed.append(name)
    if bridge:
        sweep.freed_bridges.add(str(bridge))


async def reap_networks(
    backend: DockerBackend,
    *,
    stale_after: float | None = 600.0,
    label_filters: Mapping[str, str] | None = None,
    sweep_rules: bool | Collection[str] = True,
) -> ReapedNetworks:
    """Remove orphaned `corral-s-*` networks (see `network_is_orphan`) with their INPUT
    rules, then INPUT rules of `crl*` bridges that no network has any more and this host
    has no interface of (`rule_is_orphan`: another engine's live bridges keep theirs).

    `label_filters` narrows the networks considered (all corral session networks by
    default); `sweep_rules` is True (every orphaned corral rule), False, or the bridge
    names whose orphaned rules may be removed.

    Run it after the container reaper (a network with a container attached is kept).
    The rule snapshot is taken before the network listing: a rule is only ever added
    for a network that already exists, so a live session's rule is never taken for an
    orphan."""
    rule_bridges = await input_drop_bridges()
    if sweep_rules is False:
        rule_bridges = set()
    elif sweep_rules is not True:
        rule_bridges &= set(sweep_rules)
    sweep = _Sweep(dict(label_filters or {}), stale_after, time.time())
    for summary in list(await blocking(backend.url, backend.client.api.networks)):
        await _consider(backend, summary, sweep)
    if sweep_rules is not False:
        rule_bridges |= sweep.freed_bridges  # removed below even if not in the snapshot
    removed = sweep.removed
    rules_removed = []
    for bridge in sorted(rule_bridges - sweep.live_bridges):
        if not rule_is_orphan(bridge, sweep.freed_bridges, bridge_exists):
            continue
        try:
            deleted = await remove_input_drop(bridge)
        except EgressError as exc:
            logger.warning("%s", exc)
            continue
        if deleted:
            rules_removed.append(bridge)
    return ReapedNetworks(networks=tuple(removed), rules=tuple(rules_removed))
