"""The `HealthFeed` port on Redis (`apps.common.replica_health`): a replica one gateway instance
finds down or up again, every other instance hears at once, and the hash of replicas that are down
is kept current for a newly started instance and the console."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

import redis
import redis.asyncio

from apps.common.redis import pubsub_channel
from apps.common.replica_health import (
    REPLICA_HEALTH_CHANNEL,
    REPLICA_HEALTH_KEY,
    replica_change_parse,
    replica_change_payload,
    replica_down_record,
    replicas_down,
)
from apps.gateway.adapters.redis_pubsub import RedisSubscription
from apps.gateway.pipeline.ports import ReplicaState

log = logging.getLogger(__name__)


class RedisHealthFeed:
    """`instance`: this gateway's id on the channel (its own messages are not handed back); `name`:
    the instance as records name it (`GATEWAY_INSTANCE_ID`)."""

    def __init__(
        self, client: redis.asyncio.Redis, subscription: RedisSubscription, *, instance: str, name: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._redis = client
        self._channel = pubsub_channel(client, REPLICA_HEALTH_CHANNEL)
        self._subscription = subscription
        self._instance = instance
        self._name = name
        self._clock = clock
        self._tasks: set[asyncio.Task[None]] = set()

    def publish(self, state: ReplicaState) -> None:
        """Record and announce without waiting; a failure is logged (the others find out by their
        own checks or failed connections, as they would alone)."""
        instance = state.instance or self._name
        payload = replica_change_payload(
            url=state.url, up=state.up, since=state.since, instance=instance, origin=self._instance
        )

        async def send() -> None:
            # Two commands, not a pipeline: a Redis Cluster client does not pipeline PUBLISH.
            if state.up:
                await self._redis.hdel(REPLICA_HEALTH_KEY, state.url)
            else:
                record = replica_down_record(since=state.since, instance=instance, checked=self._clock())
                await self._redis.hset(REPLICA_HEALTH_KEY, state.url, record)
            await self._redis.publish(self._channel, payload)

        self._run(f"share that replica {state.url} is {'up' if state.up else 'down'}", send)

    def confirm(self, states: Sequence[ReplicaState]) -> None:
        if not states:
            return
        now = self._clock()
        records = {
            state.url: replica_down_record(since=state.since, instance=state.instance or self._name, checked=now)
            for state in states
        }

        async def send() -> None:
            await self._redis.hset(REPLICA_HEALTH_KEY, mapping=records)

        self._run("confirm replicas still down", send)

    def start(self, on_state: Callable[[ReplicaState], object]) -> None:
        """Listen for the others' transitions, and read the current records (stale ones left out)."""

        def heard(data: bytes) -> None:
            parsed = replica_change_parse(data)
            if parsed is not None and parsed[4] != self._instance:
                url, up, since, instance, _ = parsed
                on_state(ReplicaState(url, up, since, instance))

        self._subscription.listen(self._channel, heard)

        async def read() -> None:
            records = await self._redis.hgetall(REPLICA_HEALTH_KEY)
            for entry in replicas_down(records, now=self._clock()):
                on_state(ReplicaState(entry.url, False, entry.since, entry.instance))

        self._run("read which replicas are down", read)

    def _run(self, what: str, work: Callable[[], Awaitable[None]]) -> None:
        async def guarded() -> None:
            try:
                await work()
            except (redis.RedisError, OSError) as exc:
                log.warning("could not %s: %s", what, exc)

        task = asyncio.ensure_future(guarded())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
