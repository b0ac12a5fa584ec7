"""`corral mcp --http` streams (SEP-1699), read as raw HTTP: a POST stream of a 2025-11-25
request opens with a priming event (an id, empty data, a retry hint), and a client whose
stream broke resumes it with Last-Event-ID and gets the answer it missed."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest

from mcp_front.event_store import RETRY_MILLISECONDS
from orchestrator.agents.tokens import load_or_create_token
from orchestrator.home import CorralHome
from tests.e2e.conftest import AGENT, serve_http

pytestmark = pytest.mark.anyio

VERSION = "2025-11-25"


def sse_events(text: str) -> list[dict[str, str]]:
    """The events of an SSE body: each a dict of its fields (data lines joined)."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            fields[name] = fields[name] + "\n" + value if name in fields else value
        if fields:
            events.append(fields)
    return events


async def test_a_post_stream_is_primed_with_a_retry_hint_and_resumes_after_a_break(
    agent_home: CorralHome,
) -> None:
    token = load_or_create_token(agent_home, AGENT)
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }

    def rpc(ident: int | None, method: str, params: dict[str, Any] | None = None) -> bytes:
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if ident is not None:
            body["id"] = ident
        if params is not None:
            body["params"] = params
        return json.dumps(body).encode()

    async with serve_http(agent_home) as (url, _pid), httpx.AsyncClient(timeout=30) as http:
        hello = await http.post(
            url,
            headers=headers,
            content=rpc(
                1,
                "initialize",
                {
                    "protocolVersion": VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            ),
        )
        assert hello.status_code == 200
        session = {"mcp-session-id": hello.headers["mcp-session-id"]}
        versioned = {**headers, **session, "mcp-protocol-version": VERSION}
        ok = await http.post(url, headers=versioned, content=rpc(None, "notifications/initialized"))
        assert ok.status_code == 202

        listed = await http.post(url, headers=versioned, content=rpc(2, "tools/list", {}))
        assert listed.headers["content-type"].startswith("text/event-stream")
        events = sse_events(listed.text)
        priming = events[0]
        assert priming["id"] and priming.get("data", "") == ""
        assert priming["retry"] == str(RETRY_MILLISECONDS)
        answer = json.loads(events[-1]["data"])
        assert answer["id"] == 2 and answer["result"]["tools"][0]["name"] == "execute_program"

        # As if the stream had broken right after its priming event: resume from there.
        resumed: list[dict[str, Any]] = []
        with anyio.fail_after(15):
            async with http.stream(
                "GET",
                url,
                headers={
                    **versioned,
                    "Accept": "text/event-stream",
                    "Last-Event-ID": priming["id"],
                },
            ) as replay:
                assert replay.status_code == 200
                buffer = ""
                async for chunk in replay.aiter_text():
                    buffer += chunk
                    resumed = [json.loads(e["data"]) for e in sse_events(buffer) if e.get("data")]
                    if any(message.get("id") == 2 for message in resumed):
                        break
        assert [m for m in resumed if m.get("id") == 2] == [answer]
