"""One Redis pub/sub subscription per gateway (event loop) for everything the instances tell each
other: list changes (`changes.py`) and replica health (`replica_health.py`) each listen on their
own channel through it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import redis
import redis.asyncio

log = logging.getLogger(__name__)


class RedisSubscription:
    """Hands every message of a `listen`ed channel to its handler, re-subscribing after a failure.
    Messages published while it is not subscribed are missed: each feed says how it catches up."""

    def __init__(self, client: redis.asyncio.Redis, *, retry_seconds: float = 1.0) -> None:
        self._redis = client
        self._retry_seconds = retry_seconds
        self._handlers: dict[str, Callable[[bytes], object]] = {}
        self._listener: asyncio.Task[None] | None = None
        self._channels: frozenset[str] = frozenset()  # those the running listener subscribes to

    def listen(self, channel: str, on_message: Callable[[bytes], object]) -> None:
        """Call `on_message(data)` for each message on `channel` (replacing any handler it had).
        Call it on the event loop the gateway serves on; the listener starts with the loop's next turn."""
        self._handlers[channel] = on_message
        if self._listener is not None and not self._listener.done() and channel in self._channels:
            return
        if self._listener is not None:
            self._listener.cancel()  # one subscription: started again with the new channel too
        self._channels = frozenset(self._handlers)
        self._listener = asyncio.ensure_future(self._listen())

    async def _listen(self) -> None:
        while True:
            pubsub = None
            try:
                if isinstance(self._redis, redis.asyncio.RedisCluster):
                    await self._redis.initialize()  # its pub/sub looks the channel's node up in a map it does not load
                pubsub = self._redis.pubsub()
                await pubsub.subscribe(*self._channels)
                while True:
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                    if message is None or message.get("type") != "message":
                        continue
                    channel = message["channel"]
                    handler = self._handlers.get(channel.decode() if isinstance(channel, bytes) else channel)
                    if handler is not None:
                        try:
                            handler(message["data"])
                        except Exception:  # one bad message or handler must not end the subscription
                            log.exception("handling a message on %s failed", channel)
            except (redis.RedisError, OSError) as exc:
                log.warning("pub/sub subscription interrupted, subscribing again: %s", exc)
            finally:
                if pubsub is not None:
                    await pubsub.aclose()
            await asyncio.sleep(self._retry_seconds)
