"""The front's conversations (issue 25 item 1): each MCP session it serves gets its own
conversation id, sent with every gateway call, so that a conversation's rigs are its own
and end with it. A stdio process is one conversation; over Streamable HTTP each
`Mcp-Session-Id` is one, and requests without a session (the 2026-07-28 protocol) share
the process's own. Which are live is told to the gateway every second
(`orchestrator.surfaces.conversations`)."""

from __future__ import annotations

import secrets
from collections.abc import Collection

from mcp_front.reporting import STDIO


def new_id() -> str:
    return "c" + secrets.token_hex(8)


class FrontConversations:
    def __init__(self) -> None:
        self.own = new_id()  # the stdio session's, or HTTP requests' without a session
        self._ids: dict[str, str] = {}  # HTTP session id -> conversation id

    def of(self, session: str) -> str:
        """The conversation of a request's session (`reporting.session_key`)."""
        if session in ("", STDIO):
            return self.own
        return self._ids.setdefault(session, new_id())

    def lease(self, sessions: Collection[str] | None) -> tuple[list[str], list[str]]:
        """(live, ended) conversations, given the HTTP sessions still open (None over
        stdio); an ended one is said once, then forgotten."""
        if sessions is None:
            return [self.own], []
        gone = [session for session in self._ids if session not in sessions]
        ended = [self._ids.pop(session) for session in gone]
        return [self.own, *self._ids.values()], ended

    def sessions(self) -> list[str]:
        """The HTTP sessions that have a conversation."""
        return list(self._ids)

    def all(self) -> list[str]:
        return [self.own, *self._ids.values()]
