"""corral's MCP server: one process per client, stdio or Streamable HTTP (SPEC S5).

Stateless apart from its view of the agent's files, which it re-reads on
every tools/list and tools/call, so what is listed is always what the gate
lets through. A watcher re-computes the visible set every half second and
sends `notifications/tools/list_changed` (and publishes `ToolsListChanged`
for clients on the subscription-based protocol) only when the SET changes.

Long calls report to their caller (issue 16, `mcp_front.reporting`): progress for a
request that carries a progressToken, and corral's own events as log messages at or
above the level set with `logging/setLevel`.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_front.conversations import FrontConversations
from mcp_front.elicit import eliciting
from mcp_front.errors import INVALID_PARAMS, GateRefusal, call_outcome
from mcp_front.families.recording import SCHEME as RECORDING_SCHEME
from mcp_front.families.recording import read_recording, recording_get, recording_list
from mcp_front.families.script import run_execute_program
from mcp_front.forwarder import LEASE_TIMEOUT, forward, gateway_client, lease_conversations
from mcp_front.gateway_http import GatewayHttp
from mcp_front.links import KEEP_SECONDS, ImageLinks, linked, read_result
from mcp_front.reporting import LogLevels, McpCallEvents, session_key
from mcp_front.tool_log import ToolCallLog
from mcp_front.tools import tool as _tool
from orchestrator.agents.view import view_of
from orchestrator.audit import AuditLog
from orchestrator.config import McpConfig
from orchestrator.config.cached import CONFIGS
from orchestrator.errors import AuditUnavailable, ConfigError, NotAvailable, RecordingError
from orchestrator.gateway.wire import gateway_base_url
from orchestrator.home import CorralHome
from orchestrator.runtime import Runtime, open_runtime
from orchestrator.surfaces.conversations import LEASE_EVERY_SECONDS
from sandboxes.catalogue import (
    BY_NAME,
    GATEWAY_TOOLS,
    RECORDING_TOOLS,
    ToolSpec,
)
from sandboxes.events import CallEvents
from sandboxes.heartbeat import heartbeat
from sandboxes.params import validate
from sandboxes.visibility import decide, permission_refusal, visible_names, visible_tools

logger = logging.getLogger("corral.mcp")

WATCH_INTERVAL_SECONDS = 0.5
NOTIFICATIONS = NotificationOptions(tools_changed=True)


class _CorralServer(Server[dict[str, Any]]):
    """Declares tools.listChanged on every transport: the Streamable HTTP session manager
    calls create_initialization_options() without arguments, which would say false."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NOTIFICATIONS, experimental_capabilities, extensions
        )


