"""A second, independent MCP client: the 1.x SDK, run by `.venv-mcp1/bin/python`.

Usage: mcp1_client.py stdio COMMAND ARG... | mcp1_client.py http URL TOKEN
Lists the tools, calls execute_program once, prints one JSON object.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client


async def exercise(session: ClientSession) -> dict:
    init = await session.initialize()
    tools = await session.list_tools()
    result = await session.call_tool("execute_program", {"code": "print(6 * 7)"})
    return {
        "protocol": init.protocolVersion,
        "list_changed": bool(init.capabilities.tools and init.capabilities.tools.listChanged),
        "tools": sorted(t.name for t in tools.tools),
        "is_error": result.isError,
        "text": result.content[0].text,
        "structured": result.structuredContent,
    }


async def main() -> None:
    kind, *rest = sys.argv[1:]
    if kind == "stdio":
        params = StdioServerParameters(command=rest[0], args=rest[1:], env=dict(os.environ))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            out = await exercise(session)
    else:
        async with (
            streamablehttp_client(rest[0], headers={"Authorization": f"Bearer {rest[1]}"}) as (
                read,
                write,
                _,
            ),
            ClientSession(read, write) as session,
        ):
            out = await exercise(session)
    print(json.dumps(out))


asyncio.run(main())
