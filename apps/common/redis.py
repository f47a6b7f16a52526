"""The one place that opens Redis connections, synchronous and asynchronous."""

from __future__ import annotations

import functools

import redis
import redis.asyncio
from django.conf import settings


@functools.cache
def redis_client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)


_async_clients: dict[int, redis.asyncio.Redis] = {}


def async_redis_client() -> redis.asyncio.Redis:
    """One async client per event loop (a redis.asyncio pool is bound to the loop that created it)."""
    import asyncio

    loop = asyncio.get_running_loop()
    client = _async_clients.get(id(loop))
    if client is None:
        client = redis.asyncio.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
        _async_clients[id(loop)] = client
    return client
