"""The kiosk's start recipe: cold (the shared start path, then the kiosk's `start` op in
its two stages, display then browser) or warm (a claimed pool kiosk, its `claim` op)."""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from orchestrator.backends.channel import KioskChannel
from orchestrator.config import ComputerUseConfig
from orchestrator.surfaces.start import (
    Host,
    egress_and_spec,
    egress_phase,
    extra_ca,
    warm_egress,
)
from orchestrator.surfaces.teardown import closed_on_failure
from sandboxes.events import CallEvents
from sandboxes.params import SessionStartParams
from sandboxes.ports import Egress

if TYPE_CHECKING:
    from orchestrator.pools.kiosks import KioskPool, PoolKiosk

START_DEADLINE = 60.0


@dataclass(frozen=True, slots=True)
class Started:
    """A started kiosk, before it is a session: what closes it, and its `start` answer."""

    session_id: str
    channel: KioskChannel
    stack: contextlib.AsyncExitStack
    egress: Egress
    ready: dict[str, Any]


@dataclass(frozen=True, slots=True)
class KioskStart:
    host: Host
    kiosk_pool: KioskPool | None

    async def cold(
        self, agent: str, params: SessionStartParams, cfg: ComputerUseConfig, events: CallEvents
    ) -> Started:
        kiosk_cfg = self.host.config.container.kiosk
        session_id = uuid.uuid4().hex[:10]
        stack = contextlib.AsyncExitStack()
        async with closed_on_failure(stack):
            egress, spec = await egress_and_spec(
                stack,
                self.host,
                surface_id=session_id,
                agent=agent,
                allowed=cfg.allowed_domains,
                kind="kiosk",
                image=kiosk_cfg.image,
                events=events,
                egress_note=egress_phase(cfg.allowed_domains),
                container_note="starting the kiosk container",
            )
            channel = await KioskChannel.open(self.host.backend, spec)
            stack.push_async_callback(channel.close)
            await events.log("info", "sandbox_started", {"kind": "kiosk", "session": session_id})
            ca_pem = await extra_ca(self.host.config)
            # The kiosk's `start` op in its two stages, each reported.
            await events.progress("display", "starting the display", remaining=START_DEADLINE)
            await channel.request(
                "start",
                START_DEADLINE,
                stage="display",
                width=params.width,
                height=params.height,
                ca_pem=ca_pem,
            )
            await events.progress("browser", "starting the browser", remaining=START_DEADLINE)
            ready = await channel.request(
                "start", START_DEADLINE, stage="browser", proxy=egress.proxy_url, url=None
            )
        return Started(session_id, channel, stack, egress, ready)

    async def warm(
        self,
        agent: str,
        params: SessionStartParams,
        cfg: ComputerUseConfig,
        events: CallEvents,
        pooled: PoolKiosk,
    ) -> Started:
        """A session on a claimed pool kiosk (orchestrator/pools/kiosks.py): its egress pins
        the network's armed proxy (or the kiosk leaves the network: no allowlist, no
        network), then the kiosk's `claim` op wipes what it showed and takes the session's
        size. On exit: proxy, kiosk, then the network and its rule."""
        session_id, channel = pooled.session_id, pooled.body.channel
        stack = contextlib.AsyncExitStack()
        stack.push_async_callback(pooled.network.remove)
        stack.push_async_callback(channel.close)
        async with closed_on_failure(stack):
            egress = await warm_egress(stack, self.host, pooled, agent, cfg, events)
            await events.log(
                "info", "sandbox_started", {"kind": "kiosk", "session": session_id, "warm": True}
            )
            await events.progress("browser", "taking a started kiosk", remaining=START_DEADLINE)
            async with anyio.create_task_group() as tg:
                if egress.network_name is None:  # nothing pinned: only loopback is left (till
                    tg.start_soon(pooled.network.disconnect, channel.id)  # then: no proxy)
                size = {"width": params.width, "height": params.height}
                ready = await channel.request("claim", START_DEADLINE, **size)
            if egress.network_name is None and self.kiosk_pool is not None:
                await self.kiosk_pool.release(pooled.network)  # empty now: removed soon
        return Started(session_id, channel, stack, egress, ready)
