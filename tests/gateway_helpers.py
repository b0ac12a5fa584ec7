"""The gateway's test handler and a gateway served on a real socket, for the channel tests
(tests/unit/test_gateway_channel.py, on loopback) and the peer test (tests/integration, on
the Docker bridge's address)."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import uvicorn
from starlette.types import ASGIApp

from orchestrator.audit import AuditLog
from orchestrator.gateway.app import serve_gateway
from orchestrator.gateway.signing import load_or_create_key, new_nonce, sign
from orchestrator.gateway.wire import COMPUTER_USE_PATH, gateway_base_url
from orchestrator.home import CorralHome
from orchestrator.surfaces.answers import Answer, answer, text_block
from sandboxes.events import NO_EVENTS, CallEvents

# The classic 1x1 PNG.
TINY_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5Erk"
    "Jggg=="
)
AGENT = "alice"  # the agent CALL names; `Gateway.key` is its channel key
CALL = {"agent": AGENT, "tool": "computer_click", "arguments": {"x": 10, "y": 20}}


@dataclass
class Recorder:
    """The gateway's handler in these tests: records each call, reports `progress` (phase,
    message) pairs and `logs` (level, event) through the call's events, echoes the call."""

    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    answer: Answer | None = None
    progress: list[tuple[str, str]] = field(default_factory=list)
    logs: list[tuple[Any, str]] = field(default_factory=list)
    conversations: list[str] = field(default_factory=list)  # each call's

    async def __call__(
        self,
        agent: str,
        tool: str,
        arguments: dict[str, Any],
        events: CallEvents = NO_EVENTS,
        conversation: str = "",
    ) -> Answer:
        self.calls.append((agent, tool, arguments))
        self.conversations.append(conversation)
        for phase, message in self.progress:
            await events.progress(phase, message, remaining=5.0)
        for level, event in self.logs:
            await events.log(level, event, {"tool": tool})
        if self.answer is not None:
            return self.answer
        echo = {"agent": agent, "tool": tool, "arguments": arguments}
        return answer(text_block(json.dumps(echo, sort_keys=True)), **echo)


@dataclass
class Gateway:
    url: str
    home: CorralHome
    handler: Recorder
    key: bytes

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, trust_env=False, timeout=30)

    def refusals(self) -> list[dict[str, Any]]:
        return [
            event["details"]
            for event in AuditLog(self.home.audit_file).read()
            if event["event"] == "internal_request_refused"
        ]


@asynccontextmanager
async def running_gateway(
    home: CorralHome, host: str, port: int, handler: Recorder
) -> AsyncIterator[Gateway]:
    ready = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(serve_gateway, home, host, port, handler, ready)
        with anyio.fail_after(15):
            await ready.wait()
        yield Gateway(gateway_base_url(host, port), home, handler, load_or_create_key(home, AGENT))
        tg.cancel_scope.cancel()


def encode(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


def signed_headers(key: bytes, body: bytes, *, now: float | None = None) -> dict[str, str]:
    headers = sign(
        key,
        "POST",
        COMPUTER_USE_PATH,
        body,
        now=time.time() if now is None else now,
        nonce=new_nonce(),
    )
    headers["Content-Type"] = "application/json"
    return headers


class _Uvicorn(uvicorn.Server):
    """uvicorn that says when it listens, and leaves the test process's signals alone."""

    def __init__(self, config: uvicorn.Config, ready: anyio.Event) -> None:
        super().__init__(config)
        self._ready = ready

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self._ready.set()


@asynccontextmanager
async def serving_asgi(app: ASGIApp) -> AsyncIterator[str]:
    """`app` served over real HTTP on a loopback port of its own; its base URL."""
    ready = anyio.Event()
    config = uvicorn.Config(app, log_level="warning", lifespan="off", http="httptools")
    server = _Uvicorn(config, ready)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            with anyio.fail_after(15):
                await ready.wait()
            try:
                yield f"http://127.0.0.1:{port}"
            finally:
                server.should_exit = True
                tg.cancel_scope.cancel()
