"""`corral gateway`: the long-lived process that owns kiosk sessions and rigs (SPEC S0, S2, S4).

Reaps orphans at start, serves the signed internal API, ends idle and expired
sessions, and removes every session container when it stops.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import anyio
from starlette.routing import BaseRoute
from starlette.websockets import WebSocket

from orchestrator.backends.reaper import reap_orphans
from orchestrator.config import CorralConfig, load_config
from orchestrator.gateway.app import ExtraRoutes, SignedRequests, serve_gateway
from orchestrator.gateway.memory import snapshots_on_signal
from orchestrator.gateway.warm_pools import follow_sizes, warm_pools
from orchestrator.home import CorralHome
from orchestrator.ledger import Ledger, Recovered, close_left_work
from orchestrator.recordings.service import Recordings
from orchestrator.runtime import Runtime, open_runtime
from orchestrator.surfaces.answers import Answer
from orchestrator.surfaces.desktop import DesktopRig
from orchestrator.surfaces.kiosk.session import KioskSession
from orchestrator.surfaces.kiosk.sessions import SessionManager
from orchestrator.surfaces.start import no_egress
from sandboxes.catalogue import GATEWAY_TOOLS
from sandboxes.ports import ContainerBackend, Egress, EgressFactory
from sandboxes.rfb import ClientMessage

logger = logging.getLogger("corral.gateway")
# Ending everything at stop: a base, plus a share per open rig or session (each removes a
# container or two and maybe a network, about a second each on this machine).
CLOSE_BASE_SECONDS = 30.0
CLOSE_PER_ITEM_SECONDS = 5.0

if TYPE_CHECKING:
    from orchestrator.surfaces.rigs import RigManager


def egress_factory(backend: ContainerBackend, config: CorralConfig) -> EgressFactory:
    """Sessions' and rigs' ways out on `backend`: none at all without an allowlist, else
    the backend's own egress (its proxy from `[container.kiosk] proxy_image`)."""
    on_backend = backend.egress_factory(config.container.kiosk.proxy_image)

    def make(*, allowed: tuple[str, ...], **rest: Any) -> AbstractAsyncContextManager[Egress]:
        return on_backend(allowed=allowed, **rest) if allowed else no_egress()

    return make


def people_routes(home: CorralHome, manager: SessionManager) -> ExtraRoutes:
    """The operators' signed API and the console, beside the agents' API. A seat's live
    view goes through the one backend, the SessionManager's (kiosks and rigs share it)."""
    from orchestrator.gateway.admin_api import admin_routes
    from orchestrator.people.console import console_routes

    admin = admin_routes(manager.oversight)

    async def live_view(
        websocket: WebSocket, agent: str, on_input: Callable[[ClientMessage], Awaitable[bool]]
    ) -> None:
        from orchestrator.people.live_view import bridge_vnc, open_vnc

        session = manager.oversight.seats().get(agent)
        if not isinstance(session, KioskSession | DesktopRig):  # gone, or no screen to show
            await websocket.close(code=1008)
            return
        stream = await open_vnc(manager.backend, session.channel.id)
        outcome = await bridge_vnc(websocket, stream, on_input)
        manager.audit.record(
            "console_live_view_ended",
            agent,
            {
                "session": session.id,
                "by": outcome.by,
                "inputs_forwarded": outcome.inputs_forwarded,
                "inputs_dropped": outcome.inputs_dropped,
            },
        )

    def build(signed: SignedRequests) -> list[BaseRoute]:
        return [*admin(signed), *console_routes(home, manager.oversight, bridge=live_view)]

    return build


async def run_gateway(
    home: CorralHome,
    ready: anyio.Event | None = None,
    *,
    host: str | None = None,
    port: int | None = None,
) -> None:
    """Serve until cancelled; every session is ended (its containers removed) before this
    returns, whichever way it stops. `host`/`port` override [gateway] in config.toml."""
    config = load_config(home.config_file, home.env.image_tag)
    listen_host = config.gateway.host if host is None else host
    listen_port = config.gateway.port if port is None else port
    async with open_runtime(home) as runtime:
        # What a killed gateway left open is closed in the audit before anything new opens.
        left = await anyio.to_thread.run_sync(close_left_work, home.inflight_dir, runtime.audit)
        ledger = Ledger(home.inflight_dir, runtime.owner)
        runtime.audit.followers.append(ledger.follow)
        await reap_orphans(runtime.backend, runtime.audit)
        await runtime.backend.reap_networks()
        try:
            await _serve(home, config, runtime, ready, (listen_host, listen_port), left)
        finally:
            ledger.close()


