"""The Docker engine stopped and started under a running `corral mcp` (its own warm pool
of script containers included): while it is down the agent's call names the engine and
the fix, and once it is back scripts run again without restarting corral. On a private
dockerd (tests/faults/engine.py), so the engine every other test uses is never stopped."""

from __future__ import annotations

from typing import Any

import anyio
import docker
import mcp_types as types
import pytest

from orchestrator.home import CorralHome
from tests.e2e.conftest import McpHarness, connect
from tests.faults import write_default_agent
from tests.faults.engine import private_engine
from tests.images import DEFAULT_SANDBOX_IMAGE, ENV

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

AGENT = "fk-engine"


async def execute(mcp: McpHarness, code: str) -> tuple[bool, str, dict[str, Any]]:
    result = await mcp.client.call_tool("execute_program", {"code": code})
    text = "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))
    return bool(result.is_error), text, dict(result.structured_content or {})


async def test_a_stopped_engine_is_named_and_scripts_run_again_once_it_is_back(
    tmp_path: Any,
) -> None:
    with private_engine() as engine:
        await anyio.to_thread.run_sync(engine.load, [DEFAULT_SANDBOX_IMAGE])
        home = CorralHome(root=tmp_path / "home", env=ENV)
        home.ensure()
        home.config_file.write_text(f'[container]\ndocker_host = "{engine.url}"\n')
        write_default_agent(home, AGENT)

        async with connect(home, "stdio", agent=AGENT) as mcp:
            failed, text, data = await execute(mcp, "print(6 * 7)")
            assert not failed and data.get("exit_code") == 0 and "42" in text, text

            await anyio.to_thread.run_sync(engine.stop)
            failed, text, _ = await execute(mcp, "print(1)")
            assert failed, text
            assert engine.url in text and "does not answer" in text, text

            await anyio.to_thread.run_sync(engine.start)
            for round_ in range(3):  # the pool's members from before the stop are dead
                failed, text, data = await execute(mcp, f"print({round_} + 40)")
                assert not failed and f"{round_ + 40}" in text, (round_, text)
                assert data.get("exit_code") == 0, text

        client = docker.DockerClient(base_url=engine.url, version="1.41")
        try:
            managed = {"label": ["corral.managed=true"]}
            assert client.containers.list(ignore_removed=True, all=True, filters=managed) == []
        finally:
            client.close()
