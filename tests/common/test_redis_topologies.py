"""The gateway's Redis state on a real Redis Cluster (three masters, a replica each) and on a real
Sentinel setup, both on loopback: sessions, limits and budgets, what instances tell each other,
the audit live tail's marks and the sign-in throttle work the same as on one server, and carry on
through a failover (what a failover may lose: docs/scale.md)."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Iterator

import pytest
import redis
from django.conf import settings

from apps.audit import live
from apps.common.list_changes import list_changed_announce
from apps.common.redis import async_client, redis_clients_reset, sync_client
from apps.console.throttle import login_failure_record, login_wait_seconds
from apps.gateway.adapters.redis_change_feed import RedisChangeFeed
from apps.gateway.adapters.redis_health_feed import RedisHealthFeed
from apps.gateway.adapters.redis_pubsub import RedisSubscription
from apps.gateway.adapters.redis_rate_limiter import RedisRateLimiter
from apps.gateway.adapters.redis_session_store import RedisSessionStore, session_count, session_list
from apps.gateway.pipeline.ports import ReplicaState, SessionLimitReached, StoreUnavailable
from apps.gateway.pipeline.values import BackendSession, SessionState
from apps.kernel.identity import Budget, Limit
from apps.policies.models import RateLimit
from apps.policies.selectors import budget_usage, rate_limit_usage
from apps.tenants.models import Tenant
from tests.redis_servers import Cluster, redis_cluster, redis_sentinels

pytestmark = pytest.mark.slow

TENANT, KEY = 41, 7
DEMO = BackendSession("b-1", "2025-11-25", "http://r1/mcp", "abc")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with redis_cluster() as running:
        yield running


@pytest.fixture
def on_redis(settings) -> Iterator[object]:  # noqa: ANN001 - pytest-django fixture
    """Moves the deployment's Redis (settings.REDIS_URL and every client made from it) to a URL."""

    def move(url: str) -> None:
        settings.REDIS_URL = url
        redis_clients_reset()

    yield move
    redis_clients_reset()


def _store(client: object, *, instance: str = "gw-a", cap: int = 0, clock: object = time.time) -> RedisSessionStore:
    return RedisSessionStore(client, secret=settings.SECRET_KEY, instance=instance, ttl_seconds=60,  # type: ignore[arg-type]
                             cache_seconds=0, clock=clock, max_sessions_per_key=cap)  # type: ignore[arg-type]


def _state(store: RedisSessionStore, *, tenant_id: int = TENANT, key_id: int = KEY) -> SessionState:
    return SessionState(id=store.new_id(), tenant_id=tenant_id, vhost="main", key_id=key_id,
                        protocol_version="2025-11-25", client_capabilities={}, client_info={"name": "c"},
                        tenant_slug="acme")


async def _sessions(store: RedisSessionStore, count: int, **state: int) -> list[SessionState]:
    made = []
    for _ in range(count):
        session = _state(store, **state)
        assert await store.save(session, create=True)
        assert await store.save_backend(session.id, "demo", DEMO)
        session.backends["demo"] = DEMO
        made.append(session)
    return made


