"""Three gateway instances behind nginx round robin, official-SDK clients of every kind making mixed
calls, and mid-run Redis fails over (docs/scale.md, "Redis Cluster and Sentinel"):
- on a Redis Cluster (three masters, a replica each, on loopback), the master that holds the
  tenant's session indexes and counters fails and its replica takes its slots;
- on a Sentinel setup (a master, a replica, three sentinels) — the channel layer too, so the
  HTTP+SSE relay crosses it — the master is killed and the sentinels promote the replica.

What a failover may cost: until the replica is promoted (about 1–3 s here) and the instances have
found it, commands to the lost master fail or wait, so calls whose session or counters live there
may fail (a session-store error is an error answer; limits fail open). Every call that starts once
Redis is whole again succeeds, on the same sessions and the same backend replicas."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
import redis
from django.conf import settings

from apps.tenants.models import Tenant
from bench.cluster.clients import HTTP_SSE, STATELESS, STREAMABLE_SESSION, Load, run_load
from bench.cluster.nginx import MISSING, nginx_binary
from bench.cluster.topology import PAIR, SOLO, Cluster, Plan, cluster
from tests.processes import ROOT, gateway_env
from tests.redis_servers import redis_cluster, redis_sentinels

pytestmark = pytest.mark.slow

KEY = "redis-cluster-test-key-0123456789abcdef"
TEST_KINDS = [STREAMABLE_SESSION, STATELESS, HTTP_SSE]
CLIENTS_PER_KIND = 3
SECONDS_BEFORE = 5.0
SECONDS_AFTER = 12.0
#: After the replica took the slots: how long instances may still fail calls while they learn the
#: new slot map (each client's next command to the old master is refused and reloads the map).
SETTLE_SECONDS = 3.0


@dataclass
class Topology:
    gateways: Cluster
    index_node: Callable[[str], int]  # the port of the Redis that holds a key now
    fail_over: Callable[[int], object]  # stop that Redis, return once its replica serves
    db: int = 0  # the gateways' database there


@pytest.fixture(params=["cluster", "sentinel"])
def gateways_on_redis(request: pytest.FixtureRequest, transactional_db: None) -> Iterator[Topology]:
    if nginx_binary() is None:
        if os.environ.get("CI") == "true":
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    database = settings.DATABASES["default"]["NAME"]
    var_dir = ROOT / "var" / "test-logs" / f"redis-{request.param}"
    if request.param == "cluster":
        with redis_cluster() as nodes:
            # The channel layer (HTTP+SSE relay, tool list pushes) stays on a single server:
            # channels-redis has no cluster client.
            env = gateway_env(database, nodes.url, GATEWAY_CHANNEL_LAYER_URLS=settings.REDIS_URL)
            with cluster(Plan(gateway_env=env, key=KEY, instances=3, var_dir=var_dir)) as running:
                yield Topology(running, nodes.master_of, nodes.fail_over)
    else:
        with redis_sentinels() as sentinels:
            env = gateway_env(database, sentinels.url(db=1), GATEWAY_CHANNEL_LAYER_URLS=sentinels.url(db=2))
            with cluster(Plan(gateway_env=env, key=KEY, instances=3, var_dir=var_dir)) as running:
                yield Topology(running, lambda key: sentinels.current_master(), lambda port: sentinels.kill_master(), db=1)


def test_three_instances_carry_every_session_through_a_redis_failover(gateways_on_redis: Topology) -> None:
    running = gateways_on_redis.gateways
    hosts = [(running.host_url(PAIR), ["alpha-", "beta-"]), (running.host_url(SOLO), [""])]
    tenant_id = Tenant.objects.get(slug=running.tenant).pk
    index = f"gw:sessions:{{t{tenant_id}}}"
    victim = gateways_on_redis.index_node(index)
    load = Load()

    async def scenario() -> tuple[float, float]:
        clients = asyncio.ensure_future(run_load(hosts, KEY, clients_per_kind=CLIENTS_PER_KIND, kinds=TEST_KINDS,
                                                 seconds=SECONDS_BEFORE + SECONDS_AFTER, load=load))
        await asyncio.sleep(SECONDS_BEFORE)
        # The failover hits what the instances really use: the tenant's sessions are indexed there.
        assert redis.Redis(port=victim, db=gateways_on_redis.db).zcard(index) >= CLIENTS_PER_KIND * 2
        killed_at = time.monotonic()
        await asyncio.to_thread(gateways_on_redis.fail_over, victim)
        whole_at = time.monotonic()
        await clients
        return killed_at, whole_at

    killed_at, whole_at = asyncio.run(scenario())
    calls = [r for r in load.records if r.method not in {"connect", "close"}]
    before = [r for r in calls if r.started + r.ms / 1000 < killed_at]
    settled = [r for r in calls if r.started > whole_at + SETTLE_SECONDS]
    window = [r for r in calls if r not in before and r not in settled]
    assert not [r for r in load.records if r.method == "connect" and r.error], load.errors()
    assert before and not [r for r in before if r.error], [r for r in before if r.error]
    assert not [r for r in settled if r.error], [r for r in settled if r.error]
    for client in {(r.kind, r.client) for r in calls}:  # every session was used before and goes on after
        assert any((r.kind, r.client) == client for r in before), client
        assert sum(1 for r in settled if (r.kind, r.client) == client) >= 3, client
    # Sessions kept their backend replicas throughout: none was routed to a replica without it.
    stats = running.replica_stats()
    assert [s["not_found"] for s in stats] == [0] * len(stats), stats
    failed = [r for r in window if r.error]
    print(f"\nfailover took {whole_at - killed_at:.1f} s; {len(calls)} calls, {len(window)} in the failover window "
          f"(+{SETTLE_SECONDS} s), {len(failed)} of them failed: {sorted({str(r.error)[:80] for r in failed})}")
