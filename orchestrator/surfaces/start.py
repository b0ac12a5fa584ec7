"""The one start path of a surface in a container (kiosk, desktop rig, browser rig): its
egress (the proxy and the pins of the agent's allowlist, or no network), then the
locked-down container's spec on that network, and the private CA its sites use. The
kind's start recipe opens the container from the spec and runs its own `start` op; what
was entered on the stack is closed if a later step fails (`teardown.closed_on_failure`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from orchestrator.backends.channel import load_seccomp
from orchestrator.config import ComputerUseConfig, CorralConfig
from orchestrator.surfaces.teardown import closed_on_failure
from sandboxes.events import CallEvents
from sandboxes.isolation import kiosk_spec
from sandboxes.ports import (
    ContainerBackend,
    ContainerSpec,
    Egress,
    EgressFactory,
    PreparedNetwork,
)

if TYPE_CHECKING:
    from orchestrator.pools.warm import Warm

Release = Callable[[PreparedNetwork], Awaitable[None]]  # a pool's `release`


@dataclass(frozen=True, slots=True)
class Host:
    """Where a surface starts: the config, the engine, how its egress is made."""

    config: CorralConfig
    backend: ContainerBackend
    egress_factory: EgressFactory


async def egress_and_spec(
    stack: AsyncExitStack,
    host: Host,
    *,
    surface_id: str,
    agent: str,
    allowed: Sequence[str],
    kind: str,
    image: str,
    events: CallEvents,
    egress_note: str,
    container_note: str,
) -> tuple[Egress, ContainerSpec]:
    """Enter the surface's egress on `stack`; the spec of its container on that network
    (labelled `kind`, for the agent and surface, reaped with the rest)."""
    await events.progress("egress", egress_note)
    egress = await stack.enter_async_context(
        host.egress_factory(
            session_id=surface_id,
            agent=agent,
            allowed=tuple(allowed),
            overrides=dict(host.config.container.kiosk.resolve_overrides),
        )
    )
    await events.progress("container", container_note)
    spec = kiosk_spec(
        image=image,
        labels=host.backend.labels(kind=kind, agent=agent, session=surface_id),
        network=egress.network_name,
        seccomp=load_seccomp(),
        dns=egress.dns_servers,
    )
    return egress, spec


async def rig_egress_and_spec(
    stack: AsyncExitStack,
    host: Host,
    rig_id: str,
    agent: str,
    cfg: ComputerUseConfig,
    kind: str,
    image: str,
    events: CallEvents,
) -> tuple[Egress, ContainerSpec]:
    """`egress_and_spec` for a rig of `kind` (desktop, browser)."""
    return await egress_and_spec(
        stack,
        host,
        surface_id=rig_id,
        agent=agent,
        allowed=cfg.allowed_domains,
        kind=f"rig-{kind}",
        image=image,
        events=events,
        egress_note=f"setting up egress for rig {rig_id}",
        container_note=f"starting the {kind} rig",
    )


async def warm_egress(
    stack: AsyncExitStack,
    host: Host,
    pooled: Warm[Any],
    agent: str,
    cfg: ComputerUseConfig,
    events: CallEvents,
) -> Egress:
    """Enter a claimed pool member's egress on `stack`: the allowlist resolved and the
    armed proxy made with the member's network pinned (`orchestrator.pools.warm`). With
    no allowlist, or nothing pinned, `network_name` is None: the member must leave the
    network (`leave_network`)."""
    await events.progress("egress", egress_phase(cfg.allowed_domains))
    return await stack.enter_async_context(
        host.egress_factory(
            session_id=pooled.session_id,
            agent=agent,
            allowed=tuple(cfg.allowed_domains),
            overrides=dict(host.config.container.kiosk.resolve_overrides),
            network=pooled.network,
        )
    )


async def claimed(
    host: Host,
    pooled: Warm[Any],
    agent: str,
    cfg: ComputerUseConfig,
    events: CallEvents,
    release: Release,
) -> tuple[AsyncExitStack, Egress]:
    """A claimed rig's stack (on exit: proxy, the member, then its network and rule) and
    its egress: the armed proxy pinned, or the member off its network."""
    stack = AsyncExitStack()
    stack.push_async_callback(pooled.network.remove)
    stack.push_async_callback(pooled.body.close)
    async with closed_on_failure(stack):
        egress = await warm_egress(stack, host, pooled, agent, cfg, events)
        if egress.network_name is None:
            await leave_network(pooled, release)
    return stack, egress


async def leave_network(pooled: Warm[Any], release: Release) -> None:
    """A claimed member with no allowlist: off its network (loopback only is left), and
    the network (its unpinned proxy, the rule) removed in the background (`release`)."""
    await pooled.network.disconnect(pooled.id)
    await release(pooled.network)


async def extra_ca(config: CorralConfig) -> str | None:
    """The private CA the egress proxy's sites use (`[container.kiosk] extra_ca_file`)."""
    path = config.container.kiosk.extra_ca_file
    return await anyio.to_thread.run_sync(read_text, path) if path else None


def read_text(path: str) -> str:
    """A small config file's text (called in a worker thread)."""
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def navigable_sites(
    allowed: Sequence[str], pinned: Sequence[str], left_out: Mapping[str, str]
) -> str:
    """What the start result says computer_navigate may open, and what was left out why."""
    gone = "; ".join(f"{host} ({why})" for host, why in left_out.items())
    if not allowed:
        return "none: this session has no network (allowed_domains is empty)"
    if not pinned:
        return f"none: every allowed name was left out, so this session has no network: {gone}"
    return ", ".join(pinned) + (f" (left out: {gone})" if gone else "")


def egress_phase(allowed: Sequence[str]) -> str:
    if not allowed:
        return "no network for this session (allowed_domains is empty)"
    return f"setting up the egress proxy for {len(allowed)} allowed site(s)"


@asynccontextmanager
async def no_egress(**_: Any) -> AsyncIterator[Egress]:
    """For sessions without an allowlist: no network at all."""

    @dataclass
    class _None:
        network_name: str | None = None
        proxy_url: str | None = None
        pins: dict[str, list[str]] = field(default_factory=dict)
        left_out: dict[str, str] = field(default_factory=dict)
        dns_servers: list[str] = field(default_factory=list)

        async def restrict(self, hosts: Sequence[str]) -> None:
            return None  # nothing is pinned without an allowlist

        async def check(self) -> str | None:
            return None  # no proxy to lose

    yield _None()
