"""Replica health shared over the real (test) Redis: what one instance finds, the others hear at
once; the hash of replicas that are down is what a new instance starts with, stale entries aside;
list changes travel on the same subscription."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import pytest
import redis.asyncio

from apps.common.redis import async_redis_client
from apps.common.replica_health import REPLICA_HEALTH_KEY, STALE_SECONDS, replica_down_record, replicas_down_read
from apps.gateway.adapters.redis_change_feed import RedisChangeFeed
from apps.gateway.adapters.redis_health_feed import RedisHealthFeed
from apps.gateway.adapters.redis_pubsub import RedisSubscription
from apps.gateway.pipeline.ports import ReplicaState
from apps.gateway.reindex import ToolReindex

GONE = "http://10.77.0.1/mcp"  # replicas no gateway of the other tests uses
BACK = "http://10.77.0.2/mcp"
OLD = "http://10.77.0.3/mcp"


@pytest.fixture
async def clean() -> AsyncIterator[None]:
    await async_redis_client().hdel(REPLICA_HEALTH_KEY, GONE, BACK, OLD)
    yield
    await async_redis_client().hdel(REPLICA_HEALTH_KEY, GONE, BACK, OLD)


def _ours(heard: list[ReplicaState]) -> Callable[[ReplicaState], None]:
    """Other tests' gateways on this database may be heard too."""
    return lambda state: heard.append(state) if state.url in {GONE, BACK, OLD} else None


def _feed(instance: str) -> tuple[RedisHealthFeed, RedisSubscription]:
    client = async_redis_client()
    subscription = RedisSubscription(client, retry_seconds=0.1)
    return RedisHealthFeed(client, subscription, instance=f"{instance}:1", name=instance), subscription


async def _until(condition: Callable[[], object], seconds: float = 3.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within time"
        await asyncio.sleep(0.02)


async def test_one_instance_s_transitions_reach_the_others_and_are_recorded(clean: None) -> None:
    a, _ = _feed("gw-a")
    b, _ = _feed("gw-b")
    heard_a: list[ReplicaState] = []
    heard_b: list[ReplicaState] = []
    a.start(_ours(heard_a))
    b.start(_ours(heard_b))
    await asyncio.sleep(0.3)  # both subscribed
    a.publish(ReplicaState(GONE, False, 1000.0))
    await _until(lambda: heard_b)
    assert heard_b == [ReplicaState(GONE, False, 1000.0, "gw-a")]
    record = await asyncio.to_thread(replicas_down_read, urls=[GONE, BACK])
    assert list(record) == [GONE] and (record[GONE].since, record[GONE].instance) == (1000.0, "gw-a")

    b.publish(ReplicaState(GONE, True, 1010.0))  # up, found by any instance: up everywhere
    await _until(lambda: heard_a)
    assert heard_a == [ReplicaState(GONE, True, 1010.0, "gw-b")]
    assert await async_redis_client().hget(REPLICA_HEALTH_KEY, GONE) is None
    assert heard_b == [ReplicaState(GONE, False, 1000.0, "gw-a")]  # nobody hears itself


async def test_a_new_instance_starts_with_the_current_records_but_not_stale_ones(clean: None) -> None:
    now = time.time()
    old = now - STALE_SECONDS - 1
    await async_redis_client().hset(REPLICA_HEALTH_KEY, mapping={
        BACK: replica_down_record(since=old, instance="gw-a", checked=now - 1),  # down long, checked lately
        OLD: replica_down_record(since=old, instance="gw-gone", checked=old),  # nobody has checked it since
    })
    fresh, _ = _feed("gw-c")
    heard: list[ReplicaState] = []
    fresh.start(_ours(heard))
    await _until(lambda: heard)
    await asyncio.sleep(0.1)
    assert heard == [ReplicaState(BACK, False, old, "gw-a")]
    assert list(await asyncio.to_thread(replicas_down_read, urls=[BACK, OLD])) == [BACK]

    fresh.confirm([ReplicaState(OLD, False, old, "gw-gone")])  # a live instance checks it: current again
    await asyncio.sleep(0.1)
    assert sorted(await asyncio.to_thread(replicas_down_read, urls=[BACK, OLD])) == [BACK, OLD]


def _no_reindex(client: redis.asyncio.Redis) -> ToolReindex:
    """A reindex trigger whose queue is never asked (these feeds carry no tools change)."""
    return ToolReindex(client, delay_seconds=5, enqueue=lambda backend_id, countdown: None)


async def test_list_changes_and_replica_health_share_one_subscription(clean: None) -> None:
    client = async_redis_client()
    subscription = RedisSubscription(client, retry_seconds=0.1)
    changes = RedisChangeFeed(client, instance="gw-d:1", reindex=_no_reindex(client), subscription=subscription)
    health = RedisHealthFeed(client, subscription, instance="gw-d:1", name="gw-d")
    heard_changes: list[tuple[int, str]] = []
    heard_health: list[ReplicaState] = []
    changes.start(lambda backend, notification: heard_changes.append((backend, notification)) if backend == -7 else None)
    health.start(_ours(heard_health))
    await asyncio.sleep(0.3)
    other_changes = RedisChangeFeed(client, instance="gw-e:1", reindex=_no_reindex(client))
    other_health, _ = _feed("gw-e")
    other_changes.publish(-7, "notifications/tools/list_changed")
    other_health.publish(ReplicaState(GONE, False, 5.0))
    await _until(lambda: heard_changes and heard_health)
    assert heard_changes == [(-7, "notifications/tools/list_changed")]
    assert heard_health == [ReplicaState(GONE, False, 5.0, "gw-e")]


async def test_deployments_on_other_databases_of_the_same_redis_server_are_not_heard(clean: None) -> None:
    """Redis pub/sub is server-wide: the channel names carry the database number."""
    ours = async_redis_client().connection_pool.connection_kwargs
    other = redis.asyncio.Redis(host=ours["host"], port=ours["port"], db=(ours.get("db", 0) + 1) % 16)
    heard_ours: list[ReplicaState] = []
    heard_other: list[ReplicaState] = []
    listening, _ = _feed("gw-f")
    listening.start(_ours(heard_ours))
    elsewhere = RedisHealthFeed(other, RedisSubscription(other, retry_seconds=0.1), instance="gw-g:1", name="gw-g")
    elsewhere.start(_ours(heard_other))
    await asyncio.sleep(0.3)
    publisher, _ = _feed("gw-h")
    publisher.publish(ReplicaState(GONE, False, 7.0))
    await _until(lambda: heard_ours)
    await asyncio.sleep(0.2)
    assert heard_ours == [ReplicaState(GONE, False, 7.0, "gw-h")]
    assert heard_other == []
