"""Fan-in of `list_changed` within one process: a backend's notification, seen on any stream the
process relays (or heard from another instance), reaches every open merged stream of a host that
mounts that backend (`host_lists.HostLists.invalidate` publishes; `listen.py` subscribes)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class ListChanges:
    """Fan-in of `list_changed`: a backend's notification, seen on any stream this process relays,
    reaches every open merged stream of a host that mounts the backend, once."""

    def __init__(self) -> None:
        self._subscribers: set[ChangeSubscription] = set()

    def publish(self, backend_id: int, notification: str) -> None:
        for subscriber in self._subscribers:
            if backend_id in subscriber.backend_ids:
                subscriber.add(notification)

    def subscribe(self, backend_ids: frozenset[int]) -> ChangeSubscription:
        subscription = ChangeSubscription(backend_ids, self._subscribers.discard)
        self._subscribers.add(subscription)
        return subscription


class ChangeSubscription:
    """Notifications not yet taken, in order; one that is already waiting is not queued twice."""

    def __init__(self, backend_ids: frozenset[int], on_close: Callable[[ChangeSubscription], None]) -> None:
        self.backend_ids = backend_ids
        self._pending: dict[str, None] = {}
        self._ready = asyncio.Event()
        self._on_close = on_close

    def add(self, notification: str) -> None:
        self._pending[notification] = None
        self._ready.set()

    async def next(self) -> str:
        while not self._pending:
            self._ready.clear()
            await self._ready.wait()
        notification = next(iter(self._pending))
        del self._pending[notification]
        return notification

    def close(self) -> None:
        self._on_close(self)