async def _serve(
    home: CorralHome,
    config: CorralConfig,
    runtime: Runtime,
    ready: anyio.Event | None,
    listen: tuple[str, int],
    left: list[Recovered],
) -> None:
    manager, rigs, recordings = _managers(home, config, runtime)
    from orchestrator.codrive.tools import CodriveTools

    async def handle(*call: Any) -> Answer:
        """(agent, tool, arguments, events, conversation): rigs and codrive per
        conversation; the kiosk one per agent (S2.3), whatever the conversation."""
        if call[1] in GATEWAY_TOOLS:
            return await rigs.handle(*call)
        return await manager.handle(*call[:4])

    try:
        async with (
            recordings.running(),
            warm_pools(home, config, runtime.backend, runtime.audit, rigs.starts) as pools,
            anyio.create_task_group() as tg,
        ):
            if pools is not None:
                manager.kiosk_pool = pools.kiosk
                tg.start_soon(follow_sizes, home, config, pools)
            if home.env.traced_frames:
                tg.start_soon(snapshots_on_signal, home.root / "debug", home.env.traced_frames)
            tg.start_soon(manager.expire_forever)
            tg.start_soon(rigs.expire_forever)
            tg.start_soon(manager.oversight.thumbnails_forever)
            CodriveTools(  # registers codrive_run and codrive_status with the rigs
                rigs,
                manager.oversight,
                runtime.audit,
                tg.start_soon,
                handoff_timeout=float(config.codrive.handoff_timeout_seconds),
            ).runs.restore([r for r in left if r.kind == "codrive_run"])
            from orchestrator.gateway.conversations_api import with_conversations

            routes = with_conversations(people_routes(home, manager), rigs.conversations)

            async def serve() -> None:
                try:
                    await serve_gateway(home, *listen, handle, ready, routes)
                finally:
                    tg.cancel_scope.cancel()

            tg.start_soon(serve)
    finally:
        await _end_everything(rigs, manager)


def _managers(
    home: CorralHome, config: CorralConfig, runtime: Runtime
) -> tuple[SessionManager, RigManager, Recordings]:
    """The kiosk sessions' and the rigs' managers, sharing one seats registry, one egress
    and one recordings service."""
    from orchestrator.surfaces.rigs import RigManager

    egress = egress_factory(runtime.backend, config)
    recordings = Recordings(home.recordings_dir, config.recording, runtime.audit)
    manager = SessionManager(
        home, config, runtime.backend, runtime.audit, egress, recordings=recordings
    )
    rigs = RigManager(
        home,
        config,
        runtime.backend,
        runtime.audit,
        egress,
        oversight=manager.oversight,  # one seats registry over every surface
        recordings=recordings,
    )
    return manager, rigs, recordings


async def _end_everything(rigs: RigManager, manager: SessionManager) -> None:
    """End every rig and session (shielded), within a bound: a removal the engine never
    answers must not keep a stopped gateway alive. Past it, the gateway says so and exits;
    its owner watchdog removes the containers, `corral reap` the networks."""
    limit = CLOSE_BASE_SECONDS + CLOSE_PER_ITEM_SECONDS * (len(rigs.rigs) + len(manager.sessions))
    with anyio.move_on_after(limit, shield=True) as scope:
        await rigs.close_all()
        await manager.close_all()
    if scope.cancelled_caught:
        logger.error(
            "corral gateway: rigs and sessions did not all end within %.0f s (left: %s); "
            "the owner watchdog removes their containers",
            limit,
            sorted([*map(str, rigs.rigs), *manager.sessions]),
        )


__all__ = ["run_gateway"]
