"""The fronts' word on their conversations (issue 25 item 1): POST
/api/internal/conversations, signed with the agent's channel key like every call, carries
which of the agent's conversations its MCP front still serves and which ended; the rig
manager's expiry ends the rigs of the others (orchestrator.surfaces.conversations)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from orchestrator.gateway.app import ExtraRoutes, SignedRequests
from orchestrator.gateway.wire import CONVERSATIONS_PATH, ConversationLease
from orchestrator.surfaces.conversations import Conversations


def with_conversations(routes: ExtraRoutes, conversations: Conversations) -> ExtraRoutes:
    """`routes`, and the conversations' lease route beside them."""

    def build(signed: SignedRequests) -> list[BaseRoute]:
        async def lease(request: Request) -> Response:
            said = await signed.model(request, ConversationLease)
            if isinstance(said, Response):
                return said
            conversations.lease(said.agent, said.live, said.ended)
            return JSONResponse({"ok": True})

        return [*routes(signed), Route(CONVERSATIONS_PATH, lease, methods=["POST"])]

    return build
