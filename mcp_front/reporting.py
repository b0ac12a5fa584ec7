"""Call events as MCP sees them (issue 16): `notifications/progress` and
`notifications/message`.

- Progress goes out only for a request that carried a `progressToken`. Its `progress` is the
  seconds since the call began (it only ever grows, as MCP requires), `total` is that plus
  the seconds the current phase may still take when the phase has a deadline (a script's
  timeout, an approval's), and `message` is the phase's line, then the newest output lines.
- Log messages (`logger` "corral", `data` = {"event", ...details}) go out at or above the
  level the client chose: `logging/setLevel` on handshake-era connections (per session;
  `DEFAULT_LEVEL` until it is set), the request's `_meta` opt-in on 2026-07-28 ones. They
  ride the call's own stream, so they arrive before its result.

Nothing here raises into the call: a client that went away loses its events, not its call.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import mcp_types as types
from mcp.server.connection import allowed_log_levels
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from sandboxes.events import LOG_LEVELS, LogLevel, at_least

logger = logging.getLogger("corral.mcp")

DEFAULT_LEVEL: LogLevel = "info"
LOGGER_NAME = "corral"
MAX_SESSIONS = 1024  # levels remembered; the oldest session's is forgotten first
STDIO = "stdio"


def session_key(ctx: Any) -> str:
    """Which client session a request belongs to: the Streamable HTTP session id, or the one
    session of a stdio server."""
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    if headers is not None:
        return str(headers.get("mcp-session-id") or "")
    return STDIO


class LogLevels:
    """The level each client session asked for with `logging/setLevel`."""

    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self._levels: OrderedDict[str, LogLevel] = OrderedDict()
        self._max = max_sessions

    def set(self, key: str, level: LogLevel) -> None:
        self._levels[key] = level
        self._levels.move_to_end(key)
        while len(self._levels) > self._max:
            self._levels.popitem(last=False)

    def get(self, key: str) -> LogLevel:
        return self._levels.get(key, DEFAULT_LEVEL)

    def allowed(self, ctx: Any) -> frozenset[LogLevel]:
        """The levels this request may be sent."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return allowed_log_levels(ctx.protocol_version, getattr(ctx, "meta", None))
        threshold = self.get(session_key(ctx))
        return frozenset(level for level in LOG_LEVELS if at_least(level, threshold))


class McpCallEvents:
    """CallEvents for one tools/call request."""

    def __init__(
        self, ctx: Any, levels: LogLevels, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._session = ctx.session
        self._request_id = getattr(ctx, "request_id", None)
        self._allowed = levels.allowed(ctx)
        self._clock = clock
        self._started = clock()
        self._last = 0.0

    async def progress(
        self, phase: str, message: str, *, remaining: float | None = None, output: str = ""
    ) -> None:
        # The SDK sends nothing when the request carried no progressToken.
        # Whole milliseconds, strictly growing: two events in one millisecond stay in order.
        now = round(self._clock() - self._started, 3)
        value = max(now, round(self._last + 0.001, 3))
        self._last = value
        total = None if remaining is None else round(value + remaining, 3)
        text = f"{message}\n{output}" if output else message
        try:
            await self._session.report_progress(value, total, text)
        except Exception:
            logger.debug("progress for request %s not delivered", self._request_id, exc_info=True)

    async def log(
        self, level: LogLevel, event: str, details: Mapping[str, Any] | None = None
    ) -> None:
        if level not in self._allowed:
            return
        note = types.LoggingMessageNotification(
            params=types.LoggingMessageNotificationParams(
                level=level, logger=LOGGER_NAME, data={"event": event, **(details or {})}
            )
        )
        try:
            await self._session.send_notification(note, related_request_id=self._request_id)
        except Exception:
            logger.debug("log event %s not delivered", event, exc_info=True)


__all__ = ["DEFAULT_LEVEL", "LogLevels", "McpCallEvents", "session_key"]
