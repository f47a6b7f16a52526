"""The one place that opens Redis connections, synchronous and asynchronous, and reads the messages
instances send each other through it.

Every client retries a command once, at once, on a fresh connection when its pooled connection
fails to carry it: after Redis restarts, each connection kept in a pool is broken, and without the
retry each would fail one command (a session lost, a login not counted) long after Redis is back.
Only connection errors are retried: after a timeout the command may have run."""

from __future__ import annotations

import functools
from typing import Any

import orjson
import redis
import redis.asyncio
import redis.asyncio.retry
import redis.retry
from django.conf import settings
from redis.backoff import NoBackoff

_TIMEOUTS: dict[str, Any] = {"socket_timeout": 2, "socket_connect_timeout": 2}


@functools.cache
def redis_client() -> redis.Redis:
    retry = redis.retry.Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,))
    return redis.Redis.from_url(settings.REDIS_URL, retry=retry, **_TIMEOUTS)


_async_clients: dict[int, redis.asyncio.Redis] = {}


def async_redis_client() -> redis.asyncio.Redis:
    """One async client per event loop (a redis.asyncio pool is bound to the loop that created it)."""
    import asyncio

    loop = asyncio.get_running_loop()
    client = _async_clients.get(id(loop))
    if client is None:
        retry = redis.asyncio.retry.Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,))
        client = redis.asyncio.Redis.from_url(settings.REDIS_URL, retry=retry, **_TIMEOUTS)
        _async_clients[id(loop)] = client
    return client


def message_object(data: bytes | str) -> dict[str, Any] | None:
    """A message the gateway instances send each other (pub/sub, a hash entry) as a JSON object;
    None for anything else: a malformed message is dropped, never raised."""
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return message if isinstance(message, dict) else None


def pubsub_channel(client: redis.Redis | redis.asyncio.Redis, name: str) -> str:
    """`name` as a pub/sub channel of the deployment that `client`'s database belongs to. Redis
    pub/sub is server-wide, not per database: without the number, two deployments sharing a Redis
    server on different databases would hear each other's news."""
    return f"{name}@{client.connection_pool.connection_kwargs.get('db', 0)}"
