"""The `ChangeFeed` port on Redis pub/sub (`apps.common.list_changes`): what one gateway instance
learns about a backend's lists, every other instance hears. The instance that learnt it also asks
for the backend's tools to be indexed again (`reindex.py`), when tool indexing is on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import redis
import redis.asyncio

from apps.common.list_changes import LIST_CHANGES_CHANNEL, list_change_parse, list_change_payload
from apps.common.redis import pubsub_channel
from apps.gateway.adapters.redis_pubsub import RedisSubscription
from apps.gateway.reindex import ToolReindex

log = logging.getLogger(__name__)


class RedisChangeFeed:
    def __init__(
        self, client: redis.asyncio.Redis, *, instance: str, reindex: ToolReindex | None, retry_seconds: float = 1.0,
        subscription: RedisSubscription | None = None,
    ) -> None:
        self._redis = client
        self._channel = pubsub_channel(client, LIST_CHANGES_CHANNEL)
        self._instance = instance
        self._reindex = reindex
        # One subscription per gateway for every feed (given); its own otherwise.
        self._subscription = subscription or RedisSubscription(client, retry_seconds=retry_seconds)
        self._tasks: set[asyncio.Task[None]] = set()

    def publish(self, backend_id: int, notification: str) -> None:
        """Send without waiting; a failure is logged (the others catch up by their cache lifetime).
        Called only by the instance that saw the backend's notification: the one that asks for a
        new index of its tools."""
        task = asyncio.ensure_future(self._publish(backend_id, notification))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _publish(self, backend_id: int, notification: str) -> None:
        payload = list_change_payload(backend_id=backend_id, notification=notification, origin=self._instance)
        try:
            await self._redis.publish(self._channel, payload)
        except (redis.RedisError, OSError) as exc:
            log.warning("could not share a list change of backend %s: %s", backend_id, exc)
        if self._reindex is not None:  # None: tool indexing is off (GATEWAY_TOOL_INDEX)
            await self._reindex.changed(backend_id, notification)

    def start(self, on_change: Callable[[int, str], object]) -> None:
        """Call `on_change(backend id, notification)` for every change another instance shares."""

        def heard(data: bytes) -> None:
            parsed = list_change_parse(data)
            if parsed is not None and parsed[2] != self._instance:
                on_change(parsed[0], parsed[1])

        self._subscription.listen(self._channel, heard)
