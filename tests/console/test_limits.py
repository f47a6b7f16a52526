"""The limits pages: rate limits and budgets with the values in force (after the plan) and their
current use (read from the limiter's own Redis counters), tool costs, and who may change them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis.asyncio
from django.conf import settings
from django.test import Client

from apps.common.redis import redis_client
from apps.gateway.adapters.redis_rate_limiter import RedisRateLimiter
from apps.kernel.costs import ToolCostSpec
from apps.kernel.identity import Budget as BudgetValue
from apps.kernel.identity import Limit
from apps.policies.models import Budget, RateLimit, ToolCost
from apps.policies.services import budget_set, rate_limit_set, tool_costs_set
from apps.tenants.services import membership_set, plan_set, tenant_plan_set
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(django_user_model: Any) -> dict[str, Any]:
    tenant = factories.tenant_factory()
    team = factories.team_factory(tenant=tenant, slug="platform")
    agent = factories.api_key_factory(tenant=tenant, name="agent", team=team).api_key
    host = factories.virtual_host_factory(tenant=tenant)
    admin = django_user_model.objects.create_user(username=f"admin-{tenant.slug}", password="pw")
    membership_set(tenant=tenant, user=admin, role="admin")
    member = django_user_model.objects.create_user(username=f"member-{tenant.slug}", password="pw")
    membership_set(tenant=tenant, user=member, role="member")
    return {"tenant": tenant, "team": team, "agent": agent, "host": host, "admin": admin, "member": member}


def _base(world: dict[str, Any]) -> str:
    return f"/console/t/{world['tenant'].slug}/limits/"


def _spend(limits: list[Limit], budgets: list[BudgetValue], cost: int, times: int) -> None:
    """Calls admitted by the gateway's own limiter, so the page reads what the gateway wrote."""
    async def admit() -> None:
        client = redis.asyncio.Redis.from_url(settings.REDIS_URL)
        limiter = RedisRateLimiter(client)
        for _ in range(times):
            assert (await limiter.admit(limits, budgets, cost)).refused_by is None
        await client.aclose()

    asyncio.run(admit())


def test_rate_limits_show_their_use_now(client: Client, world: dict[str, Any]) -> None:
    redis_client().flushdb()
    client.force_login(world["admin"])
    response = client.post(_base(world), {"subject": "key:agent", "limit": 10, "window_seconds": 60})
    assert response.status_code == 302
    stored = RateLimit.objects.get(tenant=world["tenant"])
    assert (stored.scope, stored.name, stored.limit, stored.window_seconds) == ("key", "agent", 10, 60)
    _spend([Limit(world["tenant"].pk, "key", "agent", 10, 60)], [], 1, 3)
    page = client.get(_base(world)).content.decode()
    assert "10 per 60 s" in page and "3 of 10" in page
    assert client.post(f"{_base(world)}rate/key/agent/remove/").status_code == 302
    assert not RateLimit.objects.exists()


def test_budgets_show_the_plans_clamp_and_what_was_spent(client: Client, world: dict[str, Any]) -> None:
    redis_client().flushdb()
    tenant = world["tenant"]
    tenant_plan_set(tenant=tenant, plan=plan_set(name="starter", daily=50, monthly=None, limits_editable=True))
    client.force_login(world["admin"])
    response = client.post(f"{_base(world)}budgets/", {"subject": "team:platform", "daily": 100, "monthly": 1000})
    assert response.status_code == 302
    _spend([], [BudgetValue(tenant.pk, "team", "platform", 50, 1000)], 7, 2)
    page = client.get(f"{_base(world)}budgets/").content.decode()
    row = page[page.index('id="budget-team-platform"'):]
    assert "100 / day, 1000 / month" in row  # as set
    assert "50 / day <span class=\"muted\">(plan)</span>, 1000 / month" in row  # in force
    assert '<td class="usage">14</td><td class="usage">14</td>' in row
    assert "Plan <strong>starter</strong>" in page


def test_a_bad_budget_is_refused_with_the_services_message(client: Client, world: dict[str, Any]) -> None:
    client.force_login(world["admin"])
    response = client.post(f"{_base(world)}budgets/", {"subject": "key:agent", "daily": "", "monthly": ""})
    assert response.status_code == 400 and "needs a daily cap, a monthly cap or both" in response.content.decode()
    assert not Budget.objects.exists()


def test_a_plan_that_forbids_edits_refuses_them_with_its_message(client: Client, world: dict[str, Any]) -> None:
    rate_limit_set(tenant=world["tenant"], scope="key", name="agent", limit=5, window_seconds=1)
    tenant_plan_set(tenant=world["tenant"], plan=plan_set(name="fixed", daily=None, monthly=None,
                                                          limits_editable=False))
    client.force_login(world["admin"])
    page = client.get(_base(world)).content.decode()
    assert "its limits cannot be edited" in page
    response = client.post(_base(world), {"subject": "key:agent", "limit": 99, "window_seconds": 1})
    assert response.status_code == 400 and "does not allow editing" in response.content.decode()
    removed = client.post(f"{_base(world)}rate/key/agent/remove/", follow=True)
    assert "does not allow editing" in removed.content.decode()
    costs = client.post(f"{_base(world)}costs/{world['host'].pk}/", _costs_post([("x", 3)]))
    assert costs.status_code == 400 and "does not allow editing" in costs.content.decode()
    assert RateLimit.objects.get().limit == 5 and not ToolCost.objects.exists()


