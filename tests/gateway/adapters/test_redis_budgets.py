"""Budgets in the Redis limiter's Lua script, against the real test Redis: caps in cost units per UTC
day and month, checked and charged with the rate limits in one script. The time is passed in (`now`),
so a test can stand just before midnight, cross into the next day, month or a leap day."""

from __future__ import annotations

import asyncio
import calendar
import itertools
import time
from collections.abc import AsyncIterator

import pytest
import redis.asyncio
from django.conf import settings

from apps.gateway.adapters.redis_rate_limiter import RedisRateLimiter
from apps.kernel.identity import Budget, Limit
from apps.policies.counters import budget_key
from tests.processes import free_port

pytestmark = pytest.mark.usefixtures("clean_redis")

_tenants = itertools.count(time.time_ns() % 10**9)


def at(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: float = 0) -> float:
    """Unix time of a UTC wall-clock time."""
    return calendar.timegm((year, month, day, hour, minute, 0)) + second


def budget(
    daily: int | None = None, monthly: int | None = None, scope: str = "key", name: str = "agent", tenant: int = 0
) -> Budget:
    return Budget(tenant or next(_tenants), scope, name, daily, monthly)


@pytest.fixture
async def limiter() -> AsyncIterator[RedisRateLimiter]:
    client = redis.asyncio.Redis.from_url(settings.REDIS_URL)
    yield RedisRateLimiter(client)
    await client.aclose()


async def spend(limiter: RedisRateLimiter, budgets: list[Budget], costs: list[int], now: float) -> list[bool]:
    return [(await limiter.admit([], budgets, cost, now=now)).refused_by is None for cost in costs]


async def test_a_daily_cap_admits_its_units_and_then_refuses_until_midnight_utc(limiter: RedisRateLimiter) -> None:
    ten = budget(daily=10)
    now = at(2026, 11, 30, 22, 0, 0.25)
    assert await spend(limiter, [ten], [5, 3, 3, 2], now) == [True, True, False, True]  # 5+3 (+3 no) +2 = 10
    refused = await limiter.admit([], [ten], 1, now=now)
    assert (refused.refused_by, refused.period, refused.checked) == (ten, "day", True)
    assert refused.retry_after == pytest.approx(2 * 3600 - 0.25)  # until 2026-12-01 00:00 UTC
    # A second before midnight it is still spent; at midnight the new day starts from zero.
    assert await spend(limiter, [ten], [1], at(2026, 11, 30, 23, 59, 59)) == [False]
    assert await spend(limiter, [ten], [10, 1], at(2026, 12, 1)) == [True, False]


async def test_free_calls_and_a_zero_cap(limiter: RedisRateLimiter) -> None:
    zero = budget(daily=0)
    now = at(2026, 11, 30, 12)
    assert await spend(limiter, [zero], [1], now) == [False]
    assert (await limiter.admit([], [zero], 0, now=now)).refused_by is None  # 0 + 0 <= 0


async def test_a_monthly_cap_spans_days_and_resets_with_the_utc_month(limiter: RedisRateLimiter) -> None:
    month = budget(daily=6, monthly=10)
    assert await spend(limiter, [month], [6, 1], at(2026, 2, 27, 9)) == [True, False]  # the day's cap
    assert await spend(limiter, [month], [4, 1], at(2026, 2, 28, 9)) == [True, False]  # the month's cap
    refused = await limiter.admit([], [month], 1, now=at(2026, 2, 28, 9))
    assert refused.period == "month" and refused.retry_after == pytest.approx(15 * 3600)  # until March 1st
    assert await spend(limiter, [month], [6], at(2026, 3, 1)) == [True]


async def test_a_spent_month_outlasts_a_spent_day(limiter: RedisRateLimiter) -> None:
    both = budget(daily=5, monthly=5)
    now = at(2028, 2, 28, 12)  # 2028 is a leap year: February has 29 days
    assert await spend(limiter, [both], [5], now) == [True]
    refused = await limiter.admit([], [both], 1, now=now)
    assert refused.period == "month" and refused.retry_after == pytest.approx(36 * 3600)  # until March 1st
    assert await spend(limiter, [both], [1], at(2028, 2, 29, 23)) == [False]  # Feb 29th: the same month
    assert await spend(limiter, [both], [1], at(2028, 3, 1)) == [True]


