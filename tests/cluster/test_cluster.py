"""The scale-out harness in CI (docs/sessions.md, "Many instances"): three gateway instances behind nginx doing plain
round robin, two stateful backends of two replicas each (a request routed to the wrong replica for
its session gets the SDK's 404), and official-SDK clients of every kind (Streamable HTTP sessions,
stateless 2026-07-28, HTTP+SSE) making mixed calls at once. One instance — one that holds HTTP+SSE
streams — is SIGKILLed mid-run: every session carries on on the other two, the HTTP+SSE clients
after opening their stream again on the same session.

What a kill may cost: a POST that nginx had already sent to the killed instance dies with it (502).
nginx does not replay it elsewhere — it may have reached the backend, and a tools/call is not
idempotent (see bench/cluster/nginx.py) — so only calls in flight at the kill may fail, at most one
per client, and the counter may then have advanced by one or two. Every call that starts after the
kill must succeed, with its session's counter exactly one higher, on the same replica."""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from bench.cluster.clients import HTTP_SSE, STATELESS, STREAMABLE_SESSION, Load, run_load
from bench.cluster.nginx import MISSING, nginx_binary
from bench.cluster.topology import PAIR, SOLO, Cluster, Plan, cluster
from tests.processes import ROOT, gateway_env

pytestmark = pytest.mark.slow

KEY = "cluster-test-key-0123456789abcdef"
# HTTP+SSE clients whose stream lived on the killed instance open it again on the same session
# (bench.cluster.clients.ResumableSse) and go on with the same backend sessions.
TEST_KINDS = [STREAMABLE_SESSION, STATELESS, HTTP_SSE]
CLIENTS_PER_KIND = 4
SECONDS_BEFORE_KILL = 6.0
SECONDS_AFTER_KILL = 12.0  # room for an HTTP+SSE client to time out one lost answer, reopen, go on


@pytest.fixture
def running_cluster(transactional_db: None) -> Iterator[Cluster]:
    if nginx_binary() is None:
        if os.environ.get("CI") == "true":
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    env = gateway_env(settings.DATABASES["default"]["NAME"], settings.REDIS_URL)
    plan = Plan(gateway_env=env, key=KEY, instances=3, var_dir=ROOT / "var" / "test-logs" / "cluster", access_log=True)
    with cluster(plan) as running:
        yield running


def _served_by(access_log: Path, port: int) -> int:
    """Requests of the access log that the instance on `port` answered."""
    lines = access_log.read_text().splitlines() if access_log.exists() else []
    return sum(1 for line in lines if line.split(" -> ")[-1].split(" ")[0] == f"127.0.0.1:{port}")


def test_sessions_survive_round_robin_and_a_killed_instance(running_cluster: Cluster) -> None:
    hosts = [(running_cluster.host_url(PAIR), ["alpha-", "beta-"]), (running_cluster.host_url(SOLO), [""])]
    access_log = ROOT / "var" / "test-logs" / "cluster" / "nginx" / "access.log"
    load = Load()
    orphans: list[int] = []  # the HTTP+SSE clients whose stream was on the killed instance

    async def scenario() -> float:
        clients = asyncio.ensure_future(run_load(hosts, KEY, clients_per_kind=CLIENTS_PER_KIND, kinds=TEST_KINDS,
                                                 seconds=SECONDS_BEFORE_KILL + SECONDS_AFTER_KILL, load=load))
        await asyncio.sleep(SECONDS_BEFORE_KILL)
        # Kill an instance that holds HTTP+SSE streams: a session id names the instance that minted
        # it, the one the client's stream opened on (gw-<n>, n from 1).
        holders = Counter(str(c.session_id).split(".")[0] for c in load.sse_clients.values())
        victim = int(holders.most_common(1)[0][0].removeprefix("gw-")) - 1
        orphans.extend(i for i, c in load.sse_clients.items() if str(c.session_id).startswith(f"gw-{victim + 1}."))
        served_before_kill = _served_by(access_log, running_cluster.gateways[victim].port)
        running_cluster.kill_gateway(victim)
        killed_at = time.monotonic()
        await clients
        assert served_before_kill > 0, "the killed instance had served nothing: the kill proved nothing"
        return killed_at

    killed_at = asyncio.run(scenario())

    calls = [r for r in load.records if r.method not in {"connect", "close"}]
    before = [r for r in calls if r.started + r.ms / 1000 < killed_at]
    after = [r for r in calls if r.started > killed_at]
    in_flight = [r for r in calls if r not in before and r not in after]
    assert not [r for r in load.records if r.method in {"connect", "close"} and r.error], load.errors()
    assert not [r for r in before if r.error], [r for r in before if r.error]
    # Calls that start after the kill succeed, but for one failure per HTTP+SSE client: one whose
    # stream died may learn of it only from its next call; one whose POST the dead instance had
    # accepted (202) waits for an answer that never comes. Each then opens its stream again.
    failed_after = [r for r in after if r.error]
    assert all(r.client in load.sse_clients for r in failed_after), failed_after
    for client in load.sse_clients:
        failed = [r for r in [*in_flight, *after] if r.client == client and r.error]
        assert len(failed) <= 1, (client, killed_at, failed)
    assert len([r for r in in_flight if r.error]) <= CLIENTS_PER_KIND * len(TEST_KINDS)
    clients = {r.client for r in calls}
    assert len(clients) == CLIENTS_PER_KIND * len(TEST_KINDS)
    for client in clients:  # every session was in use before the kill and carried on after it
        assert any(r.client == client for r in before), client
        assert sum(1 for r in after if r.client == client) >= 5, client
    # The HTTP+SSE clients whose stream died with its instance opened it again and went on.
    assert orphans, "no HTTP+SSE stream was on the killed instance"
    for client in orphans:
        assert load.sse_clients[client].reconnects >= 1, client
    # The gateway sends every backend request of a session with one routing hash (none, until it does).
    for client in range(CLIENTS_PER_KIND):  # the first kind's clients: STREAMABLE_SESSION
        assert len(load.routing_hashes.get(client, set())) <= 1, load.routing_hashes[client]
    # Not one request reached a replica that did not hold its session.
    stats = running_cluster.replica_stats()
    assert [s["not_found"] for s in stats] == [0] * len(stats), stats
    # The stats really count: every tools/call reached a replica (lists may come from a gateway's cache).
    assert sum(int(s["requests"]) for s in stats) > sum(1 for r in calls if r.method.startswith("tools/call"))
    print(f"\n{len(calls)} calls, {len(in_flight)} in flight at the kill, of which failed: "
          f"{[r.error for r in in_flight if r.error]}; replicas: {stats}")
