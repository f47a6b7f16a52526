"""Handshake-era sessions at volume (docs/scale.md): what 100,000 idle sessions cost Redis, what
creating, renewing and sweeping them costs, on one Redis server and on a Redis Cluster of three
masters, each started fresh on loopback for the run (so memory is the sessions' alone).

    .venv/bin/python -m bench.sessions_volume [--sessions 100000] [--output BENCHMARKS.md]

Sessions are made by the gateway's own store (`RedisSessionStore`), each with one backend session,
spread over 100 tenants of 10 keys each (100 sessions per key: under the per-key cap). Measured:
- Redis memory per session (`used_memory` before and after, summed over the masters);
- creation: sessions/s from 64 concurrent creators (one process, one event loop);
- a renewal (`load` past the in-process cache: the script and the index moves) per second;
- the console's first page of one tenant's sessions (1,000 of them), ms;
- a sweep tick that finds nothing (what every instance pays each second), ms;
- the sweep of all of them once idle past the expiry (take, then delete, as the gateway's sweep
  does), sessions/s."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gatewaysite.settings.dev")
django.setup()

import redis  # noqa: E402

from apps.common.redis import async_client, sync_client  # noqa: E402
from apps.gateway.adapters.redis_session_store import RedisSessionStore, session_list  # noqa: E402
from apps.gateway.pipeline.values import BackendSession, SessionState  # noqa: E402
from tests.processes import free_port, running  # noqa: E402
from tests.redis_servers import redis_cluster, redis_server_binary  # noqa: E402

TENANTS, KEYS = 100, 10
TTL = 3600
CONCURRENCY = 64


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@contextmanager
def single_server() -> Iterator[tuple[str, list[int]]]:
    port = free_port()
    argv = [redis_server_binary(), "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"]
    with running(argv, port, log_name="bench-redis"):
        yield f"redis://127.0.0.1:{port}/0", [port]


@contextmanager
def three_masters() -> Iterator[tuple[str, list[int]]]:
    with redis_cluster() as cluster:
        yield cluster.url, cluster.masters


def used_memory(ports: list[int]) -> int:
    return sum(int(redis.Redis(port=port).info("memory")["used_memory"]) for port in ports)


def state(store: RedisSessionStore, n: int) -> SessionState:
    tenant = n % TENANTS
    return SessionState(id=store.new_id(), tenant_id=1000 + tenant, vhost="main", key_id=(n // TENANTS) % KEYS,
                        protocol_version="2025-11-25", client_capabilities={"roots": {"listChanged": True}},
                        client_info={"name": "claude-code", "version": "2.1.0"}, tenant_slug=f"tenant-{tenant}")


async def in_parallel(count: int, work: Callable[[int], object]) -> float:
    """Seconds to run work(0..count-1), CONCURRENCY at a time."""
    started = time.perf_counter()
    queue = iter(range(count))

    async def worker() -> None:
        for n in queue:
            await work(n)  # type: ignore[misc]

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return time.perf_counter() - started


async def measure(url: str, ports: list[int], sessions: int) -> dict[str, float]:
    clock = Clock()
    client = async_client(url)
    store = RedisSessionStore(client, secret="bench", instance="gw-1", ttl_seconds=TTL, cache_seconds=0, clock=clock)
    backend = BackendSession("3f1c8e2a-5b7d-4c1e-9a8f-0d2b6e4c7a91", "2025-11-25", "http://10.0.3.17:8000/mcp", "h")
    states: list[SessionState] = []
    before = used_memory(ports)

    async def create(n: int) -> None:
        made = state(store, n)
        await store.save(made, create=True)
        await store.save_backend(made.id, "github", backend)
        states.append(made)

    created = await in_parallel(sessions, create)
    after = used_memory(ports)

    async def renew(n: int) -> None:
        made = states[n]
        await store.load(made.id, tenant_id=made.tenant_id, key_id=made.key_id)

    renewals = min(sessions, 20_000)
    renewed = await in_parallel(renewals, renew)

    sync = sync_client(url)
    started = time.perf_counter()
    for _ in range(20):
        page, total = session_list(sync, tenant_id=1000, ttl_seconds=TTL, limit=50, clock=clock)
    listed = (time.perf_counter() - started) / 20
    assert total == sessions // TENANTS and len(page) == 50, (total, len(page))

    started = time.perf_counter()
    for _ in range(50):
        assert await store.take_expired() == []
    idle_tick = (time.perf_counter() - started) / 50

    clock.now += TTL + 1
    started = time.perf_counter()
    swept = 0
    while taken := await store.take_expired(limit=100):
        for session in taken:
            await store.delete(session.id)
        swept += len(taken)
    sweep = time.perf_counter() - started
    assert swept == sessions, (swept, sessions)
    left = used_memory(ports)
    keys_left = sum(int(redis.Redis(port=port).dbsize()) for port in ports)
    await client.aclose()
    return {
        "bytes_per_session": (after - before) / sessions,
        "created_per_s": sessions / created,
        "renewed_per_s": renewals / renewed,
        "list_page_ms": listed * 1000,
        "idle_tick_ms": idle_tick * 1000,
        "swept_per_s": sessions / sweep,
        "left_bytes": left - before,
        "keys_left": keys_left,
    }


def report(results: dict[str, dict[str, float]], sessions: int) -> str:
    rows = [
        ("Redis memory per session (bytes)", "bytes_per_session", "{:,.0f}"),
        ("created / s (64 concurrent, one process)", "created_per_s", "{:,.0f}"),
        ("renewed / s (load past the cache)", "renewed_per_s", "{:,.0f}"),
        ("console page of a tenant's sessions (ms)", "list_page_ms", "{:.2f}"),
        ("sweep tick finding nothing (ms)", "idle_tick_ms", "{:.2f}"),
        ("swept (taken + deleted) / s", "swept_per_s", "{:,.0f}"),
        ("memory left after the sweep (bytes)", "left_bytes", "{:,.0f}"),
        ("keys left after the sweep", "keys_left", "{:,.0f}"),
    ]
    names = list(results)
    lines = [f"| {sessions:,} sessions | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for label, key, fmt in rows:
        lines.append(f"| {label} | " + " | ".join(fmt.format(results[name][key]) for name in names) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    results = {}
    for name, topology in (("one Redis server", single_server), ("Redis Cluster, 3 masters", three_masters)):
        with topology() as (url, ports):
            results[name] = asyncio.run(measure(url, ports, args.sessions))
    table = report(results, args.sessions)
    print(table)
    if args.output:
        with args.output.open("a") as out:
            out.write(f"\n<!-- bench.sessions_volume {datetime.date.today()} {platform.machine()} "
                      f"{os.cpu_count()} cores -->\n{table}\n")


if __name__ == "__main__":
    main()
