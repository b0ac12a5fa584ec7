"""`corral gateway`: the long-lived process that owns kiosk sessions and rigs (SPEC S0, S2, S4).

Reaps orphans at start, serves the signed internal API, ends idle and expired
sessions, and removes every session container when it stops.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
from starlette.routing import BaseRoute
from starlette.websockets import WebSocket

from orchestrator.audit import AuditLog
from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.backends.reaper import reap_orphans
from orchestrator.config import CorralConfig, load_config
from orchestrator.errors import SandboxUnavailable
from orchestrator.gateway.app import ExtraRoutes, SignedRequests, serve_gateway
from orchestrator.home import CorralHome
from orchestrator.runtime import Runtime, open_runtime
from orchestrator.surfaces.answers import Answer
from orchestrator.surfaces.desktop import DesktopRig
from orchestrator.surfaces.kiosk.session import KioskSession
from orchestrator.surfaces.kiosk.sessions import SessionManager
from orchestrator.surfaces.start import EgressFactory, no_egress, read_text
from sandboxes.catalogue import GATEWAY_TOOLS
from sandboxes.events import NO_EVENTS, CallEvents
from sandboxes.ports import ContainerBackend, Egress
from sandboxes.rfb import ClientMessage

logger = logging.getLogger("corral.gateway")
# Ending everything at stop: a base, plus a share per open rig or session (each removes a
# container or two and maybe a network, about a second each on this machine).
CLOSE_BASE_SECONDS = 30.0
CLOSE_PER_ITEM_SECONDS = 5.0

if TYPE_CHECKING:
    from orchestrator.backends.docker.egress import SessionNetwork
    from orchestrator.pools.kiosks import KioskPool
    from orchestrator.surfaces.rigs import RigManager


def egress_factory(backend: DockerBackend, config: CorralConfig) -> EgressFactory:
    kiosk = config.container.kiosk

    @asynccontextmanager
    async def make(
        *,
        session_id: str,
        agent: str,
        allowed: tuple[str, ...],
        overrides: dict[str, str],
        network: SessionNetwork | None = None,
    ) -> AsyncIterator[Egress]:
        if not allowed:
            async with no_egress() as none:
                yield none
            return
        from orchestrator.backends.docker.egress import SessionEgress

        async with SessionEgress(
            backend,
            session_id=session_id,
            agent=agent,
            allowed_hosts=allowed,
            resolve_override=overrides,
            image=kiosk.proxy_image,
            network=network,
        ) as egress:
            yield egress

    return make


def people_routes(
    home: CorralHome, manager: SessionManager, rigs_backend: ContainerBackend | None = None
) -> ExtraRoutes:
    """The operators' signed API and the console, beside the agents' API. A seat's live
    view goes through the backend that runs it: a kiosk pod (`pod/...`, Kubernetes)
    through the SessionManager's, a rig container through `rigs_backend` (Docker)."""
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
        container = session.channel.id
        backend = manager.backend
        if rigs_backend is not None and not container.startswith("pod/"):
            backend = rigs_backend
        stream = await open_vnc(backend, container)
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
        from orchestrator.backends.docker.network_reaper import reap_networks

        try:
            await reap_orphans(runtime.backend)
            await reap_networks(runtime.backend)
        except SandboxUnavailable:
            if runtime.kubernetes is None:
                raise
            # On a cluster, a machine without Docker still serves kiosk sessions; only
            # the rigs (still on Docker) are unavailable.
        if runtime.kubernetes is not None:  # kiosk sessions as pods (docs/kubernetes.md)
            await reap_orphans(runtime.kubernetes)
            await _serve(home, config, runtime, None, ready, listen_host, listen_port)
            return
        async with kiosk_pool_for(runtime.backend, config, runtime.audit) as kiosk_pool:
            await _serve(home, config, runtime, kiosk_pool, ready, listen_host, listen_port)


@asynccontextmanager
async def kiosk_pool_for(
    backend: DockerBackend, config: CorralConfig, audit: AuditLog
) -> AsyncIterator[KioskPool | None]:
    """The kiosk warm pool (`[container.kiosk] warm`), or None when it is 0. Each kiosk
    that joins it is audited (`kiosk_pool_ready`, with how many wait)."""
    kiosk = config.container.kiosk
    if kiosk.warm == 0:
        yield None
        return
    from orchestrator.pools.kiosks import KioskPoolSettings, open_kiosk_pool

    ca_pem = None
    if kiosk.extra_ca_file:
        ca_pem = await anyio.to_thread.run_sync(read_text, kiosk.extra_ca_file)
    settings = KioskPoolSettings(image=kiosk.image, size=kiosk.warm, ca_pem=ca_pem)

    def ready(idle: int) -> None:
        audit.record("kiosk_pool_ready", None, {"idle": idle, "size": kiosk.warm})

    async with open_kiosk_pool(backend, settings, ready) as pool:
        yield pool


def _session_manager(
    home: CorralHome, config: CorralConfig, runtime: Runtime, kiosk_pool: KioskPool | None
) -> SessionManager:
    """The kiosk sessions' manager on the runtime's engine (pods on Kubernetes)."""
    if runtime.kubernetes is not None:  # kiosk sessions as pods (docs/kubernetes.md)
        from orchestrator.backends.kubernetes.egress import kube_egress_factory

        manager = SessionManager(
            home,
            config,
            runtime.kubernetes,
            runtime.audit,
            kube_egress_factory(runtime.kubernetes, config.container.kiosk.proxy_image),
        )
    else:
        manager = SessionManager(
            home,
            config,
            runtime.backend,
            runtime.audit,
            egress_factory(runtime.backend, config),
            kiosk_pool=kiosk_pool,
        )
    return manager


async def _serve(
    home: CorralHome,
    config: CorralConfig,
    runtime: Runtime,
    kiosk_pool: KioskPool | None,
    ready: anyio.Event | None,
    listen_host: str,
    listen_port: int,
) -> None:
    manager = _session_manager(home, config, runtime, kiosk_pool)
    from orchestrator.codrive.tools import CodriveTools
    from orchestrator.surfaces.rigs import RigManager

    rigs = RigManager(
        home,
        config,
        runtime.backend,
        runtime.audit,
        egress_factory(runtime.backend, config),
        oversight=manager.oversight,  # one seats registry over every surface
    )

    async def handle(
        agent: str, tool: str, arguments: dict[str, Any], events: CallEvents = NO_EVENTS
    ) -> Answer:
        if tool in GATEWAY_TOOLS:  # rigs and codrive, on the agent's desktop rig
            return await rigs.handle(agent, tool, arguments, events)
        return await manager.handle(agent, tool, arguments, events)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(manager.expire_forever)
            tg.start_soon(rigs.expire_forever)
            tg.start_soon(manager.oversight.thumbnails_forever)
            CodriveTools(  # registers codrive_run and codrive_status with the rigs
                rigs,
                manager.oversight,
                runtime.audit,
                tg.start_soon,
                handoff_timeout=float(config.codrive.handoff_timeout_seconds),
            )
            routes = people_routes(home, manager, runtime.backend)

            async def serve() -> None:
                try:
                    await serve_gateway(home, listen_host, listen_port, handle, ready, routes)
                finally:
                    tg.cancel_scope.cancel()

            tg.start_soon(serve)
    finally:
        await _end_everything(rigs, manager)


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