async def test_december_rolls_into_january(limiter: RedisRateLimiter) -> None:
    yearly = budget(monthly=3)
    assert await spend(limiter, [yearly], [3, 1], at(2026, 12, 31, 23, 59)) == [True, False]
    assert (await limiter.admit([], [yearly], 1, now=at(2026, 12, 31, 23, 59))).retry_after == pytest.approx(60)
    assert await spend(limiter, [yearly], [3], at(2027, 1, 1)) == [True]


async def test_a_cap_added_mid_month_sees_the_months_spending(limiter: RedisRateLimiter) -> None:
    tenant = next(_tenants)
    daily_only = budget(daily=100, tenant=tenant)
    assert await spend(limiter, [daily_only], [40], at(2026, 11, 2)) == [True]
    assert await spend(limiter, [daily_only], [40], at(2026, 11, 3)) == [True]
    capped = budget(daily=100, monthly=100, tenant=tenant)  # the same key, a monthly cap added
    assert await spend(limiter, [capped], [21, 20], at(2026, 11, 4)) == [False, True]


async def test_a_refusal_charges_nothing_anywhere(limiter: RedisRateLimiter) -> None:
    tenant = next(_tenants)
    key, team = budget(daily=100, tenant=tenant), budget(daily=10, scope="team", name="platform", tenant=tenant)
    rate = Limit(tenant, "key", "agent", 2, 3600)
    now = at(2026, 11, 30, 12)
    # The team's budget refuses: neither the key's budget nor the rate limit is charged.
    refused = await limiter.admit([rate], [key, team], 11, now=now)
    assert (refused.refused_by, refused.period) == (team, "day")
    assert (await limiter.admit([rate], [key, team], 10, now=now)).refused_by is None  # the rate limit's 1st
    assert (await limiter.admit([rate], [key], 1, now=now)).refused_by is None
    # The rate limit refuses (its third call): no budget is charged either.
    assert (await limiter.admit([rate], [key], 1, now=now)).refused_by == rate
    assert await spend(limiter, [key], [89, 1], now) == [True, False]  # 10 + 1 + 89 = 100
    # The budget hash lives until the month is over, and no longer than an hour after.
    ttl = await limiter._client.pttl(budget_key(key))
    assert 0 < ttl <= (at(2026, 12, 1) - now + 3600) * 1000


async def test_two_limiters_at_once_never_overspend() -> None:
    clients = [redis.asyncio.Redis.from_url(settings.REDIS_URL) for _ in range(2)]
    limiters = [RedisRateLimiter(c) for c in clients]
    shared = budget(daily=100)
    now = at(2026, 11, 30, 12)
    answers = await asyncio.gather(*(limiters[i % 2].admit([], [shared], 3, now=now) for i in range(200)))
    assert sum(a.refused_by is None for a in answers) == 33  # 33 * 3 = 99; a 34th would be 102
    for c in clients:
        await c.aclose()


async def test_with_redis_unreachable_budgets_fail_open_or_closed_as_configured() -> None:
    client = redis.asyncio.Redis.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=0.5)
    five = budget(daily=5)
    opened = await RedisRateLimiter(client).admit([], [five], 1)
    closed = await RedisRateLimiter(client, fail_open=False).admit([], [five], 1)
    assert (opened.refused_by, opened.checked) == (None, False)
    assert (closed.refused_by, closed.checked) == (five, False)
    await client.aclose()


async def test_redis_time_is_the_clock_when_none_is_given(limiter: RedisRateLimiter) -> None:
    one = budget(daily=1)
    assert (await limiter.admit([], [one], 1)).refused_by is None
    refused = await limiter.admit([], [one], 1)
    midnight = (int(time.time()) // 86400 + 1) * 86400
    assert refused.period == "day" and abs(refused.retry_after - (midnight - time.time())) < 5


async def test_a_script_flushed_from_redis_is_loaded_again(limiter: RedisRateLimiter) -> None:
    await limiter._client.script_flush()  # as after a Redis restart
    assert (await limiter.admit([], [budget(daily=1)], 1)).refused_by is None


async def test_an_admission_cut_short_never_answers_the_next_one(limiter: RedisRateLimiter) -> None:
    spent = budget(daily=0)  # always refused
    for steps in range(6):  # cut at every point of the exchange: before, while and after sending
        task = asyncio.create_task(limiter.admit([], [spent], 1))
        for _ in range(steps):
            await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        fresh = budget(daily=1)
        assert (await limiter.admit([], [fresh], 1)).refused_by is None, steps  # not the refusal sent before
