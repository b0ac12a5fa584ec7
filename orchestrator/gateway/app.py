"""The gateway process's HTTP face: the signed internal API on loopback (SPEC S2.2).

    GET  /healthz                      no auth: {"ok": true}
    POST /api/internal/computer-use    signed with the channel key of the agent the body names
                                       (orchestrator.gateway.signing), body ComputerUseRequest,
                                       answer ComputerUseAnswer (docs/kiosk-internals.md s1)
    POST /api/internal/admin/...       an operator's token, no channel key: the operators' CLI
                                       (orchestrator.gateway.admin_api)
    /console/...                       the operator console (orchestrator.people.console), its own
                                       login; not under /api/internal/

Order of checks for anything under /api/internal/, each refusal answered with
JSON {"error": reason} and written to the audit as `internal_request_refused`
with {"reason", "path", "peer"}:

    1. peer not on loopback (127.0.0.0/8, ::1)  -> 403, before the body is read
    2. body larger than 1 MiB                   -> 413
    3. signature refused                        -> 401 (reason from orchestrator.gateway.signing):
       checked with the key of the agent the body names, so a key signs only for its agent
       too many fresh nonces                    -> 503
    4. body not a valid ComputerUseRequest      -> 400
       its agent not the one the key was picked for -> 401
    5. the handler's answer                     -> 200 (JSON, or with "stream": true NDJSON
                                                   call events ending in the answer:
                                                   orchestrator.gateway.call_stream)

The handler (`orchestrator.surfaces.kiosk.sessions.SessionManager.handle`) receives
arguments that passed
all of the above and returns a typed answer (orchestrator.surfaces.answers.Answer); the
gateway renders it as a ComputerUseAnswer before sending it, so a malformed answer is a
logged 500, never a half-valid reply.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import anyio
import uvicorn
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from orchestrator.audit import AuditLog
from orchestrator.errors import GatewayStartError, KeyFileError, NonceCacheFull, SignatureRefused
from orchestrator.gateway.call_stream import CallEventsResponse
from orchestrator.gateway.signing import REASON_NO_AGENT_KEY, NonceCache, read_key, verify
from orchestrator.gateway.wire import (
    COMPUTER_USE_PATH,
    ComputerUseAnswer,
    ComputerUseRequest,
    ConversationLease,
)
from orchestrator.home import CorralHome
from orchestrator.surfaces.answers import Answer
from sandboxes.events import NO_EVENTS, CallEvents

logger = logging.getLogger("corral.gateway")

# What the agents' signed routes take: a body naming the agent whose key signed it.
AgentBody = TypeVar("AgentBody", ComputerUseRequest, ConversationLease)

INTERNAL_PREFIX = "/api/internal"
MAX_BODY_BYTES = 1024 * 1024
REFUSED_EVENT = "internal_request_refused"
SHUTDOWN_GRACE_SECONDS = 5.0

REASON_NOT_LOOPBACK = "peer is not on loopback"
REASON_BODY_TOO_LARGE = "body larger than 1 MiB"
REASON_NONCE_CACHE_FULL = "nonce cache full"
REASON_KEY_UNUSABLE = "the agent's channel key file is unusable (see the gateway's log)"
REASON_AGENT_MISMATCH = "the body's agent is not the one its key belongs to"

_AUDIT_PATH_CHARS = 200

ComputerUseHandler = Callable[[str, str, dict[str, Any], CallEvents, str], Awaitable[Answer]]
"""(agent, tool, arguments, events, conversation) -> the typed answer, rendered here as a
ComputerUseAnswer. `events` reports progress and log events to the caller (NO_EVENTS when
the request did not ask for a stream); `conversation` is the MCP conversation the call is
from ("" for none)."""


# ------------------------------------------------------------------ refusals
def _peer_host(scope: Scope) -> str | None:
    client = scope.get("client")
    if not client:
        return None
    return str(client[0])


def is_loopback(host: str | None) -> bool:
    """127.0.0.0/8, ::1 and ::ffff:127.x.y.z; anything unparsable is not loopback."""
    if host is None:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _is_internal(path: str) -> bool:
    return path == INTERNAL_PREFIX or path.startswith(INTERNAL_PREFIX + "/")


class _Refusals:
    def __init__(self, audit: AuditLog) -> None:
        self.audit = audit

    def record(self, reason: str, scope: Scope) -> None:
        path = str(scope.get("path", ""))[:_AUDIT_PATH_CHARS]
        peer = _peer_host(scope) or "unknown"
        logger.warning("refused internal request from %s to %s: %s", peer, path, reason)
        self.audit.record(REFUSED_EVENT, None, {"reason": reason, "path": path, "peer": peer})

    def answer(self, reason: str, scope: Scope, status: int) -> JSONResponse:
        self.record(reason, scope)
        return JSONResponse({"error": reason}, status_code=status)


class LoopbackOnly:
    """Pure ASGI middleware: a non-loopback peer gets 403 on /api/internal/* before anything
    reads its body (this middleware never calls `receive` for it)."""

    def __init__(self, app: ASGIApp, refusals: _Refusals) -> None:
        self.app = app
        self.refusals = refusals

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or not _is_internal(scope["path"]):
            await self.app(scope, receive, send)
            return
        if is_loopback(_peer_host(scope)):
            await self.app(scope, receive, send)
            return
        self.refusals.record(REASON_NOT_LOOPBACK, scope)
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        # A plain Response only sends: the body is never read.
        await JSONResponse({"error": REASON_NOT_LOOPBACK}, status_code=403)(scope, receive, send)


async def _read_body(request: Request, limit: int) -> bytes | None:
    """The body, or None when it is larger than `limit` (read no further than that)."""
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        return None
    chunks = bytearray()
    async for chunk in request.stream():
        chunks += chunk
        if len(chunks) > limit:
            return None
    return bytes(chunks)


def _describe(exc: ValidationError) -> str:
    """A short description of what is wrong, without echoing any input value."""
    parts = []
    for err in exc.errors(include_url=False, include_input=False, include_context=False)[:5]:
        loc = ".".join(str(part) for part in err["loc"]) or "body"
        message = err["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {message}")
    return ("invalid body: " + "; ".join(parts))[:500]


def _claimed_agent(body: bytes) -> str | None:
    """The agent a body names (whose key must have signed it), or None."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    agent = data.get("agent") if isinstance(data, dict) else None
    return agent if isinstance(agent, str) else None


# ------------------------------------------------------------------------ app
class SignedRequests:
    """Check 2 for any route under /api/internal/ (`limited_body`: the body within its
    limit), and check 3 for the agents' route (`body`: a valid signature over it by the
    channel key of the agent it names). Each answers the body, or the refusal."""

    def __init__(self, home: CorralHome, clock: Callable[[], float], max_body_bytes: int) -> None:
        self.home = home
        self.nonces = NonceCache()
        self.refusals = _Refusals(AuditLog(home.audit_file))
        self.clock = clock
        self.max_body_bytes = max_body_bytes

    async def limited_body(self, request: Request) -> bytes | Response:
        try:
            body = await _read_body(request, self.max_body_bytes)
        except ClientDisconnect:
            return Response(status_code=400)
        if body is None:
            return self.refusals.answer(REASON_BODY_TOO_LARGE, request.scope, 413)
        return body

    async def body(self, request: Request) -> tuple[str, bytes] | Response:
        """(the agent whose key signed it, the body), or the refusal."""
        scope = request.scope
        body = await self.limited_body(request)
        if isinstance(body, Response):
            return body
        agent = _claimed_agent(body)
        try:
            key = None if agent is None else read_key(self.home, agent)
        except KeyFileError as exc:
            logger.error("channel key of %s: %s", agent, exc)
            return self.refusals.answer(REASON_KEY_UNUSABLE, scope, 401)
        try:
            verify(
                key,
                request.method,
                scope["path"],
                request.headers,
                body,
                now=self.clock(),
                nonces=self.nonces,
            )
        except SignatureRefused as exc:
            return self.refusals.answer(exc.reason, scope, 401)
        except NonceCacheFull:
            return self.refusals.answer(REASON_NONCE_CACHE_FULL, scope, 503)
        if agent is None:  # not reached: verify refuses a body that names no agent (no key)
            return self.refusals.answer(REASON_NO_AGENT_KEY, scope, 401)
        return agent, body

    async def model(self, request: Request, model: type[AgentBody]) -> AgentBody | Response:
        """The body as `model`, signed by the key of the agent it names; or the refusal."""
        checked = await self.body(request)
        if isinstance(checked, Response):
            return checked
        signer, body = checked
        try:
            said = model.model_validate_json(body)
        except ValidationError as exc:
            return self.refusals.answer(_describe(exc), request.scope, 400)
        if said.agent != signer:
            return self.refusals.answer(REASON_AGENT_MISMATCH, request.scope, 401)
        return said


ExtraRoutes = Callable[[SignedRequests], list[BaseRoute]]
"""More routes for the app, given the request checks (the admin API, the console)."""


def create_app(
    home: CorralHome,
    handler: ComputerUseHandler,
    *,
    clock: Callable[[], float] = time.time,
    max_body_bytes: int = MAX_BODY_BYTES,
    extra_routes: ExtraRoutes | None = None,
) -> Starlette:
    """The gateway's ASGI app. Each request's channel key is read when it arrives."""
    signed = SignedRequests(home, clock, max_body_bytes)
    refusals = signed.refusals

    async def healthz(_: Request) -> Response:
        return JSONResponse({"ok": True})

    async def computer_use(request: Request) -> Response:
        call = await signed.model(request, ComputerUseRequest)
        if isinstance(call, Response):
            return call

        def failed(exc: Exception) -> str:
            incident = uuid.uuid4().hex[:8]
            logger.error(
                "%s for %s failed (incident %s)", call.tool, call.agent, incident, exc_info=exc
            )
            return f"internal error in the gateway (incident {incident})"

        def run(events: CallEvents) -> Awaitable[Answer]:
            return handler(call.agent, call.tool, dict(call.arguments), events, call.conversation)

        if call.stream:
            return CallEventsResponse(run, failed)
        try:
            answer = ComputerUseAnswer.of(await run(NO_EVENTS))
        except Exception as exc:
            return JSONResponse({"error": failed(exc)}, status_code=500)
        return JSONResponse(answer.model_dump(mode="json", by_alias=True))

    return Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route(COMPUTER_USE_PATH, computer_use, methods=["POST"]),
            *(extra_routes(signed) if extra_routes else []),
        ],
        middleware=[Middleware(LoopbackOnly, refusals=refusals)],
    )


# ---------------------------------------------------------------------- serve
class _GatewayServer(uvicorn.Server):
    """uvicorn's server, plus: `ready` is set once the socket accepts connections, and
    `stop` finishes a shutdown that cancellation interrupted."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The process's signals belong to its entry point (`corral gateway` handles SIGTERM
        # and SIGINT by ending every session, then this server); uvicorn must not take them.
        yield

    def __init__(self, config: uvicorn.Config, ready: anyio.Event | None) -> None:
        super().__init__(config)
        self._ready = ready
        self._shutting_down = False

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and self._ready is not None:
            self._ready.set()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._shutting_down = True
        await super().shutdown(sockets=sockets)

    async def stop(self, sockets: list[socket.socket]) -> None:
        self.should_exit = True
        if self.started and not self._shutting_down:
            await self.shutdown(sockets=sockets)


async def _bind(host: str, port: int) -> socket.socket:
    try:
        infos = await anyio.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except OSError as exc:
        raise GatewayStartError(f"cannot resolve gateway host {host!r}: {exc}") from exc
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise GatewayStartError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; is another gateway "
            "running? (change [gateway] port in config.toml to use another port)"
        ) from exc
    return sock


async def serve_gateway(
    home: CorralHome,
    host: str,
    port: int,
    handler: ComputerUseHandler,
    ready: anyio.Event | None = None,
    extra_routes: ExtraRoutes | None = None,
) -> None:
    """Serve the gateway until cancelled (the entry point turns SIGTERM/SIGINT into that).
    `ready` is set once connections are accepted. Raises GatewayStartError if it cannot
    listen."""
    app = create_app(home, handler, extra_routes=extra_routes)
    sock = await _bind(host, port)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="off",
        log_level="warning",
        access_log=False,
        server_header=False,
        # The audited peer is the socket's, always: never a header a local process can forge.
        proxy_headers=False,
        forwarded_allow_ips="",
        timeout_graceful_shutdown=int(SHUTDOWN_GRACE_SECONDS),
    )
    server = _GatewayServer(config, ready)
    try:
        await server.serve(sockets=[sock])
    except anyio.get_cancelled_exc_class():
        # uvicorn only shuts down when its loop sees should_exit; a cancelled serve() never
        # gets there, so close the listener and the connections here.
        with anyio.move_on_after(SHUTDOWN_GRACE_SECONDS * 2, shield=True):
            await server.stop([sock])
        raise
    finally:
        sock.close()
