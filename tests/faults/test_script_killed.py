"""A script's container killed (SIGKILL) from outside while the script runs: the agent's
call answers at once with exit code 137 (not at the script's timeout), the run is audited
with that code, and nothing is left."""

from __future__ import annotations

from typing import Any

import anyio
import docker
import mcp_types as types
import pytest

from orchestrator.audit import AuditLog
from orchestrator.home import CorralHome
from tests.e2e.conftest import connect, wait_until
from tests.faults import write_default_agent

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TIMEOUT_S = 300  # the script's own limit: the answer must come long before it


async def test_a_killed_script_container_answers_137_at_once_and_leaves_nothing(
    corral_home: CorralHome, docker_client: docker.DockerClient
) -> None:
    agent = "fk-killed"
    write_default_agent(corral_home, agent)
    labels: dict[str, Any] = {"label": [f"corral.agent={agent}", "corral.kind=script"]}

    def running() -> list[Any]:
        return list(
            docker_client.containers.list(
                ignore_removed=True, filters={**labels, "status": "running"}
            )
        )

    code = "import time\nprint('working', flush=True)\nwhile True: time.sleep(1)"
    answers: list[types.CallToolResult] = []
    async with (
        connect(corral_home, "stdio", agent=agent) as mcp,
        anyio.create_task_group() as tg,
    ):

        async def run() -> None:
            args = {"code": code, "timeout_seconds": TIMEOUT_S}
            with anyio.fail_after(60):  # a safety net far below the script's own timeout
                answers.append(await mcp.client.call_tool("execute_program", args))

        tg.start_soon(run)
        (container,) = await wait_until(running, limit=60)
        container.kill()
    (answer,) = answers
    data = answer.structured_content or {}
    assert data.get("exit_code") == 137 and data.get("timed_out") is False, answer
    text = "\n".join(c.text for c in answer.content if isinstance(c, types.TextContent))
    assert "137" in text, text

    events = [e for e in AuditLog(corral_home.audit_file).read() if e.get("agent") == agent]
    (done,) = [e for e in events if e["event"] == "script_executed"]
    assert done["details"]["exit_code"] == 137, done
    everything = docker_client.containers.list(all=True, ignore_removed=True, filters=labels)
    assert everything == []
