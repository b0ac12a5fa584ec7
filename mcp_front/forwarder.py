"""The thin signed forwarder for computer_* tools (SPEC S2.2).

The MCP server does no kiosk work itself: it signs the call with its own agent's channel
key (CORRAL_HOME/channel/AGENT.key; it loads no other agent's key, and the gateway
checks the key against the agent the body names) and POSTs it to the gateway on loopback, then turns
the gateway's answer into a CallToolResult. Every failure on the way is a
recoverable tool error (is_error=True) with a message that says what to do;
`forward` raises only on a programming error (arguments that are not JSON).

It asks for the streamed answer (`"stream": true`): the gateway's progress and log
events for the call arrive as NDJSON lines before the result and are handed to
`events` as they come (orchestrator.gateway.call_stream).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
from pydantic import ValidationError

from mcp_front.gateway_http import (
    GatewayHttp,
    GatewayHttpError,
    GatewayTimeout,
    GatewayUnreachable,
    Reply,
)
from orchestrator.errors import KeyFileError
from orchestrator.gateway.signing import load_or_create_key, new_nonce, sign
from orchestrator.gateway.wire import (
    CALL_EVENT_LINE,
    COMPUTER_USE_PATH,
    CONVERSATIONS_PATH,
    EVENTS_MEDIA_TYPE,
    ComputerUseAnswer,
    ErrorLine,
    ImageBlock,
    LogLine,
    ProgressLine,
    TextBlock,
    gateway_base_url,
)
from orchestrator.home import CorralHome
from sandboxes.events import NO_EVENTS, CallEvents

__all__ = [
    "forward",
    "gateway_base_url",
    "gateway_client",
    "lease_conversations",
    "not_running_message",
    "to_result",
]

TIMEOUT_SECONDS = 120.0
CONNECT_TIMEOUT_SECONDS = 5.0
LEASE_TIMEOUT = 2.0
DRAIN_SECONDS = 1.0  # for the end of an answer after its result line
MAX_LINE_BYTES = 64 * 1024 * 1024  # one event line (a result with a screenshot is < 16 MiB)
UNREADABLE = (
    "corral gateway sent an answer this MCP server cannot read; are `corral gateway` "
    "and `corral mcp` the same version?"
)


def not_running_message(url: str) -> str:
    return f"corral gateway is not running at {url}; start it with `corral gateway`"


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def _refusal_reason(status: int, content: bytes) -> str:
    try:
        data = json.loads(content)
    except ValueError:
        return f"HTTP {status}"
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return str(data["error"])
    return f"HTTP {status}"


def to_result(answer: ComputerUseAnswer) -> types.CallToolResult:
    blocks: list[types.ContentBlock] = []
    for block in answer.content:
        if isinstance(block, TextBlock):
            blocks.append(types.TextContent(text=block.text))
        elif isinstance(block, ImageBlock):
            blocks.append(types.ImageContent(data=block.data, mime_type=block.mime_type))
    return types.CallToolResult(
        content=blocks, structured_content=answer.structured, is_error=answer.is_error
    )


def gateway_client() -> GatewayHttp:
    """The front's client for the loopback gateway (`mcp_front.gateway_http`: plain
    HTTP/1.1, connections kept between calls; no proxy from the environment is used)."""
    return GatewayHttp(CONNECT_TIMEOUT_SECONDS)


async def forward(
    home: CorralHome,
    gateway_url: str,
    agent: str,
    tool: str,
    arguments: dict[str, Any],
    *,
    timeout_seconds: float = TIMEOUT_SECONDS,
    client: GatewayHttp | None = None,
    events: CallEvents = NO_EVENTS,
    conversation: str = "",
) -> types.CallToolResult:
    """Sign and send one computer_* call to the gateway; its answer as a CallToolResult.
    The call's progress and log events go to `events` while it runs.

    Pass a long-lived `client` (see `gateway_client`): its connection is kept for the next
    call (a new one per call costs a TCP connect). `timeout_seconds` bounds the wait for
    each piece of the answer (the gateway's next event or result)."""
    call = {"agent": agent, "tool": tool, "arguments": arguments, "stream": True}
    if conversation:
        call["conversation"] = conversation
    body = json.dumps(call, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    try:
        headers = _signed(home, agent, COMPUTER_USE_PATH, body)
    except (KeyFileError, ValueError) as exc:  # ValueError: not an agent's name
        return _error(f"corral cannot sign the request to the gateway: {exc}")
    headers["Accept"] = f"{EVENTS_MEDIA_TYPE}, application/json"
    url = gateway_url.rstrip("/") + COMPUTER_USE_PATH
    try:
        if client is not None:
            return await _exchange(client, url, body, headers, timeout_seconds, tool, events)
        async with gateway_client() as own:
            return await _exchange(own, url, body, headers, timeout_seconds, tool, events)
    except GatewayUnreachable:
        return _error(not_running_message(gateway_url))
    except GatewayTimeout:
        return _error(
            f"corral gateway at {gateway_url} did not answer {tool} within {timeout_seconds:g} s"
        )
    except GatewayHttpError as exc:
        return _error(f"corral gateway at {gateway_url} failed: {exc}")


def _signed(home: CorralHome, agent: str, path: str, body: bytes) -> dict[str, str]:
    """Headers signing `body` for `path` with the agent's channel key (read per request,
    so a rotation takes effect at once). Read on the event loop, as the gateway reads it:
    one open, fstat and read of a 64-byte local file costs microseconds, a worker thread's
    round trip costs more (issue 23 item 9)."""
    key = load_or_create_key(home, agent)
    headers = sign(key, "POST", path, body, now=time.time(), nonce=new_nonce())
    headers["Content-Type"] = "application/json"
    return headers


async def lease_conversations(
    home: CorralHome,
    gateway_url: str,
    agent: str,
    live: list[str],
    ended: list[str],
    client: GatewayHttp,
) -> bool:
    """Tell the gateway which of the agent's conversations this front still serves and
    which ended (orchestrator.surfaces.conversations); whether it took it. Never raises:
    a gateway that is not running has no rigs to end."""
    body = json.dumps({"agent": agent, "live": live, "ended": ended}).encode()
    try:
        headers = _signed(home, agent, CONVERSATIONS_PATH, body)
        url = gateway_url.rstrip("/") + CONVERSATIONS_PATH
        async with client.post(url, body, headers, LEASE_TIMEOUT) as reply:
            await reply.read()
    except (KeyFileError, ValueError, GatewayHttpError):
        return False
    return reply.status == 200


async def _exchange(
    client: GatewayHttp,
    url: str,
    body: bytes,
    headers: dict[str, str],
    piece_s: float,
    tool: str,
    events: CallEvents,
) -> types.CallToolResult:
    async with client.post(url, body, headers, piece_s) as reply:
        streamed = reply.headers.get("content-type", "").startswith(EVENTS_MEDIA_TYPE)
        if streamed and reply.status == 200:
            return await _read_events(reply, tool, events)
        content = await reply.read()
    if reply.status in (401, 403):
        return _error(
            f"corral gateway refused the request: {_refusal_reason(reply.status, content)}"
        )
    if reply.status != 200:
        return _error(
            f"corral gateway could not run {tool} (HTTP {reply.status}): "
            f"{_refusal_reason(reply.status, content)}"
        )
    try:
        answer = ComputerUseAnswer.model_validate_json(content)
    except ValidationError:
        return _error(UNREADABLE)
    return to_result(answer)


async def _read_events(reply: Reply, tool: str, events: CallEvents) -> types.CallToolResult:
    """Hand each progress/log line to `events`; the result line is the answer."""
    buffer = bytearray()
    scanned = 0  # bytes of the buffer already searched for a line end (a result is MBs)
    chunks = reply.chunks()
    async for chunk in chunks:
        buffer += chunk
        while (end := buffer.find(b"\n", scanned)) >= 0:
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            scanned = 0
            if not line.strip():
                continue
            try:
                event = CALL_EVENT_LINE.validate_json(line)
            except ValidationError:
                return _error(UNREADABLE)
            if isinstance(event, ProgressLine):
                await events.progress(
                    event.phase, event.message, remaining=event.remaining, output=event.output
                )
            elif isinstance(event, LogLine):
                await events.log(event.level, event.event, event.details)
            elif isinstance(event, ErrorLine):
                return _error(f"corral gateway could not run {tool}: {event.error}")
            else:
                await _drain(chunks)
                return to_result(event.answer)
        scanned = len(buffer)
        if scanned > MAX_LINE_BYTES:
            return _error(UNREADABLE)
    return _error(f"corral gateway ended its answer to {tool} without a result")


async def _drain(chunks: AsyncIterator[bytes]) -> None:
    """Read the answer to its end (the gateway ends it right after the result line), so the
    connection goes back to the client's pool: a response closed before its end closes its
    connection, and the next call would open a new one (issue 23 item 9). A gateway that
    does not end it at once costs `DRAIN_SECONDS`, then the connection is closed."""
    with anyio.move_on_after(DRAIN_SECONDS):
        async for _ in chunks:
            pass
