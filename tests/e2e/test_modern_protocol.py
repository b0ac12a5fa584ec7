"""Clients on the 2026-07-28 protocol learn of list changes through `subscriptions/listen`
(SPEC S5.3 for the newest revision), over stdio and Streamable HTTP."""

from __future__ import annotations

import anyio
import pytest
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from orchestrator.home import CorralHome
from tests.e2e.conftest import connect, set_agent

pytestmark = pytest.mark.anyio


async def test_a_modern_client_gets_tools_list_changed_on_its_listen_stream(
    agent_home: CorralHome, transport: str
) -> None:
    async with connect(agent_home, transport, mode="auto") as mcp:
        assert mcp.client.session.protocol_version in MODERN_PROTOCOL_VERSIONS  # type: ignore[union-attr]
        assert await mcp.tool_names() == {"execute_program"}
        async with mcp.client.listen(tools_list_changed=True) as sub:
            set_agent(agent_home, codrive=True)
            with anyio.fail_after(5):
                event = await sub.__anext__()
        assert type(event).__name__ == "ToolsListChanged"
        assert await mcp.tool_names() == {"execute_program", "codrive_run", "codrive_status"}
