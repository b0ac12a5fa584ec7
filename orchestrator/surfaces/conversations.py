"""Which conversations are still going (issue 25 item 1): a rig belongs to the MCP
conversation that made it (a stdio process; an HTTP session), and ends within seconds of
the conversation ending, whatever way it ended.

The MCP front names each conversation (`mcp_front.conversations`) and tells the gateway,
every `LEASE_EVERY_SECONDS`, which of its conversations are live and which ended
(`POST /api/internal/conversations`, signed with the agent's key); every tool call of a
conversation is also a sign of it. A conversation the front said ended is over at once;
one not heard of for `LEASE_SECONDS` (its front was killed, or hangs) is over then. The
rig manager's expiry loop (every second) asks `gone` for each rig.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

LEASE_EVERY_SECONDS = 1.0  # how often a front says which of its conversations are live
LEASE_SECONDS = 5.0  # silence after which a conversation is over (its front is gone)
KEEP_ENDED = 4096  # ended conversations remembered, so a late call cannot revive one

Key = tuple[str, str]  # (agent, conversation)


class Conversations:
    def __init__(
        self, lease_seconds: float = LEASE_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.lease_seconds = lease_seconds
        self.clock = clock
        self._seen: dict[Key, float] = {}
        self._ended: dict[Key, None] = {}  # insertion-ordered: the oldest are dropped first

    def touch(self, agent: str, conversation: str) -> None:
        """A sign of life: a call, or the front's lease."""
        if conversation and (agent, conversation) not in self._ended:
            self._seen[(agent, conversation)] = self.clock()

    def lease(self, agent: str, live: Iterable[str], ended: Iterable[str]) -> None:
        """What a front said of its conversations."""
        self._prune()
        for conversation in live:
            self.touch(agent, conversation)
        for conversation in ended:
            self._seen.pop((agent, conversation), None)
            self._ended[(agent, conversation)] = None
            while len(self._ended) > KEEP_ENDED:
                del self._ended[next(iter(self._ended))]

    def gone(self, agent: str, conversation: str) -> str | None:
        """Why a conversation is over, or None while it goes on ("" is no conversation:
        a caller that names none, whose rigs live until their own timeouts)."""
        if not conversation:
            return None
        if (agent, conversation) in self._ended:
            return "its conversation ended"
        seen = self._seen.get((agent, conversation))
        if seen is None or self.clock() - seen > self.lease_seconds:
            return f"its conversation's client is gone (not heard of for {self.lease_seconds:g} s)"
        return None

    def _prune(self) -> None:
        """Forget conversations long silent (their rigs, if any, ended long ago)."""
        oldest = self.clock() - 10 * self.lease_seconds
        for key in [k for k, seen in self._seen.items() if seen < oldest]:
            del self._seen[key]
