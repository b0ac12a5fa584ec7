"""`corral mcp --http` answers only requests with the agent's bearer token: a request
without it, or with another agent's, gets 401 before the MCP layer parses anything,
and is audited. The token comes from `corral mcp --agent NAME --http --show-token`."""

from __future__ import annotations

import stat
import subprocess

import httpx
import pytest

from orchestrator.agents.tokens import load_or_create_token, token_path
from orchestrator.audit import AuditLog
from orchestrator.home import CorralHome
from tests.e2e.conftest import AGENT, connect, serve_http
from tests.helpers import corral_bin, env_with_home

pytestmark = pytest.mark.anyio

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream"}


def show_token(home: CorralHome, agent: str = AGENT) -> str:
    done = subprocess.run(
        [corral_bin(), "mcp", "--agent", agent, "--http", "--show-token"],
        env=env_with_home(home),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


async def test_show_token_prints_the_token_the_server_checks(agent_home: CorralHome) -> None:
    token = show_token(agent_home)

    assert token == load_or_create_token(agent_home, AGENT) and len(token) == 64
    path = token_path(agent_home, AGENT)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    async with serve_http(agent_home) as (url, _pid), httpx.AsyncClient() as client:
        good = await client.post(
            url, json=INITIALIZE, headers={**HEADERS, "Authorization": f"Bearer {token}"}
        )
    assert good.status_code == 200


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer", "Bearer 0000", "Basic YWxpY2U6eA==", "bearer-{token}", "Bearer {other}"],
)
async def test_without_the_agents_token_every_request_is_401_and_audited(
    agent_home: CorralHome, authorization: str | None
) -> None:
    token = load_or_create_token(agent_home, AGENT)
    other = load_or_create_token(agent_home, "someone-else")
    headers = dict(HEADERS)
    if authorization is not None:
        headers["Authorization"] = authorization.format(token=token, other=other)
    async with serve_http(agent_home) as (url, _pid), httpx.AsyncClient() as client:
        refused = await client.post(url, json=INITIALIZE, headers=headers)
        # Not even parsed: a body that is not JSON-RPC gets the same 401, not a 400.
        garbage = await client.post(url, content=b"\x00not json", headers=headers)
        listing = await client.get(url, headers=headers)

    for response in (refused, garbage, listing):
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
    events = [e for e in AuditLog(agent_home.audit_file).read() if e["event"] == "mcp_http_refused"]
    assert len(events) == 3 and all(e["agent"] == AGENT for e in events)


async def test_a_real_client_with_the_token_works_over_http(agent_home: CorralHome) -> None:
    async with connect(agent_home, "http") as mcp:
        assert "execute_program" in await mcp.tool_names()
