"""The `ChangeFeed` port on Redis pub/sub (`apps.common.list_changes`): what one gateway instance
learns about a backend's lists, every other instance hears."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import redis
import redis.asyncio

from apps.common.list_changes import LIST_CHANGES_CHANNEL, list_change_parse, list_change_payload

log = logging.getLogger(__name__)


class RedisChangeFeed:
    def __init__(self, client: redis.asyncio.Redis, *, instance: str, retry_seconds: float = 1.0) -> None:
        self._redis = client
        self._instance = instance
        self._retry_seconds = retry_seconds
        self._tasks: set[asyncio.Task[None]] = set()
        self._listener: asyncio.Task[None] | None = None

    def publish(self, backend_id: int, notification: str) -> None:
        """Send without waiting; a failure is logged (the others catch up by their cache lifetime)."""
        task = asyncio.ensure_future(self._publish(backend_id, notification))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _publish(self, backend_id: int, notification: str) -> None:
        payload = list_change_payload(backend_id=backend_id, notification=notification, origin=self._instance)
        try:
            await self._redis.publish(LIST_CHANGES_CHANNEL, payload)
        except (redis.RedisError, OSError) as exc:
            log.warning("could not share a list change of backend %s: %s", backend_id, exc)

    def start(self, on_change: Callable[[int, str], object]) -> None:
        """Call `on_change(backend id, notification)` for every change another instance shares."""
        if self._listener is None or self._listener.done():
            self._listener = asyncio.ensure_future(self._listen(on_change))

    async def _listen(self, on_change: Callable[[int, str], object]) -> None:
        while True:
            pubsub = self._redis.pubsub()
            try:
                await pubsub.subscribe(LIST_CHANGES_CHANNEL)
                while True:
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                    if message is None or message.get("type") != "message":
                        continue
                    parsed = list_change_parse(message["data"])
                    if parsed is not None and parsed[2] != self._instance:
                        on_change(parsed[0], parsed[1])
            except (redis.RedisError, OSError) as exc:
                log.warning("list change feed interrupted, listening again: %s", exc)
            finally:
                await pubsub.aclose()
            await asyncio.sleep(self._retry_seconds)
