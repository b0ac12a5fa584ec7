"""A bounded in-memory event store for `corral mcp --http` (SSE resumability, SEP-1699).

With an event store the SDK opens every POST's SSE stream with a priming event (an id,
empty data and our `retry` hint), and a client whose stream broke can reconnect with
`Last-Event-ID` and get what it missed. This store keeps the newest `max_events` events
and at most about `max_bytes` of them (a screenshot result is megabytes): an older event
is forgotten, and resuming after it replays nothing. Event ids are random, so one session
cannot name another's events.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from typing import Any

from mcp.server.streamable_http import (
    EventCallback,
    EventId,
    EventMessage,
    EventStore,
    StreamId,
)
from mcp_types.jsonrpc import JSONRPCMessage
from pydantic import BaseModel

MAX_EVENTS = 1024
MAX_BYTES = 16 * 1024 * 1024
RETRY_MILLISECONDS = 2000  # the `retry` field of each priming event: reconnect after 2 s


def approximate_size(value: Any, depth: int = 0) -> int:
    """Roughly how many bytes `value` takes as JSON, without serialising it (its strings
    dominate: base64 images, output)."""
    if isinstance(value, str | bytes):
        return len(value) + 2
    if depth > 12:
        return 16
    if isinstance(value, BaseModel):
        value = value.__dict__
    if isinstance(value, dict):
        return sum(len(str(k)) + approximate_size(v, depth + 1) for k, v in value.items()) + 2
    if isinstance(value, list | tuple):
        return sum(approximate_size(v, depth + 1) for v in value) + 2
    return 8


class BoundedEventStore(EventStore):
    def __init__(self, max_events: int = MAX_EVENTS, max_bytes: int = MAX_BYTES) -> None:
        self.max_events = max_events
        self.max_bytes = max_bytes
        self._events: OrderedDict[EventId, tuple[StreamId, JSONRPCMessage | None, int]] = (
            OrderedDict()
        )
        self.bytes = 0

    @property
    def count(self) -> int:
        # Not __len__: the SDK tests the store for truth, and an empty store must be "on".
        return len(self._events)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = secrets.token_hex(12)
        size = 0 if message is None else approximate_size(message)
        self._events[event_id] = (stream_id, message, size)
        self.bytes += size
        while self._events and (len(self._events) > self.max_events or self.bytes > self.max_bytes):
            _, (_, _, dropped) = self._events.popitem(last=False)
            self.bytes -= dropped
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        entry = self._events.get(last_event_id)
        if entry is None:
            return None
        stream_id = entry[0]
        later = False
        for event_id, (stream, message, _) in list(self._events.items()):
            if later and stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
            later = later or event_id == last_event_id
        return stream_id


__all__ = ["RETRY_MILLISECONDS", "BoundedEventStore", "approximate_size"]
