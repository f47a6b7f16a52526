"""The one place that opens Redis connections, synchronous and asynchronous, and reads the messages
instances send each other through it.

Every client retries a command once, at once, on a fresh connection when its pooled connection
fails to carry it: after Redis restarts, each connection kept in a pool is broken, and without the
retry each would fail one command (a session lost, a login not counted) long after Redis is back.
Only connection errors are retried: after a timeout the command may have run.

`REDIS_URL` may name one server, a Redis Cluster or a Sentinel master (`apps.common.redis_topology`);
every client here follows it (a cluster client routes each command by its key's slot, a Sentinel
client asks the sentinels for the master on each new connection)."""

from __future__ import annotations

import functools
from typing import Any

import orjson
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.retry
import redis.asyncio.sentinel
import redis.cluster
import redis.retry
import redis.sentinel
from django.conf import settings
from redis.backoff import NoBackoff

from apps.common.redis_topology import RedisTopology, redis_topology

_TIMEOUTS: dict[str, Any] = {"socket_timeout": 2, "socket_connect_timeout": 2}


@functools.cache
def redis_client() -> redis.Redis:
    """The synchronous client (a `redis.cluster.RedisCluster` on a cluster: same commands)."""
    retry = redis.retry.Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,))
    return sync_client(settings.REDIS_URL, retry=retry, **_TIMEOUTS)


def sync_client(url: str, **options: Any) -> redis.Redis:
    """A synchronous client of whatever `url` names (`apps.common.redis_topology`)."""
    topology = redis_topology(url)
    if topology.kind == "single":
        return redis.Redis.from_url(url, **options)
    auth = _auth(topology)
    if topology.kind == "cluster":
        nodes = [redis.cluster.ClusterNode(host, port) for host, port in topology.nodes]
        return redis.cluster.RedisCluster(startup_nodes=nodes, ssl=topology.tls, **auth, **options)  # type: ignore[return-value]
    sentinel = redis.sentinel.Sentinel(
        list(topology.nodes), sentinel_kwargs=_sentinel_auth(topology), socket_timeout=options.get("socket_timeout"),
        socket_connect_timeout=options.get("socket_connect_timeout"))
    return sentinel.master_for(topology.service, db=topology.db, ssl=topology.tls, **auth, **options)


def async_client(url: str, **options: Any) -> redis.asyncio.Redis:
    """An asynchronous client of whatever `url` names, bound to the running event loop's use."""
    topology = redis_topology(url)
    if topology.kind == "single":
        return redis.asyncio.Redis.from_url(url, **options)
    auth = _auth(topology)
    if topology.kind == "cluster":
        nodes = [redis.asyncio.cluster.ClusterNode(host, port) for host, port in topology.nodes]
        return _AsyncCluster(  # type: ignore[return-value]
            startup_nodes=nodes, ssl=topology.tls, max_connections=2**16, **auth, **options)
    sentinel = redis.asyncio.sentinel.Sentinel(
        list(topology.nodes), sentinel_kwargs=_sentinel_auth(topology), socket_timeout=options.get("socket_timeout"),
        socket_connect_timeout=options.get("socket_connect_timeout"))
    return sentinel.master_for(topology.service, db=topology.db, ssl=topology.tls, **auth, **options)


class _AsyncCluster(redis.asyncio.cluster.RedisCluster):
    """redis-py's asynchronous cluster client, made safe for the gateway's concurrency:
    - the first commands wait for the cluster's map (without this, commands sent at once to a fresh
      client raced its start-up and some failed with the connection they were given closed under
      them — seen with 90 at once, never once the map was loaded);
    - a node gets as many connections as commands in flight, as a single server's pool does (the
      client's default, 100, refuses the 101st command to one node instead of waiting: a busy
      tenant's counters all live on one node)."""

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        if self._initialize:
            await self.initialize()
        return await super().execute_command(*args, **kwargs)


def _auth(topology: RedisTopology) -> dict[str, Any]:
    return {"username": topology.username, "password": topology.password}


def _sentinel_auth(topology: RedisTopology) -> dict[str, Any]:
    return {"password": topology.sentinel_password} if topology.sentinel_password else {}


_async_clients: dict[int, redis.asyncio.Redis] = {}


def async_redis_client() -> redis.asyncio.Redis:
    """One async client per event loop (a redis.asyncio pool is bound to the loop that created it)."""
    import asyncio

    loop = asyncio.get_running_loop()
    client = _async_clients.get(id(loop))
    if client is None:
        retry = redis.asyncio.retry.Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,))
        client = async_client(settings.REDIS_URL, retry=retry, **_TIMEOUTS)
        _async_clients[id(loop)] = client
    return client


def redis_clients_reset() -> None:
    """Forget the clients made so far: the next ones follow `settings.REDIS_URL` as it is now (for
    tests that move the deployment to another topology)."""
    redis_client.cache_clear()
    _async_clients.clear()


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
    pool = getattr(client, "connection_pool", None)  # a cluster has none, and only database 0
    return f"{name}@{pool.connection_kwargs.get('db', 0) if pool is not None else 0}"
