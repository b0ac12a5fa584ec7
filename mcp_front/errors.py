"""Mapping our errors to MCP answers, in exactly one place (`call_outcome`).

recoverable (bad arguments, sandbox unavailable, not in this version, engine)
    -> a CallToolResult with is_error=True and a clear message
gate refusals (hidden tool, [permissions] flag)
    -> JSON-RPC error PERMISSION_DENIED (-32003), the gate's own message
unknown tool
    -> JSON-RPC error INVALID_PARAMS (-32602), as the MCP spec says
anything unexpected
    -> logged with an incident id, answered without internals
"""

from __future__ import annotations

import logging
import uuid

import mcp_types as types
from mcp.shared.exceptions import MCPError

from orchestrator.errors import CorralError, ParamError

PERMISSION_DENIED = -32003
INVALID_PARAMS = -32602

logger = logging.getLogger("corral.mcp")


class GateRefusal(MCPError):
    """The dispatch gate refused the call. Carries the gate's own message."""

    def __init__(self, message: str, code: int = PERMISSION_DENIED) -> None:
        super().__init__(code, message)
        self.gate_message = message


def error_result(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def call_outcome(tool: str, exc: BaseException) -> types.CallToolResult:
    """Turn an exception from a tool call into the result the client sees (never raises
    for recoverable errors; re-raises gate refusals so they travel as JSON-RPC errors)."""
    if isinstance(exc, MCPError):
        raise exc
    if isinstance(exc, ParamError):
        return error_result(f"Invalid arguments for {tool}: {exc}")
    if isinstance(exc, CorralError):
        return error_result(str(exc))
    incident = uuid.uuid4().hex[:8]
    logger.error("tool %s failed (incident %s)", tool, incident, exc_info=exc)
    return error_result(
        f"{tool} failed with an internal error (incident {incident}); the details are in "
        "the corral MCP server's log."
    )
