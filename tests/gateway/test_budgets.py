"""Budgets end to end, through a real gateway (docs/policies.md, "Budgets"): tool costs charged per call, a spent
daily budget refused with -32005 until the UTC day resets (through the official SDK client, in both
protocol eras), a team's budget as a ceiling over its keys, the plan's cap below the team's budget,
two instances sharing Redis under concurrency never overspending, and Redis gone failing open with
the audit row saying so. Each audit row carries the units the call cost."""

from __future__ import annotations

import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.conf import settings
from mcp.shared.exceptions import MCPError

from apps.kernel.costs import ToolCostSpec
from apps.policies.services import budget_set, tool_costs_set
from apps.tenants.services import plan_set, tenant_plan_set
from tests import factories
from tests.audit.helpers import audit_rows
from tests.conftest import mcp_client
from tests.gateway.adapters.test_redis_rate_limiter import redis_server
from tests.gateway.helpers import message_of, modern
from tests.processes import free_port, gateway_argv, gateway_env, running, stop

pytestmark = pytest.mark.slow

COSTS = [ToolCostSpec(["add"], 5), ToolCostSpec(["utc_*"], 0)]  # echo: 1, the default


def make_tenant(
    gateway_url: str,
    demo_backend_url: str,
    *,
    budgets: list[tuple[str, str, int | None, int | None]],
    costs: list[ToolCostSpec] = COSTS,
    plan_daily: int | None = None,
) -> dict[str, Any]:
    """A tenant with team `platform` (keys `agent` and `helper`) and key `loner` (no team), a host
    fronting the demo server, `budgets` as (scope, name, daily, monthly), and tool costs."""
    tenant = factories.tenant_factory()
    team = factories.team_factory(tenant=tenant, slug="platform")
    keys = {name: factories.api_key_factory(tenant=tenant, name=name, team=team).secret for name in ("agent", "helper")}
    keys["loner"] = factories.api_key_factory(tenant=tenant, name="loner").secret
    backend = factories.backend_factory(tenant=tenant, urls=[demo_backend_url])
    host = factories.virtual_host_factory(tenant=tenant, mounts={"demo": backend})
    tool_costs_set(virtual_host=host, costs=costs)
    for scope, name, daily, monthly in budgets:
        budget_set(tenant=tenant, scope=scope, name=name, daily=daily, monthly=monthly)
    if plan_daily is not None:
        tenant_plan_set(tenant=tenant, plan=plan_set(name=f"plan-{tenant.pk}", daily=plan_daily, monthly=None))
    return {
        "url": f"{gateway_url}/mcp/{tenant.slug}/{host.slug}",
        "tenant": tenant.slug,
        "keys": keys,
        "plan": f"plan-{tenant.pk}",
    }


def call(world: dict[str, Any], key: str, name: str = "add", i: int = 1, url: str | None = None) -> dict[str, Any]:
    arguments = {"a": i, "b": 1} if name == "add" else {"text": "x"} if name == "echo" else {}
    return message_of(
        modern(
            url or world["url"],
            "tools/call",
            {"name": name, "arguments": arguments},
            key=world["keys"][key],
            request_id=i,
        )
    )


