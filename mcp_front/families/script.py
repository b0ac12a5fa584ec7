"""execute_program over MCP (SPEC S1.8): a text block plus structured content."""

from __future__ import annotations

import mcp_types as types
from pydantic import BaseModel

from orchestrator.runtime import Runtime
from sandboxes.events import CallEvents
from sandboxes.script import execute_program
from sandboxes.script_policy import ExecuteProgramParams


async def run_execute_program(
    params: BaseModel, runtime: Runtime, agent: str, events: CallEvents
) -> types.CallToolResult:
    """The script's phases, elapsed time and newest output lines go to `events` while it
    runs (`sandboxes.script.execute_program`); the whole output is in the result."""
    assert isinstance(params, ExecuteProgramParams)
    result = await execute_program(params, runtime.script_context(agent), events=events)
    return types.CallToolResult(
        content=[types.TextContent(text=result.to_text())],
        structured_content=result.structured(),
        is_error=False,
    )
