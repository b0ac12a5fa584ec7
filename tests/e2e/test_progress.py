"""Issue 16 through the SDK's real client, over stdio and Streamable HTTP, on the handshake
protocol (2025-11-25, "legacy") and on 2026-07-28 ("auto"): a script that runs for 3 seconds
reports its progress with its output lines in order and nothing after its result; corral's
log messages honour the level the client set (`logging/setLevel`, or the per-request
opt-in of 2026-07-28)."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import LOG_LEVEL_META_KEY

from orchestrator.agents.tokens import load_or_create_token
from orchestrator.home import CorralHome
from sandboxes.events import PROGRESS_INTERVAL_SECONDS
from tests.e2e.conftest import AGENT, serve_http
from tests.helpers import corral_bin, env_with_home

pytestmark = pytest.mark.anyio

# Six lines over three seconds, the last one written just before the script ends.
THREE_SECONDS = """
import time
for n in range(6):
    print(f"tick {n}", flush=True)
    time.sleep(0.5)
"""
TICKS = [f"tick {n}" for n in range(6)]


@dataclass
class Heard:
    progress: list[tuple[float, float | None, str]] = field(default_factory=list)
    notes: list[Any] = field(default_factory=list)  # every notification, as it arrives
    logs: list[types.LoggingMessageNotificationParams] = field(default_factory=list)

    def progress_notes(self) -> int:
        return sum(isinstance(n, types.ProgressNotification) for n in self.notes)


@pytest.fixture(params=["legacy", "auto"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@asynccontextmanager
async def client(
    home: CorralHome, transport: str, mode: str = "legacy"
) -> AsyncIterator[tuple[Client, Heard]]:
    heard = Heard()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification | types.ProgressNotification):
            heard.notes.append(message)

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        heard.logs.append(params)

    options: dict[str, Any] = {
        "message_handler": on_message,
        "logging_callback": on_log,
        "mode": mode,
    }
    if transport == "stdio":
        params = StdioServerParameters(
            command=corral_bin(), args=["mcp", "--agent", AGENT], env=env_with_home(home)
        )
        async with Client(params, **options) as mcp:
            yield mcp, heard
    else:
        bearer = {"Authorization": f"Bearer {load_or_create_token(home, AGENT)}"}
        async with (
            serve_http(home) as (url, _pid),
            create_mcp_http_client(headers=bearer) as http,
            Client(streamable_http_client(url, http_client=http), **options) as mcp,
        ):
            yield mcp, heard


async def set_level(mcp: Client, level: types.LoggingLevel) -> None:
    # logging/setLevel is deprecated from protocol 2026-07-28 on; these clients speak 2025-11-25.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        await mcp.set_logging_level(level)


def output_lines(message: str) -> list[str]:
    """The script's lines in a progress message (its first line is the phase's)."""
    return [line for line in message.splitlines()[1:] if not line.startswith("[... ")]


async def test_a_3_second_script_reports_progress_with_its_output_in_order(
    agent_home: CorralHome, transport: str, mode: str
) -> None:
    async with client(agent_home, transport, mode) as (mcp, heard):
        seen: list[tuple[float, float | None, str]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total, message or ""))

        result = await mcp.call_tool(
            "execute_program",
            {"code": THREE_SECONDS, "timeout_seconds": 20},
            progress_callback=on_progress,
        )
        at_result = heard.progress_notes()

        assert result.is_error is False, result.content
        assert result.structured_content is not None
        assert result.structured_content["output"] == "".join(f"{t}\n" for t in TICKS)
        running = [s for s in seen if s[2].startswith("running: ")]
        assert len(running) >= 3, seen
        values = [s[0] for s in seen]
        assert values == sorted(values) and len(set(values)) == len(values)  # only grows
        assert all(total is not None and total > value for value, total, _ in running)
        assert seen[0][2] == "waiting for a script slot"  # taken at once here
        assert seen[1][2] == "starting the script sandbox"
        assert seen[-1][2].startswith("exit code 0")
        streamed = [line for _, _, message in seen for line in output_lines(message)]
        assert streamed == TICKS  # every line once, in order, before the result
        assert at_result == len(seen)

        # Nothing after the result: a round trip, then a few reporting intervals of quiet (a
        # bounded look for something that must not happen, not a synchronisation).
        await mcp.list_tools()
        with anyio.move_on_after(4 * PROGRESS_INTERVAL_SECONDS):
            while heard.progress_notes() == at_result:
                await anyio.sleep(0.05)
        assert heard.progress_notes() == at_result


async def test_a_call_without_a_progress_token_gets_no_progress(
    agent_home: CorralHome, transport: str
) -> None:
    async with client(agent_home, transport) as (mcp, heard):
        result = await mcp.call_tool("execute_program", {"code": "print(1)"})

        assert result.is_error is False
        assert heard.progress_notes() == 0


async def test_log_messages_honour_the_level_set(agent_home: CorralHome, transport: str) -> None:
    async with client(agent_home, transport) as (mcp, heard):
        await set_level(mcp, "warning")
        quiet = await mcp.call_tool("execute_program", {"code": "print('quiet')"})
        assert quiet.is_error is False
        assert heard.logs == []  # sandbox_started is info: below warning

        await set_level(mcp, "info")
        loud = await mcp.call_tool("execute_program", {"code": "print('loud')"})
        assert loud.is_error is False
        assert [(log.level, log.logger, log.data["event"]) for log in heard.logs] == [
            ("info", "corral", "sandbox_started")
        ]
        assert heard.logs[0].data["kind"] == "script"
        assert "loud" not in str(heard.logs[0].data)


async def test_a_2026_client_gets_log_messages_only_at_the_level_it_opts_in_to(
    agent_home: CorralHome, transport: str
) -> None:
    async with client(agent_home, transport, "auto") as (mcp, heard):
        quiet = await mcp.call_tool(
            "execute_program", {"code": "print(1)"}, meta={LOG_LEVEL_META_KEY: "warning"}
        )
        assert quiet.is_error is False
        assert heard.logs == []

        loud = await mcp.call_tool(
            "execute_program", {"code": "print(2)"}, meta={LOG_LEVEL_META_KEY: "info"}
        )
        assert loud.is_error is False
        assert [log.data["event"] for log in heard.logs] == ["sandbox_started"]