def until_utc_midnight() -> float:
    return (int(time.time()) // 86400 + 1) * 86400 - time.time()


async def test_tools_cost_their_units_and_a_spent_daily_budget_refuses_until_midnight(
    transactional_db: None, gateway_url: str, demo_backend_url: str
) -> None:
    world = await database_sync_to_async(make_tenant)(
        gateway_url, demo_backend_url, budgets=[("key", "agent", 11, None)]
    )
    async with mcp_client(world["url"], world["keys"]["agent"], "legacy") as client:
        assert (await client.call_tool("add", {"a": 1, "b": 2})).content[0].text == "3.0"  # 5 units
        await client.call_tool("add", {"a": 1, "b": 2})  # 10
        assert (await client.call_tool("echo", {"text": "hi"})).content[0].text == "hi"  # 11: the budget is spent
        with pytest.raises(MCPError) as raised:
            await client.call_tool("add", {"a": 1, "b": 2})
        await client.call_tool("utc_now", {})  # free: still served
    error = raised.value.error
    assert error.code == -32005 and error.data["limit_scope"] == "key"
    assert abs(error.data["retry_after"] - until_utc_midnight()) < 5
    assert error.message == (
        "Over budget: key 'agent' has spent its daily budget of 11 units; this call costs 5, "
        "and it resets at the start of the next UTC day"
    )
    async with mcp_client(world["url"], world["keys"]["agent"], "2026-07-28") as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("echo", {"text": "hi"})
    assert raised.value.error.code == -32005

    rows = await database_sync_to_async(audit_rows)(world["tenant"], 6, method="tools/call")
    assert [(r.exposed_name, r.outcome, r.cost, r.limit_state) for r in rows] == [
        ("add", "ok", 5, "ok"),
        ("add", "ok", 5, "ok"),
        ("echo", "ok", 1, "ok"),
        ("add", "over_budget", 0, "limited"),
        ("utc_now", "ok", 0, ""),
        ("echo", "over_budget", 0, "limited"),
    ]
    assert rows[3].error_code == -32005


def test_a_teams_budget_is_a_ceiling_over_all_its_keys(
    transactional_db: None, gateway_url: str, demo_backend_url: str
) -> None:
    world = make_tenant(gateway_url, demo_backend_url, budgets=[("team", "platform", 3, 1000)], costs=[])
    assert ["result" in call(world, key) for key in ("agent", "agent", "helper")] == [True] * 3
    refused = call(world, "helper")["error"]
    assert refused["code"] == -32005 and refused["data"]["limit_scope"] == "team"
    assert "team 'platform' has spent its daily budget of 3 units" in refused["message"]
    assert call(world, "agent")["error"]["code"] == -32005
    assert "result" in call(world, "loner")  # not on the team


def test_the_plans_cap_wins_over_a_larger_budget_and_caps_keys_without_one(
    transactional_db: None, gateway_url: str, demo_backend_url: str
) -> None:
    world = make_tenant(
        gateway_url, demo_backend_url, budgets=[("team", "platform", 100, None)], costs=[], plan_daily=2
    )
    assert ["result" in call(world, "agent") for _ in range(2)] == [True, True]
    refused = call(world, "helper")["error"]
    assert refused["data"]["limit_scope"] == "team"
    assert f"daily budget of 2 units (plan '{world['plan']}')" in refused["message"]
    # A key with no budget of its own and no team is capped by the plan too.
    assert ["result" in call(world, "loner") for _ in range(3)] == [True, True, False]


def test_two_instances_under_200_concurrent_calls_never_overspend(
    transactional_db: None, gateway_url: str, demo_backend_url: str
) -> None:
    world = make_tenant(
        gateway_url, demo_backend_url, budgets=[("team", "platform", 101, None)], costs=[ToolCostSpec(["add"], 2)]
    )
    port = free_port()
    env = gateway_env(settings.DATABASES["default"]["NAME"], settings.REDIS_URL, GATEWAY_INSTANCE_ID="gw-budgets")
    with running(gateway_argv(port), port, env=env, log_name="gateway-budgets"):
        urls = [world["url"], world["url"].replace(gateway_url, f"http://127.0.0.1:{port}")]
        with ThreadPoolExecutor(20) as pool:
            answers = list(
                pool.map(lambda i: call(world, ("agent", "helper")[i % 2], "add", i, urls[i // 2 % 2]), range(200))
            )
    assert sum("result" in a for a in answers) == 50  # 50 * 2 = 100 units; a 51st would make 102
    assert {a["error"]["data"]["limit_scope"] for a in answers if "error" in a} == {"team"}
    rows = audit_rows(world["tenant"], 200, method="tools/call")
    assert sum(r.cost for r in rows) == 100 and sum(r.outcome == "over_budget" for r in rows) == 150


def test_with_redis_gone_budgets_fail_open_and_the_audit_row_says_so(
    transactional_db: None, demo_backend_url: str, tmp_path: Path
) -> None:
    redis_port, port = free_port(), free_port()
    redis_process = subprocess.Popen(
        [redis_server(), "--port", str(redis_port), "--save", "", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        env = gateway_env(
            settings.DATABASES["default"]["NAME"],
            f"redis://127.0.0.1:{redis_port}/0",
            GATEWAY_INSTANCE_ID="gw-budgets-noredis",
        )
        with running(gateway_argv(port), port, env=env, log_name="gateway-budgets-noredis"):
            world = make_tenant(f"http://127.0.0.1:{port}", demo_backend_url, budgets=[("key", "agent", 5, None)])
            assert "result" in call(world, "agent")  # 5 units: the budget is spent
            assert call(world, "agent")["error"]["code"] == -32005
            stop(redis_process)
            assert call(world, "agent", i=2)["result"]["content"][0]["text"] == "3.0"  # unchecked: admitted
            rows = [(r.outcome, r.limit_state, r.cost) for r in audit_rows(world["tenant"], 3)]
        assert rows == [("ok", "ok", 5), ("over_budget", "limited", 0), ("ok", "unchecked", 5)]
    finally:
        if redis_process.poll() is None:
            stop(redis_process)
