"""Approvals the chat can reach (issue 25 item 6).

When a call is held for an operator and the client declared URL-mode elicitation, the
front sends one `elicitation/create` (mode `url`) that opens the approval in the console
(`/console/#approval-ID`): the person in the chat can go and decide it there, if they are
an operator, after the console's own login. The client's answer decides nothing (a client
can answer its own elicitation, so an "accept" proves nothing): it is not even waited
for. When the approval is decided, `notifications/elicitation/complete` says so.

Clients on the 2026-07-28 protocol get no elicitation from a held call (there, a server
asks for input by answering the call, which a held call does not do): they hear the
approval as progress and log messages.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
from anyio.abc import TaskGroup
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from sandboxes.beside import tasks_beside
from sandboxes.events import CallEvents, LogLevel

logger = logging.getLogger("corral.mcp")

URL_ELICITATION = types.ClientCapabilities(
    elicitation=types.ElicitationCapability(url=types.UrlElicitationCapability())
)


def approval_url(console: str, approval: str) -> str:
    """The console page that shows the approval (`console` is the gateway's base URL)."""
    return f"{console.rstrip('/')}/console/#approval-{approval}"


def can_elicit_url(ctx: Any) -> bool:
    """Whether this request's client takes a URL-mode elicitation from a held call."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return False
    try:
        return bool(ctx.session.check_client_capability(URL_ELICITATION))
    except Exception:  # a session that cannot say: do not ask
        return False


class ApprovalElicitor:
    """CallEvents that pass everything on and, on `approval_raised`, send the elicitation
    (in `tasks`, never holding the call); on `approval_decided`, its completion."""

    def __init__(self, events: CallEvents, ctx: Any, console: str, tasks: TaskGroup) -> None:
        self.events = events
        self.session = ctx.session
        self.request_id = getattr(ctx, "request_id", None)
        self.console = console
        self.tasks = tasks
        self.sent: set[str] = set()

    async def progress(
        self, phase: str, message: str, *, remaining: float | None = None, output: str = ""
    ) -> None:
        await self.events.progress(phase, message, remaining=remaining, output=output)

    async def log(
        self, level: LogLevel, event: str, details: Mapping[str, Any] | None = None
    ) -> None:
        approval = str((details or {}).get("approval", ""))
        if event == "approval_raised" and approval and approval not in self.sent:
            self.sent.add(approval)
            rule = str((details or {}).get("rule", "a rule"))
            self.tasks.start_soon(self._ask, approval, rule)
        elif event == "approval_decided" and approval in self.sent:
            await self._complete(approval)  # at once: the call ends right after
        await self.events.log(level, event, details)

    async def _ask(self, approval: str, rule: str) -> None:
        message = (
            f"corral holds this action for an operator's approval ({rule}). An operator "
            "decides it in corral's console (the console's login is required); answering "
            "here decides nothing."
        )
        try:
            answer = await self.session.elicit_url(
                message, approval_url(self.console, approval), approval, self.request_id
            )
            logger.info("approval %s: the client answered its elicitation %s", approval, answer)
        except Exception:
            logger.debug("elicitation for approval %s not delivered", approval, exc_info=True)

    async def _complete(self, approval: str) -> None:
        try:
            await self.session.send_elicit_complete(approval, self.request_id)
        except Exception:
            logger.debug("elicitation complete for %s not delivered", approval, exc_info=True)


@asynccontextmanager
async def eliciting(events: CallEvents, ctx: Any, console: str) -> AsyncIterator[CallEvents]:
    """`events`, and for a client that takes URL elicitations, the elicitor around them;
    what it started ends with the call."""
    if not can_elicit_url(ctx):
        yield events
        return
    async with tasks_beside() as tasks:
        yield ApprovalElicitor(events, ctx, console, tasks)