def _costs_post(rows: list[tuple[str, int | str]], delete: tuple[int, ...] = ()) -> dict[str, Any]:
    data: dict[str, Any] = {"costs-TOTAL_FORMS": len(rows), "costs-INITIAL_FORMS": 0}
    for i, (tools, cost) in enumerate(rows):
        data |= {f"costs-{i}-tools": tools, f"costs-{i}-cost": cost, f"costs-{i}-ORDER": i + 1 if tools else ""}
        if i in delete:
            data[f"costs-{i}-DELETE"] = "on"
    return data


def test_tool_costs_are_edited_as_one_ordered_list(client: Client, world: dict[str, Any]) -> None:
    client.force_login(world["admin"])
    url = f"{_base(world)}costs/{world['host'].pk}/"
    response = client.post(url, _costs_post([("get-*", 5), ("echo, ping*", 0), ("gone", 9), ("", "")], delete=(2,)))
    assert response.status_code == 302
    stored = [(c.tools, c.cost) for c in ToolCost.objects.filter(virtual_host=world["host"]).order_by("position")]
    assert stored == [(["get-*"], 5), (["echo", "ping*"], 0)]
    page = client.get(url).content.decode()
    assert 'value="get-*"' in page and 'value="echo, ping*"' in page
    assert world["host"].slug in client.get(f"{_base(world)}costs/").content.decode()
    refused = client.post(url, _costs_post([("x", -1)]))
    assert refused.status_code == 400 and "cost must be a whole number from 0 to 2147483647" in refused.content.decode()
    assert len(ToolCost.objects.filter(virtual_host=world["host"])) == 2


def test_subjects_and_hosts_must_be_the_tenants_own(client: Client, world: dict[str, Any]) -> None:
    stranger = factories.tenant_factory()
    factories.api_key_factory(tenant=stranger, name="theirs")
    their_host = factories.virtual_host_factory(tenant=stranger)
    tool_costs_set(virtual_host=their_host, costs=[ToolCostSpec(["x"], 4)])
    client.force_login(world["admin"])
    response = client.post(_base(world), {"subject": "key:theirs", "limit": 1, "window_seconds": 1})
    assert response.status_code == 400 and "Select a valid choice" in response.content.decode()
    assert client.get(f"{_base(world)}costs/{their_host.pk}/").status_code == 404
    assert client.post(f"{_base(world)}costs/{their_host.pk}/", _costs_post([("y", 1)])).status_code == 404
    assert client.get(f"/console/t/{stranger.slug}/limits/").status_code == 404
    assert [(c.tools, c.cost) for c in ToolCost.objects.all()] == [(["x"], 4)]
    assert not RateLimit.objects.exists()


def test_members_read_but_do_not_change_limits(client: Client, world: dict[str, Any]) -> None:
    rate_limit_set(tenant=world["tenant"], scope="key", name="agent", limit=5, window_seconds=1)
    client.force_login(world["member"])
    page = client.get(_base(world)).content.decode()
    assert "5 per 1 s" in page and "Save rate limit" not in page
    assert client.post(_base(world), {"subject": "key:agent", "limit": 9, "window_seconds": 1}).status_code == 403
    assert client.post(f"{_base(world)}rate/key/agent/remove/").status_code == 403
    assert client.post(f"{_base(world)}budgets/", {"subject": "key:agent", "daily": 1}).status_code == 403
    assert client.post(f"{_base(world)}costs/{world['host'].pk}/", _costs_post([("x", 1)])).status_code == 403
    assert RateLimit.objects.get().limit == 5 and not Budget.objects.exists() and not ToolCost.objects.exists()


def test_anonymous_visitors_go_to_the_login_form(client: Client, world: dict[str, Any]) -> None:
    for suffix in ("", "budgets/", "costs/", f"costs/{world['host'].pk}/"):
        response = client.get(f"{_base(world)}{suffix}")
        assert response.status_code == 302 and response["Location"].startswith("/console/login/")


def test_every_form_needs_the_csrf_token(world: dict[str, Any]) -> None:
    rate_limit_set(tenant=world["tenant"], scope="key", name="agent", limit=5, window_seconds=1)
    budget_set(tenant=world["tenant"], scope="key", name="agent", daily=5, monthly=None)
    client = Client(enforce_csrf_checks=True)
    client.force_login(world["admin"])
    posts = [
        ("", {"subject": "key:agent", "limit": 9, "window_seconds": 1}),
        ("rate/key/agent/remove/", {}),
        ("budgets/", {"subject": "key:agent", "daily": 9}),
        ("budgets/key/agent/remove/", {}),
        (f"costs/{world['host'].pk}/", _costs_post([("x", 1)])),
    ]
    for suffix, data in posts:
        assert client.post(f"{_base(world)}{suffix}", data).status_code == 403, suffix
    assert RateLimit.objects.get().limit == 5 and Budget.objects.get().daily == 5 and not ToolCost.objects.exists()