class CorralMCP:
    def __init__(self, home: CorralHome, agent: str) -> None:
        self.home = home
        self.agent = agent
        self.tool_log = ToolCallLog(home.tool_calls_file)
        self.audit = AuditLog(home.audit_file)
        self.bus = InMemorySubscriptionBus()
        self._sessions: set[ServerSession] = set()  # strong refs: notified from a task
        # The visible tool names as a client last learnt them (a tools/list answer, or a
        # list_changed sent); None until the first is known. The watch compares with this,
        # so an edit made before the watch's own first read is still notified.
        self._known: frozenset[str] | None = None
        self._runtime: Runtime | None = None
        self._http: GatewayHttp | None = None  # one client for every forwarded call
        self.levels = LogLevels()
        self.links = ImageLinks()  # large images, served to the conversation that made them
        self.conversations = FrontConversations()  # each MCP session's, for its rigs
        # The logging capability is deprecated from protocol 2026-07-28 on (the SDK warns
        # when a handler is registered); clients of the handshake era still use it.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            self.server = _CorralServer(
                "corral",
                version="0.1.0",
                instructions="corral runs your scripts in a locked-down sandbox. "
                "Tools appear and disappear as an operator changes what you may do.",
                lifespan=self._lifespan,
                on_list_tools=self._list_tools,
                on_call_tool=self._call_tool,
                on_set_logging_level=self._set_logging_level,
                on_list_resources=self._list_resources,
                on_read_resource=self._read_resource,
                on_subscriptions_listen=ListenHandler(self.bus),
            )

    # ----------------------------------------------------------------- lifespan
    @asynccontextmanager
    async def _lifespan(self, _: Server[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
        async with (
            open_runtime(self.home, warm=True) as runtime,
            gateway_client() as http,
            anyio.create_task_group() as tg,
        ):
            self._runtime = runtime
            self._http = http
            tg.start_soon(self._watch)
            tg.start_soon(self._keep_conversations, http)
            try:
                yield {}
            finally:
                tg.cancel_scope.cancel()
                with anyio.CancelScope(shield=True), anyio.move_on_after(LEASE_TIMEOUT):
                    await self._lease(http, [], self.conversations.all())  # all ended
                self._runtime = None
                self._http = None

    async def _watch(self) -> None:
        while True:
            current = frozenset(visible_names(await view_of(self.home, self.agent)))
            if self._known is None:
                self._known = current
            elif current != self._known:
                self._known = current
                await self._notify_list_changed()
            await anyio.sleep(WATCH_INTERVAL_SECONDS)

    async def _keep_conversations(self, http: GatewayHttp) -> None:
        """Tell the gateway every second which conversations are live and which ended (an
        HTTP session deleted or expired): their rigs end with them."""
        while True:
            live, ended = self.conversations.lease(self._http_sessions())
            await self._lease(http, live, ended)
            await anyio.sleep(LEASE_EVERY_SECONDS)

    def _http_sessions(self) -> set[str] | None:
        """The Streamable HTTP sessions open now; None over stdio. (The SDK keeps them in
        its session manager, which has no public listing: should that change, every
        session known is taken as open, so no live session's rigs are ended; then they
        end with the process.)"""
        manager = getattr(self.server, "_session_manager", None)
        if manager is None:
            return None
        instances = getattr(manager, "_server_instances", None)
        return set(self.conversations.sessions() if instances is None else instances)

    async def _lease(self, http: GatewayHttp, live: list[str], ended: list[str]) -> None:
        try:
            gateway = CONFIGS.get(self.home.config_file).gateway
        except ConfigError:
            return
        url = gateway_base_url(gateway.host, gateway.port)
        await lease_conversations(self.home, url, self.agent, live, ended, http)

    async def _notify_list_changed(self) -> None:
        for session in list(self._sessions):
            try:
                await session.send_tool_list_changed()
            except Exception:  # the client went away: forget it
                self._sessions.discard(session)
        await self.bus.publish(ToolsListChanged())

    def _remember(self, ctx: Any) -> None:
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self._sessions.add(ctx.session)

    # ----------------------------------------------------------------- handlers
    async def _set_logging_level(
        self, ctx: Any, params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        self.levels.set(session_key(ctx), params.level)
        return types.EmptyResult()

    async def _list_tools(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self._remember(ctx)
        view = await view_of(self.home, self.agent)
        if self._known is None:
            self._known = frozenset(visible_names(view))  # what this client now knows
        return types.ListToolsResult(tools=[_tool(spec) for spec in visible_tools(view)])

    async def _call_tool(
        self, ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        self._remember(ctx)
        started = time.monotonic()
        name = params.name
        arg_names = list((params.arguments or {}).keys())

        def log(decision: Any, code: int | None = None, reason: str = "") -> None:
            self.tool_log.record(
                agent=self.agent,
                tool=name,
                decision=decision,
                duration_ms=int((time.monotonic() - started) * 1000),
                arg_names=arg_names,
                code=code,
                reason=reason,
            )

        spec = BY_NAME.get(name)
        if spec is None:
            log("refused", INVALID_PARAMS, "unknown tool")
            raise GateRefusal(f"Unknown tool: {name}", code=INVALID_PARAMS)
        view = await view_of(self.home, self.agent)
        decision = decide(spec, view)
        if not decision.visible:
            log("refused", -32003, decision.message)
            raise GateRefusal(decision.message)
        refusal = permission_refusal(spec, view)
        if refusal is not None:
            refusal = self._audit_refusal(name, refusal)
            log("refused", -32003, refusal)
            raise GateRefusal(refusal)
        try:
            # Progress at least every few seconds, whatever the call waits for (issue 25).
            async with heartbeat(McpCallEvents(ctx, self.levels), name) as events:
                result = await self._dispatch(ctx, spec, params.arguments, events)
        except BaseException as exc:
            if isinstance(exc, anyio.get_cancelled_exc_class()):
                log("error", reason="cancelled")
                raise
            try:
                result = call_outcome(name, exc)
            except GateRefusal:
                log("refused", -32003)
                raise
        log("error" if result.is_error else "allowed")
        return await self._linked(ctx, result)

    async def _linked(self, ctx: Any, result: types.CallToolResult) -> types.CallToolResult:
        """Images over `[mcp] inline_image_max_bytes` as resource links of this conversation."""
        if not any(isinstance(block, types.ImageContent) for block in result.content):
            return result
        try:
            limit = CONFIGS.get(self.home.config_file).mcp.inline_image_max_bytes
        except ConfigError:  # the tool's own answer said what it could; keep the default
            limit = McpConfig().inline_image_max_bytes
        conversation = session_key(ctx)
        return linked(
            result,
            limit,
            lambda data, mime: self.links.put(conversation, data, mime),
        )

    async def _list_resources(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        """This conversation's kept images (nothing else is a resource)."""
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=uri, name=uri.rsplit("/", 1)[-1], mime_type=k.mime_type, size=len(k.data)
                )
                for uri, k in self.links.listed(session_key(ctx))
            ]
        )

    def _recording(self, tool: str, params: Any) -> types.CallToolResult:
        if tool == "recording_list":
            return recording_list(self.home, self.agent)
        return recording_get(self.home, self.agent, params, self.audit)

    async def _read_resource(
        self, ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri.startswith(RECORDING_SCHEME):  # while the family still shows its tools
            view = await view_of(self.home, self.agent)
            if not decide(BY_NAME["recording_get"], view).visible:
                raise GateRefusal(f"Resource not found: {uri}", code=INVALID_PARAMS)
            try:
                return await anyio.to_thread.run_sync(
                    read_recording, self.home, self.agent, uri, self.audit
                )
            except RecordingError as exc:
                raise GateRefusal(str(exc), code=INVALID_PARAMS) from exc
        kept = self.links.get(session_key(ctx), str(params.uri))
        if kept is None:
            raise GateRefusal(
                f"Resource not found: {params.uri} (an image is kept {KEEP_SECONDS:.0f} s, "
                "for the conversation that made it only)",
                code=INVALID_PARAMS,
            )
        return read_result(str(params.uri), kept)

    def _audit_refusal(self, tool: str, refusal: str) -> str:
        """Audit a [permissions] refusal; the refusal's message, saying so when the audit
        cannot hold it (the call is refused all the same)."""
        try:
            self.audit.record("permission_denied", self.agent, {"tool": tool, "reason": refusal})
        except AuditUnavailable as exc:
            return f"{refusal} (This refusal is not on record. {exc})"
        return refusal

    async def _dispatch(
        self, ctx: Any, spec: ToolSpec, arguments: dict[str, Any] | None, events: CallEvents
    ) -> types.CallToolResult:
        params = validate(spec.params, arguments)
        if spec.name.startswith("computer_") or spec.name in GATEWAY_TOOLS:
            # The gateway owns sessions and performs every check; re-read its address per call.
            gateway = CONFIGS.get(self.home.config_file).gateway
            url = gateway_base_url(gateway.host, gateway.port)
            async with eliciting(events, ctx, url) as told:  # a held call's approval page
                return await forward(
                    self.home,
                    url,
                    self.agent,
                    spec.name,
                    params.model_dump(mode="json"),
                    client=self._http,
                    events=told,
                    conversation=self.conversations.of(session_key(ctx)),
                )
        if spec.name in RECORDING_TOOLS:
            return await anyio.to_thread.run_sync(self._recording, spec.name, params)
        assert self._runtime is not None, "the server lifespan opens the runtime"
        if spec.name == "execute_program":
            return await run_execute_program(params, self._runtime, self.agent, events)
        raise NotAvailable(f"{spec.name} has no handler in this version of corral")


async def serve_stdio(home: CorralHome, agent: str) -> None:
    from mcp.server.stdio import stdio_server

    from mcp_front.stdio import claimed_stdio

    app = CorralMCP(home, agent)
    with claimed_stdio() as wire:
        # Pipes or sockets: read and written on the loop (mcp_front.stdio); else the
        # SDK's own streams. The SDK iterates `stdin`'s lines and awaits `stdout.write`
        # and `flush`, which is what the two objects do.
        streams = {} if wire is None else {"stdin": wire[0], "stdout": wire[1]}
        async with stdio_server(**streams) as (read, write):  # type: ignore[arg-type]
            options = app.server.create_initialization_options(NOTIFICATIONS)
            await app.server.run(read, write, options)


async def serve_http(home: CorralHome, agent: str, port: int, ready: Any = None) -> None:
    import uvicorn

    from mcp_front.event_store import RETRY_MILLISECONDS, BoundedEventStore
    from mcp_front.http_auth import BearerAuth
    from orchestrator.agents.tokens import load_or_create_token

    token = load_or_create_token(home, agent)  # before anything listens
    app = CorralMCP(home, agent)
    # An event store makes every POST stream start with a priming event and a `retry`
    # hint, and lets a client resume a broken stream with Last-Event-ID (SEP-1699).
    starlette_app = app.server.streamable_http_app(
        host="127.0.0.1", event_store=BoundedEventStore(), retry_interval=RETRY_MILLISECONDS
    )
    authed = BearerAuth(starlette_app, token=token, agent=agent, audit=app.audit)
    config = uvicorn.Config(
        authed,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
        proxy_headers=False,  # the peer is the socket's; no header can claim another
        # On SIGTERM, in-flight calls get 5 s, then they are cancelled (their containers
        # removed) instead of holding the process until a long script ends.
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    await server.serve()
