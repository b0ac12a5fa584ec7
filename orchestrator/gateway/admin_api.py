"""The operators' signed API on the gateway (SPEC S6.1): what `corral approvals` and
`corral sessions` call over the signed loopback channel, with no console open.

    POST /api/internal/admin/approvals         {}                       -> {"approvals": [...]}
    POST /api/internal/admin/approvals/decide  AdminDecision            -> {"approval": {...}}
    POST /api/internal/admin/sessions          {}                       -> {"sessions": [...]}
    POST /api/internal/admin/sessions/act      AdminSessionAct          -> {"ok": true}

Each passes the gateway's checks for /api/internal/ (loopback peer, body limit,
signature: only a holder of CORRAL_HOME/gateway.key can call it). No MCP tool reaches
these routes: an agent can never approve anything. A refusal is {"error": why} with 409
(the state does not allow it) or 400 (a malformed body).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from orchestrator.errors import ApprovalError, SeatError
from orchestrator.gateway.app import SignedRequests
from orchestrator.gateway.wire import (
    ADMIN_APPROVALS_PATH,
    ADMIN_DECIDE_PATH,
    ADMIN_SESSION_ACT_PATH,
    ADMIN_SESSIONS_PATH,
    AdminDecision,
    AdminSessionAct,
)
from orchestrator.surfaces.oversight import Oversight


def admin_routes(oversight: Oversight) -> Callable[[SignedRequests], list[BaseRoute]]:
    def build(signed: SignedRequests) -> list[BaseRoute]:
        def guarded(
            handler: Callable[[bytes], Awaitable[dict[str, Any]]],
        ) -> Callable[[Request], Awaitable[Response]]:
            async def endpoint(request: Request) -> Response:
                body = await signed.body(request)
                if isinstance(body, Response):
                    return body
                try:
                    return JSONResponse(await handler(body))
                except ValidationError as exc:
                    first = exc.errors(include_url=False, include_input=False)[0]
                    where = ".".join(str(p) for p in first["loc"]) or "body"
                    return JSONResponse({"error": f"{where}: {first['msg']}"}, status_code=400)
                except (ApprovalError, SeatError) as exc:
                    return JSONResponse({"error": str(exc)}, status_code=409)

            return endpoint

        async def approvals(_: bytes) -> dict[str, Any]:
            return {"approvals": [a.public() for a in oversight.approvals.recent()]}

        async def decide(body: bytes) -> dict[str, Any]:
            ask = AdminDecision.model_validate_json(body)
            approval = oversight.approvals.decide(
                ask.id, ask.operator, ask.decision == "approve", ask.reason
            )
            return {"approval": approval.public()}

        async def sessions(_: bytes) -> dict[str, Any]:
            return {"sessions": oversight.sessions_view()}

        async def act(body: bytes) -> dict[str, Any]:
            ask = AdminSessionAct.model_validate_json(body)
            if ask.action == "takeover":
                oversight.take_over(ask.agent, ask.operator, viewer=None, how="cli")
            elif ask.action == "handback":
                oversight.hand_back(ask.agent, ask.operator)
            else:
                await oversight.stop(ask.agent, ask.operator)
            return {"ok": True}

        return [
            Route(ADMIN_APPROVALS_PATH, guarded(approvals), methods=["POST"]),
            Route(ADMIN_DECIDE_PATH, guarded(decide), methods=["POST"]),
            Route(ADMIN_SESSIONS_PATH, guarded(sessions), methods=["POST"]),
            Route(ADMIN_SESSION_ACT_PATH, guarded(act), methods=["POST"]),
        ]

    return build
