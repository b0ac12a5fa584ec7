"""Bearer-token authentication for `corral mcp --http` (one token per agent).

Any local user can reach a loopback port, so the HTTP transport would otherwise let
anyone act as the agent it serves. Every request must carry
`Authorization: Bearer <token>`, the agent's token from CORRAL_HOME/tokens/<agent>.token
(`corral mcp --agent NAME --http --show-token` prints it). The check runs in this ASGI
middleware, before the MCP layer reads a byte of the body, and compares in constant
time; anything else is answered 401 and audited.
"""

from __future__ import annotations

import hmac

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from orchestrator.audit import AuditLog

REFUSED_EVENT = "mcp_http_refused"


def bearer_matches(header: bytes | None, token: str) -> bool:
    """Whether an Authorization header value is `Bearer <token>` (constant time in the
    token; the scheme is case-insensitive, as HTTP says)."""
    if header is None:
        return False
    scheme, _, given = header.partition(b" ")
    if scheme.lower() != b"bearer":
        return False
    return hmac.compare_digest(given.strip(), token.encode("ascii"))


class BearerAuth:
    def __init__(self, app: ASGIApp, *, token: str, agent: str, audit: AuditLog) -> None:
        self.app = app
        self.token = token
        self.agent = agent
        self.audit = audit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if bearer_matches(headers.get(b"authorization"), self.token):
            await self.app(scope, receive, send)
            return
        reason = "missing bearer token" if b"authorization" not in headers else "wrong token"
        client = scope.get("client")
        self.audit.record(
            REFUSED_EVENT,
            self.agent,
            {"reason": reason, "peer": str(client[0]) if client else "unknown"},
        )
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        refusal = JSONResponse(
            {"error": f"{reason}: send 'Authorization: Bearer <token>' (see docs/clients.md)"},
            status_code=401,
            headers={"WWW-Authenticate": 'Bearer realm="corral"'},
        )
        await refusal(scope, receive, send)  # a plain Response never reads the body
