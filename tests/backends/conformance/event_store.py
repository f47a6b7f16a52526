"""In-memory `EventStore` so legacy SSE streams are resumable.

With an event store configured the SDK sends a priming event (id + empty data,
plus `retry:`) first on every 2025-11-25 POST stream, and a client that lost a
stream can reconnect with `GET` + `Last-Event-ID` to receive what it missed.
The `server-sse-polling` scenario exercises exactly that through the
`test_reconnection` tool.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import anyio
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage


@dataclass
class _StoredEvent:
    event_id: EventId
    stream_id: StreamId
    message: JSONRPCMessage | None  # None marks a priming event: nothing to replay.


@dataclass
class InMemoryEventStore(EventStore):
    """Bounded, process-local store; plenty for a test fixture, not for replicas."""

    max_events: int = 10_000
    _events: list[_StoredEvent] = field(default_factory=list)
    _counter: itertools.count[int] = field(default_factory=itertools.count)
    _lock: anyio.Lock = field(default_factory=anyio.Lock)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        async with self._lock:
            # Globally increasing ids keep the ordering obvious across streams.
            event_id = f"{next(self._counter)}"
            self._events.append(_StoredEvent(event_id, stream_id, message))
            if len(self._events) > self.max_events:
                del self._events[: len(self._events) - self.max_events]
            return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        async with self._lock:
            position = next((i for i, e in enumerate(self._events) if e.event_id == last_event_id), None)
            if position is None:
                return None
            stream_id = self._events[position].stream_id
            pending = [e for e in self._events[position + 1 :] if e.stream_id == stream_id and e.message is not None]
        for event in pending:
            assert event.message is not None
            await send_callback(EventMessage(event.message, event.event_id))
        return stream_id
