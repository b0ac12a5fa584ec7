"""End-to-end fixtures: the real `corral mcp` process, reached by the SDK's real client
over stdio or Streamable HTTP, running real containers."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from orchestrator.agents.tokens import load_or_create_token
from orchestrator.config import render_new_agent
from orchestrator.home import CorralHome
from tests.helpers import corral_bin, env_with_home, wait_until

__all__ = ["McpHarness", "wait_until"]

AGENT = "alice"


@pytest.fixture(scope="session", autouse=True)
def _no_leaks(no_container_left_behind: None) -> None:
    """Switches the root conftest's leak check on for this folder."""


@pytest.fixture
def agent_home(corral_home: CorralHome) -> CorralHome:
    path = corral_home.agent_file(AGENT)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_new_agent(AGENT))
    return corral_home


def set_agent(home: CorralHome, **capabilities: object) -> None:
    """Rewrite agent.toml with the given [capabilities] keys changed (via a temp + rename,
    as an editor would)."""
    text = render_new_agent(AGENT)
    for key, value in capabilities.items():
        rendered = str(value).lower() if isinstance(value, bool) else repr(value).replace("'", '"')
        lines = []
        for line in text.splitlines():
            if line.split("=")[0].strip() == key and "=" in line:
                line = f"{key} = {rendered}"
            lines.append(line)
        text = "\n".join(lines) + "\n"
    path = home.agent_file(AGENT)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class McpHarness:
    client: Client
    home: CorralHome
    transport: str
    list_changed: list[float] = field(default_factory=list)
    server_pid: int | None = None
    notes: list[Any] = field(default_factory=list)  # every server notification, in order

    async def tool_names(self) -> set[str]:
        return {t.name for t in (await self.client.list_tools()).tools}


@asynccontextmanager
async def serve_http(home: CorralHome, agent: str = AGENT) -> AsyncIterator[tuple[str, int]]:
    port = free_port()
    log = home.root / f"mcp-http-{port}.stderr"  # a file: a full pipe would block the server
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [corral_bin(), "mcp", "--agent", agent, "--http", "--port", str(port)],
            env=env_with_home(home),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:

        def listening() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"corral mcp --http exited: {log.read_text(errors='replace')}")
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        await wait_until(listening, limit=30)
        yield f"http://127.0.0.1:{port}/mcp", proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@asynccontextmanager
async def connect(
    home: CorralHome, transport: str, *, mode: str = "legacy", agent: str = AGENT
) -> AsyncIterator[McpHarness]:
    changes: list[float] = []
    notes: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changes.append(anyio.current_time())
        if not isinstance(message, Exception):
            notes.append(message)

    if transport == "stdio":
        params = StdioServerParameters(
            command=corral_bin(), args=["mcp", "--agent", agent], env=env_with_home(home)
        )
        async with Client(params, mode=mode, message_handler=on_message) as client:
            yield McpHarness(client, home, transport, changes, notes=notes)
    else:
        bearer = {"Authorization": f"Bearer {load_or_create_token(home, agent)}"}
        async with (
            serve_http(home, agent) as (url, pid),
            # A client we pass in is ours to close (the transport leaves it open).
            create_mcp_http_client(headers=bearer) as http,
            Client(
                streamable_http_client(url, http_client=http),
                mode=mode,
                message_handler=on_message,
            ) as client,
        ):
            yield McpHarness(client, home, transport, changes, server_pid=pid, notes=notes)


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


Predicate = Callable[[], Any]


def tool_calls(home: CorralHome) -> list[dict[str, Any]]:
    import json

    path: Path = home.tool_calls_file
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]
