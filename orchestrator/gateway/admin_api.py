"""The operators' API on the gateway (SPEC S6.1): what `corral approvals` and
`corral sessions` call over loopback, with no console open.

    POST /api/internal/admin/approvals         {}                       -> {"approvals": [...]}
    POST /api/internal/admin/approvals/decide  AdminDecision            -> {"approval": {...}}
    POST /api/internal/admin/sessions          {}                       -> {"sessions": [...]}
    POST /api/internal/admin/sessions/act      AdminSessionAct          -> {"ok": true}

Each passes the gateway's checks for /api/internal/ (loopback peer, body limit), then
wants an operator's credential: `Authorization: Bearer TOKEN`, the token `corral
operators add NAME` printed (CORRAL_HOME/operators.json keeps its SHA-256; the console's
login takes the same token). The request acts as that operator: a decision, a take over,
a hand back or a stop is audited under the token's name, never a name the caller chose.
No token, or one that is no operator's (a removed operator's included), is refused with
401 and audited as `internal_request_refused`, like every refusal under /api/internal/.

An agent's channel key (orchestrator.gateway.signing) is no credential here: whatever a
`corral mcp` process holds cannot approve, take over or hand back. No MCP tool reaches
these routes either. A refusal of the request itself is {"error": why} with 409 (the
state does not allow it) or 400 (a malformed body).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from orchestrator.errors import ApprovalError, OperatorError, SeatError
from orchestrator.gateway.app import SignedRequests
from orchestrator.gateway.wire import (
    ADMIN_APPROVALS_PATH,
    ADMIN_DECIDE_PATH,
    ADMIN_SESSION_ACT_PATH,
    ADMIN_SESSIONS_PATH,
    AdminDecision,
    AdminSessionAct,
)
from orchestrator.people.operators import operator_for_token
from orchestrator.surfaces.oversight import Oversight

logger = logging.getLogger("corral.gateway")

REASON_NO_TOKEN = "no operator token (set CORRAL_OPERATOR_TOKEN or pass --token-file)"
REASON_BAD_TOKEN = "not an operator's token (see `corral operators list`)"
REASON_OPERATORS_UNUSABLE = "the operators file cannot be read (see the gateway's log)"

AdminHandler = Callable[[str, bytes], Awaitable[dict[str, Any]]]
"""(the operator the token belongs to, the body) -> the JSON answer."""


def bearer_token(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer TOKEN` header, or None."""
    if header is None:
        return None
    scheme, _, token = header.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


async def _operator(signed: SignedRequests, request: Request) -> tuple[str, bytes] | Response:
    """(the operator, the body) of a request that carries an operator's token, or the
    refusal (audited)."""
    body = await signed.limited_body(request)
    if isinstance(body, Response):
        return body
    token = bearer_token(request.headers.get("authorization"))
    if token is None:
        return signed.refusals.answer(REASON_NO_TOKEN, request.scope, 401)
    try:
        name = await anyio.to_thread.run_sync(operator_for_token, signed.home, token)
    except OperatorError as exc:
        logger.error("admin request refused: %s", exc)
        return signed.refusals.answer(REASON_OPERATORS_UNUSABLE, request.scope, 401)
    if name is None:
        return signed.refusals.answer(REASON_BAD_TOKEN, request.scope, 401)
    return name, body


def _guarded(
    signed: SignedRequests, handler: AdminHandler
) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        checked = await _operator(signed, request)
        if isinstance(checked, Response):
            return checked
        operator, body = checked
        try:
            return JSONResponse(await handler(operator, body))
        except ValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            where = ".".join(str(p) for p in first["loc"]) or "body"
            return JSONResponse({"error": f"{where}: {first['msg']}"}, status_code=400)
        except (ApprovalError, SeatError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=409)

    return endpoint


def admin_routes(oversight: Oversight) -> Callable[[SignedRequests], list[BaseRoute]]:
    def build(signed: SignedRequests) -> list[BaseRoute]:
        async def approvals(_operator: str, _body: bytes) -> dict[str, Any]:
            return {"approvals": [a.public() for a in oversight.approvals.recent()]}

        async def decide(operator: str, body: bytes) -> dict[str, Any]:
            ask = AdminDecision.model_validate_json(body)
            approval = oversight.approvals.decide(
                ask.id, operator, ask.decision == "approve", ask.reason
            )
            return {"approval": approval.public()}

        async def sessions(_operator: str, _body: bytes) -> dict[str, Any]:
            return {"sessions": oversight.sessions_view()}

        async def act(operator: str, body: bytes) -> dict[str, Any]:
            ask = AdminSessionAct.model_validate_json(body)
            if ask.action == "takeover":
                await oversight.take_over(ask.agent, operator, viewer=None, how="cli")
            elif ask.action == "handback":
                await oversight.hand_back(ask.agent, operator)
            else:
                await oversight.stop(ask.agent, operator)
            return {"ok": True}

        return [
            Route(ADMIN_APPROVALS_PATH, _guarded(signed, approvals), methods=["POST"]),
            Route(ADMIN_DECIDE_PATH, _guarded(signed, decide), methods=["POST"]),
            Route(ADMIN_SESSIONS_PATH, _guarded(signed, sessions), methods=["POST"]),
            Route(ADMIN_SESSION_ACT_PATH, _guarded(signed, act), methods=["POST"]),
        ]

    return build
