"""The upgrade moves each tenant's rate-limit buckets and budget spending under the tenant's hash
tag, keeping what was spent (and when it expires); what an instance of this release already wrote
under the new name is kept."""

from __future__ import annotations

import importlib

import pytest

from apps.common.redis import redis_client
from apps.kernel.identity import Budget
from apps.policies.counters import budget_key

pytestmark = pytest.mark.usefixtures("clean_redis")

migration = importlib.import_module("apps.policies.migrations.0005_counters_tagged")


def test_counters_move_under_their_tenants_tag_with_their_spending_and_expiry() -> None:
    client = redis_client()
    client.hset("gw:bg:3101:key:ci", mapping={"d": 20000, "du": 17})
    client.expire("gw:bg:3101:key:ci", 5000)
    client.set("gw:rl:3101:team:ops", "123.000", px=60_000)
    client.hset("gw:bg:3102:team:ops", mapping={"du": 1})  # an old name beside a newer one
    client.hset(budget_key(Budget(3102, "team", "ops", None, None)), mapping={"du": 9})
    migration.counters_retag(None, None)
    moved = budget_key(Budget(3101, "key", "ci", None, None))
    assert client.hget(moved, "du") == b"17" and 4990 < client.ttl(moved) <= 5000
    assert client.get("gw:rl:{t3101}:team:ops") == b"123.000" and not client.exists("gw:rl:3101:team:ops")
    assert not client.exists("gw:bg:3101:key:ci")
    assert client.hget(budget_key(Budget(3102, "team", "ops", None, None)), "du") == b"9"