async def _loaded_once_redis_answers(
    store: RedisSessionStore, made: list[SessionState], *, seconds: float
) -> list[SessionState | None]:
    """The sessions read back, retrying while a failover is still under way (at most `seconds`)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return [await store.load(s.id, tenant_id=TENANT, key_id=KEY) for s in made]
        except StoreUnavailable:
            assert time.monotonic() < deadline, "Redis did not answer again after the failover"
            await asyncio.sleep(0.2)


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def test_sessions_live_on_every_master_of_a_cluster_and_every_operation_works(cluster: Cluster) -> None:
    clock = Clock()
    client = async_client(cluster.url)
    store, other = _store(client, clock=clock), _store(client, instance="gw-b", clock=clock)
    made = await _sessions(store, 24)
    # Spread by their own tags over all three masters; the tenant's index on one of them.
    assert {cluster.master_of(f"gw:session:{{{s.id}}}") for s in made} == set(cluster.masters)
    for session in made:
        assert await other.load(session.id, tenant_id=TENANT, key_id=KEY) == session
    assert await other.claim(made[0].id, "demo", seconds=5)
    assert not await store.claim(made[0].id, "demo", seconds=5)
    await other.release(made[0].id, "demo")
    assert await store.claim(made[0].id, "demo", seconds=5)
    made[1].protocol_version = "2025-06-18"
    assert await store.save(made[1], create=False)
    assert (await other.load(made[1].id, tenant_id=TENANT)).protocol_version == "2025-06-18"  # type: ignore[union-attr]

    sync = sync_client(cluster.url)
    listed, total = session_list(sync, tenant_id=TENANT, ttl_seconds=60, limit=10, clock=clock)
    assert total == 24 and len(listed) == 10 and listed[0].state.backends == {"demo": DEMO}
    await store.delete(made[2].id)
    assert await other.load(made[2].id, tenant_id=TENANT) is None
    assert session_count(sync, tenant_id=TENANT, ttl_seconds=60, clock=clock) == 23

    clock.now += 40
    kept = made[3:6]
    for session in kept:
        assert await other.load(session.id, tenant_id=TENANT, key_id=KEY) is not None
    clock.now += 30
    sweepers = (_store(client, clock=clock), _store(client, instance="gw-b", clock=clock))
    taken: list[SessionState] = []
    while batch := [s for found in await asyncio.gather(*(x.take_expired(limit=7) for x in sweepers)) for s in found]:
        taken += batch
    assert sorted(s.id for s in taken) == sorted(s.id for s in made if s not in kept and s is not made[2])
    assert all(s.backends == {"demo": DEMO} for s in taken)  # what the sweep needs to close them
    assert session_count(sync, tenant_id=TENANT, ttl_seconds=60, clock=clock) == 3
    await client.aclose()


async def test_hundreds_of_commands_at_once_on_a_fresh_cluster_client_all_succeed(cluster: Cluster) -> None:
    """A gateway's first calls reach a cluster client that has not loaded the slot map yet, and a
    busy tenant sends hundreds of commands to one node at once."""
    for round_ in range(1, 6):
        client = async_client(cluster.url)
        store = _store(client)
        created = await asyncio.gather(*(store.save(_state(store, tenant_id=43), create=True) for _ in range(300)))
        assert all(created)
        assert session_count(sync_client(cluster.url), tenant_id=43, ttl_seconds=60) == 300 * round_
        await client.aclose()


async def test_a_keys_cap_holds_on_a_cluster_when_instances_create_at_once(cluster: Cluster) -> None:
    stores = [_store(async_client(cluster.url), instance=f"gw-{n}", cap=3) for n in range(4)]

    async def create(store: RedisSessionStore) -> bool:
        try:
            return await store.save(_state(store, tenant_id=42), create=True)
        except SessionLimitReached:
            return False

    created = await asyncio.gather(*(create(stores[n % 4]) for n in range(20)))
    assert sum(created) == 3
    assert session_count(sync_client(cluster.url), tenant_id=42, ttl_seconds=60) == 3


async def test_limits_and_budgets_are_exact_on_a_cluster_and_read_back_by_the_console(
    cluster: Cluster, on_redis: object
) -> None:
    tenant = Tenant(pk=900, slug="cluster-limits")
    limiters = [RedisRateLimiter(async_client(cluster.url), fail_open=False) for _ in range(3)]
    limit = Limit(tenant.pk, "key", "k1", 10, 60)
    budget = Budget(tenant.pk, "key", "k1", 25, None)
    answers = await asyncio.gather(*(limiters[n % 3].admit([limit], [budget], cost=2) for n in range(16)))
    assert sum(a.refused_by is None for a in answers) == 10  # the rate limit, across three instances
    refused = [a for a in answers if a.refused_by is not None]
    assert all(a.checked and a.refused_by == limit for a in refused)
    more = [await limiters[0].admit([], [budget], cost=2) for _ in range(4)]
    assert [a.refused_by is None for a in more] == [True, True, False, False]  # 20 + 4 = 24; 26 > 25
    on_redis(cluster.url)  # type: ignore[operator]
    row = RateLimit(pk=1, tenant_id=tenant.pk, scope="key", name="k1", limit=10, window_seconds=60)
    assert (await asyncio.to_thread(rate_limit_usage, limits=[row]))[row.pk].used == 10
    spent = await asyncio.to_thread(budget_usage, tenant=tenant, subjects=[("key", "k1")])
    assert spent[("key", "k1")].day == 24


async def test_instances_hear_each_other_through_a_cluster(cluster: Cluster) -> None:
    heard: list[ReplicaState] = []
    feeds = []
    for name in ("gw-a", "gw-b"):
        client = async_client(cluster.url)
        subscription = RedisSubscription(client, retry_seconds=0.1)
        feeds.append(RedisHealthFeed(client, subscription, instance=f"{name}:1", name=name))
    feeds[1].start(heard.append)
    await asyncio.sleep(0.3)  # subscribed
    feeds[0].publish(ReplicaState("http://10.9.0.1/mcp", False, time.time()))
    deadline = time.monotonic() + 5
    while not heard:
        assert time.monotonic() < deadline, "nothing heard"
        await asyncio.sleep(0.02)
    assert heard[0].url == "http://10.9.0.1/mcp" and not heard[0].up


async def test_list_changes_announced_by_the_control_plane_are_heard_through_a_cluster(
    cluster: Cluster, on_redis: object, transactional_db: None
) -> None:
    on_redis(cluster.url)  # type: ignore[operator]
    client = async_client(cluster.url)
    heard: list[tuple[int, str]] = []
    feed = RedisChangeFeed(client, instance="gw-a:1", reindex=None, subscription=RedisSubscription(client, retry_seconds=0.1))
    feed.start(lambda backend, notification: heard.append((backend, notification)))
    await asyncio.sleep(0.3)  # subscribed
    await asyncio.to_thread(list_changed_announce, backend_id=-9, notification="notifications/tools/list_changed")
    # And from another instance, with tool indexing off (no reindex trigger): shared all the same.
    failures: list[dict[str, object]] = []
    asyncio.get_running_loop().set_exception_handler(  # a task that raised, never awaited
        lambda loop, context: failures.append(context) if "exception" in context else None)
    RedisChangeFeed(async_client(cluster.url), instance="gw-b:1", reindex=None).publish(-9, "notifications/prompts/list_changed")
    deadline = time.monotonic() + 5
    while len(heard) < 2:
        assert time.monotonic() < deadline, f"heard only {heard}"
        await asyncio.sleep(0.02)
    gc.collect()
    assert sorted(heard) == [(-9, "notifications/prompts/list_changed"), (-9, "notifications/tools/list_changed")]
    assert failures == []


async def test_the_audit_tail_and_the_sign_in_throttle_work_on_a_cluster(
    cluster: Cluster, on_redis: object, settings
) -> None:  # noqa: ANN001
    on_redis(cluster.url)  # type: ignore[operator]
    watched_at = await live.audit_live_watch(tenant_id=5)
    assert abs(watched_at - time.time()) < 5  # Redis's clock, read by the script that set the mark
    settings.CONSOLE_LOGIN_FAILURES_PER_USER = 2
    for _ in range(2):
        await asyncio.to_thread(login_failure_record, username="mia", address="10.0.0.9")
    assert 0 < await asyncio.to_thread(login_wait_seconds, username="mia", address="10.0.0.9")
    assert await asyncio.to_thread(login_wait_seconds, username="mia", address="10.0.0.8") == 0


async def test_a_cluster_master_failing_over_keeps_sessions_and_limits() -> None:
    """Kill the master that holds the tenant's indexes and counters: once its replica took over,
    the same clients go on; every session made before the kill is still there (each was
    replicated long before it), and counts continue from what the replica had."""
    with redis_cluster() as cluster:
        client = async_client(cluster.url)
        store = _store(client)
        made = await _sessions(store, 12)
        limiter = RedisRateLimiter(client, fail_open=False)
        limit = Limit(TENANT, "key", "k1", 6, 60)
        assert all([(await limiter.admit([limit])).refused_by is None for _ in range(4)])
        await asyncio.sleep(0.2)  # replication is asynchronous: give it a moment, as time does in production
        victim = cluster.master_of(f"gw:sessions:{{t{TENANT}}}")
        await asyncio.to_thread(cluster.fail_over, victim)
        # The client learns the new slot map on its first refused command.
        assert await _loaded_once_redis_answers(store, made, seconds=10) == made
        assert await store.save(_state(store), create=True)
        admitted = [(await limiter.admit([limit])).refused_by is None for _ in range(4)]
        assert admitted == [True, True, False, False]
        await client.aclose()


async def test_a_sentinel_failover_mid_run_keeps_sessions_limits_and_subscriptions() -> None:
    with redis_sentinels() as setup:
        url = setup.url(db=2)
        client = async_client(url)
        store = _store(client)
        made = await _sessions(store, 10)
        limiter = RedisRateLimiter(client, fail_open=False, probe_seconds=0.05)
        limit = Limit(TENANT, "key", "k1", 6, 60)
        assert all([(await limiter.admit([limit])).refused_by is None for _ in range(4)])
        heard: list[ReplicaState] = []
        listener = RedisHealthFeed(async_client(url), RedisSubscription(async_client(url), retry_seconds=0.1),
                                   instance="gw-b:1", name="gw-b")
        listener.start(heard.append)
        await asyncio.sleep(0.3)
        await asyncio.sleep(0.2)  # replication
        await asyncio.to_thread(setup.kill_master)
        assert await _loaded_once_redis_answers(store, made, seconds=15) == made
        deadline = time.monotonic() + 15
        admitted = []
        while len(admitted) < 4:  # the limiter probes until the new master answers
            admission = await limiter.admit([limit])
            if admission.checked:
                admitted.append(admission.refused_by is None)
            else:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
        assert admitted == [True, True, False, False]
        sender = RedisHealthFeed(client, RedisSubscription(client), instance="gw-a:1", name="gw-a")
        while not heard:  # the listener subscribed again on the new master
            sender.publish(ReplicaState("http://10.9.0.2/mcp", False, time.time()))
            assert time.monotonic() < deadline, "nothing heard after the failover"
            await asyncio.sleep(0.2)
        with pytest.raises(redis.RedisError):
            redis.Redis(port=setup.master).ping()  # the old master really is gone
        await client.aclose()
