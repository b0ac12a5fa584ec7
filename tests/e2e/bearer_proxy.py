"""A loopback reverse proxy that adds `Authorization: Bearer <token>` to every request.

The official conformance suite's client (0.1.16) has no option to send a header, and
`corral mcp --http` answers 401 to a request without the agent's token. This proxy is
the suite's way in: it passes method, path, query, body and every header through
unchanged (Host and Origin included, so corral's own DNS-rebinding check is what the
suite tests), adds the token, and streams the answer back as it comes (SSE included).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx
import uvicorn
from starlette.types import Receive, Scope, Send

HOP_BY_HOP = {b"connection", b"keep-alive", b"transfer-encoding", b"te", b"upgrade"}


class BearerProxy:
    def __init__(self, upstream: str, token: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.token = token
        self.client = httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(60, read=None))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [
            (name, value)
            for name, value in scope["headers"]
            if name.lower() not in HOP_BY_HOP | {b"authorization", b"content-length"}
        ]
        headers.append((b"authorization", f"Bearer {self.token}".encode()))
        query = scope.get("query_string", b"").decode()
        url = self.upstream + scope["path"] + (f"?{query}" if query else "")
        request = self.client.build_request(
            scope["method"], url, headers=headers, content=bytes(body)
        )
        response = await self.client.send(request, stream=True)
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": [
                        (name, value)
                        for name, value in response.headers.raw
                        if name.lower() not in HOP_BY_HOP
                    ],
                }
            )
            async with anyio.create_task_group() as tg:

                async def hang_up() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    tg.cancel_scope.cancel()

                tg.start_soon(hang_up)
                async for chunk in response.aiter_raw():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                tg.cancel_scope.cancel()
        finally:
            await response.aclose()


@asynccontextmanager
async def bearer_proxy(upstream: str, token: str, port: int) -> AsyncIterator[str]:
    """Serve the proxy on 127.0.0.1:`port` for the block; yields its base URL."""
    proxy = BearerProxy(upstream, token)
    config = uvicorn.Config(proxy, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    async with proxy.client, anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(15):
            while not server.started:
                await anyio.sleep(0.02)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True


__all__ = ["BearerProxy", "bearer_proxy"]