def test_the_lists_are_paginated_with_bounded_queries(
    client: Client, world: dict[str, Any], django_assert_max_num_queries: Any
) -> None:
    tenant = world["tenant"]
    for n in range(55):
        factories.api_key_factory(tenant=tenant, name=f"k{n:02d}")
        rate_limit_set(tenant=tenant, scope="key", name=f"k{n:02d}", limit=n + 1, window_seconds=60)
        budget_set(tenant=tenant, scope="key", name=f"k{n:02d}", daily=n + 1, monthly=None)
    client.force_login(world["admin"])
    for suffix in ("", "budgets/", "costs/"):
        with django_assert_max_num_queries(14):
            response = client.get(f"{_base(world)}{suffix}")
        assert response.status_code == 200
    for suffix in ("", "budgets/"):
        body = client.get(f"{_base(world)}{suffix}").content.decode()
        assert "Page 1 of 2" in body and "k00" in body and 'id="limit-key-k54"' not in body
        assert 'id="budget-key-k54"' not in body
        second = client.get(f"{_base(world)}{suffix}", {"page": 2}).content.decode()
        assert "k54" in second


def test_removing_a_rate_limit_or_a_budget_asks_first(client: Client, world: dict[str, Any]) -> None:
    rate_limit_set(tenant=world["tenant"], scope="key", name="agent", limit=5, window_seconds=60)
    budget_set(tenant=world["tenant"], scope="team", name="platform", daily=10, monthly=100)
    client.force_login(world["admin"])
    assert f'href="{_base(world)}rate/key/agent/remove/"' in client.get(_base(world)).content.decode()
    asked = client.get(f"{_base(world)}rate/key/agent/remove/")
    body = asked.content.decode()
    assert asked.status_code == 200 and "Remove the rate limit of key agent?" in body
    assert "The limit of 5 calls per 60 s for key agent is removed." in body and ">Remove rate limit</button>" in body
    asked = client.get(f"{_base(world)}budgets/team/platform/remove/")
    body = asked.content.decode()
    assert asked.status_code == 200 and "Remove the budget of team platform?" in body
    assert "The budget of 10 units per UTC day and 100 units per UTC month for team platform is removed" in body
    assert RateLimit.objects.exists() and Budget.objects.exists()  # asking changes nothing
    assert client.get(f"{_base(world)}rate/team/platform/remove/").status_code == 404
    assert client.get(f"{_base(world)}budgets/key/agent/remove/").status_code == 404
    assert client.post(f"{_base(world)}rate/key/agent/remove/").status_code == 302
    assert client.post(f"{_base(world)}budgets/team/platform/remove/").status_code == 302
    assert not RateLimit.objects.exists() and not Budget.objects.exists()


def test_members_are_not_asked_to_remove_limits(client: Client, world: dict[str, Any]) -> None:
    rate_limit_set(tenant=world["tenant"], scope="key", name="agent", limit=5, window_seconds=60)
    budget_set(tenant=world["tenant"], scope="key", name="agent", daily=10, monthly=None)
    client.force_login(world["member"])
    assert client.get(f"{_base(world)}rate/key/agent/remove/").status_code == 403
    assert client.get(f"{_base(world)}budgets/key/agent/remove/").status_code == 403


def test_deleting_tool_costs_asks_first(client: Client, world: dict[str, Any]) -> None:
    tool_costs_set(virtual_host=world["host"], costs=[ToolCostSpec(("get-*",), 5), ToolCostSpec(("echo",), 0)])
    client.force_login(world["admin"])
    url = f"{_base(world)}costs/{world['host'].pk}/"
    data = {**_costs_post([("get-*", 5), ("echo", 0), ("", "")], delete=(0,)), "costs-INITIAL_FORMS": 2}
    asked = client.post(url, data)
    body = asked.content.decode()
    assert asked.status_code == 200 and f"Delete 1 tool cost entry of {world['host'].slug}?" in body
    assert "get-*: 5 units per call" in body and 'name="confirmed" value="yes"' in body
    assert 'name="costs-0-DELETE" value="on"' in body
    stored = ToolCost.objects.filter(virtual_host=world["host"]).order_by("position")
    assert [(c.tools, c.cost) for c in stored] == [(["get-*"], 5), (["echo"], 0)]  # asking changes nothing
    assert client.post(url, {**data, "confirmed": "yes"}).status_code == 302
    assert [(c.tools, c.cost) for c in stored.all()] == [(["echo"], 0)]
    # An edit that deletes nothing is saved at once.
    assert client.post(url, {**_costs_post([("echo", 1)]), "costs-INITIAL_FORMS": 1}).status_code == 302
    assert [(c.tools, c.cost) for c in stored.all()] == [(["echo"], 1)]
