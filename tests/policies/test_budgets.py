"""Budgets, tool costs and plans through the services, and what a configuration snapshot makes of
them: budgets clamped to the plan (also for keys and teams without one), a plan that forbids
editing refuses every change to limits and leaves the old ones in place."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from apps.catalog.services import ToolTarget
from apps.gateway.adapters.openapi_tool_server import OpenApiHttp
from apps.gateway.adapters.snapshot_directory import tenant_snapshot_load
from apps.kernel.costs import ToolCostSpec
from apps.kernel.identity import Budget, TokenIssuerView
from apps.policies.models import Budget as StoredBudget
from apps.policies.models import RateLimit, ToolCost
from apps.policies.selectors import access_decision_simulate
from apps.policies.services import (
    access_policy_set,
    budget_clear,
    budget_set,
    rate_limit_clear,
    rate_limit_set,
    tool_costs_clear,
    tool_costs_set,
)
from apps.tenants.services import plan_delete, plan_set, tenant_plan_set
from tests import factories

ISSUER = TokenIssuerView("https://login.test/", "aud", "", "", ("ES256",), "team", "sub")


@pytest.fixture
def world(db: None) -> dict:
    tenant = factories.tenant_factory()
    team = factories.team_factory(tenant=tenant, slug="platform")
    factories.api_key_factory(tenant=tenant, name="agent", team=team)
    factories.api_key_factory(tenant=tenant, name="loner")
    host = factories.virtual_host_factory(
        tenant=tenant,
        slug="main",
        mounts={"calc": factories.backend_factory(tenant=tenant)},
        tool_aliases={"get-sum": ToolTarget(map_key="calc", upstream_name="sum")},
    )
    return {"tenant": tenant, "host": host}


def _budgets() -> list[tuple[str, str, int | None, int | None]]:
    return list(StoredBudget.objects.order_by("scope", "name").values_list("scope", "name", "daily", "monthly"))


def test_a_budget_replaces_the_subjects_previous_one(world: dict) -> None:
    budget_set(tenant=world["tenant"], scope="team", name="platform", daily=5000, monthly=100_000)
    budget_set(tenant=world["tenant"], scope="team", name="platform", daily=None, monthly=90_000)
    budget_set(tenant=world["tenant"], scope="key", name="agent", daily=0, monthly=None)  # free calls only
    assert _budgets() == [("key", "agent", 0, None), ("team", "platform", None, 90_000)]
    budget_clear(tenant=world["tenant"], scope="key", name="agent")
    assert _budgets() == [("team", "platform", None, 90_000)]


@pytest.mark.parametrize(
    ("scope", "name", "daily", "monthly", "message"),
    [
        ("team", "ops", 1, None, "has no team 'ops'"),
        ("key", "ghost", 1, None, "has no key 'ghost'"),
        ("group", "platform", 1, None, "budget scope must be key or team"),
        ("team", "platform", None, None, "needs a daily cap, a monthly cap or both"),
        ("team", "platform", -1, None, "daily must be a whole number from 0"),
        ("team", "platform", 1, True, "monthly must be a whole number from 0"),
        ("team", "platform", 2**31, None, "daily must be a whole number from 0 to 2147483647"),
    ],
)
def test_a_bad_budget_changes_nothing(
    world: dict, scope: str, name: str, daily: int | None, monthly: int | None, message: str
) -> None:
    budget_set(tenant=world["tenant"], scope="team", name="platform", daily=10, monthly=None)
    with pytest.raises(ValidationError, match=message):
        budget_set(tenant=world["tenant"], scope=scope, name=name, daily=daily, monthly=monthly)
    assert _budgets() == [("team", "platform", 10, None)]


def test_tool_costs_are_stored_in_order_and_a_bad_entry_changes_nothing(world: dict) -> None:
    tool_costs_set(virtual_host=world["host"], costs=[ToolCostSpec(["get-*"], 5), ToolCostSpec(["echo"], 0)])
    with pytest.raises(ValidationError, match="tool cost 2: tools must be a list of 1-200 tool names or globs"):
        tool_costs_set(virtual_host=world["host"], costs=[ToolCostSpec(["x"], 1), ToolCostSpec([], 1)])
    stored = [(c.position, c.tools, c.cost) for c in ToolCost.objects.filter(virtual_host=world["host"])]
    assert stored == [(0, ["get-*"], 5), (1, ["echo"], 0)]
    tool_costs_clear(virtual_host=world["host"])
    assert not ToolCost.objects.exists()


def test_the_simulator_says_what_a_call_would_cost(world: dict) -> None:
    key = world["tenant"].api_keys.get(name="agent")
    tool_costs_set(virtual_host=world["host"], costs=[ToolCostSpec(["get-*"], 5), ToolCostSpec(["calc-*"], 0)])

    def cost(tool: str) -> int:
        return access_decision_simulate(virtual_host=world["host"], key=key, tool=tool, arguments={}).cost

    assert (cost("get-sum"), cost("calc-add")) == (5, 0)
    access_policy_set(virtual_host=world["host"], default="deny", rules=[])
    assert cost("get-sum") == 0  # refused: it would cost nothing


def test_a_plan_that_forbids_editing_refuses_every_limit_change_and_keeps_the_old_ones(world: dict) -> None:
    tenant = world["tenant"]
    budget_set(tenant=tenant, scope="team", name="platform", daily=100, monthly=None)
    rate_limit_set(tenant=tenant, scope="key", name="agent", limit=10, window_seconds=60)
    tool_costs_set(virtual_host=world["host"], costs=[ToolCostSpec(["get-*"], 5)])
    tenant_plan_set(tenant=tenant, plan=plan_set(name="starter", daily=50, monthly=None, limits_editable=False))
    edits = [
        lambda: budget_set(tenant=tenant, scope="team", name="platform", daily=1_000_000, monthly=None),
        lambda: budget_set(tenant=tenant, scope="key", name="agent", daily=1, monthly=None),
        lambda: budget_clear(tenant=tenant, scope="team", name="platform"),
        lambda: rate_limit_set(tenant=tenant, scope="key", name="agent", limit=1000, window_seconds=1),
        lambda: rate_limit_clear(tenant=tenant, scope="key", name="agent"),
        lambda: tool_costs_set(virtual_host=world["host"], costs=[ToolCostSpec(["*"], 0)]),
        lambda: tool_costs_clear(virtual_host=world["host"]),
    ]
    for edit in edits:
        with pytest.raises(ValidationError, match=f"tenant '{tenant.slug}' is on plan 'starter', which does not allow"):
            edit()
    assert _budgets() == [("team", "platform", 100, None)]
    assert list(RateLimit.objects.values_list("name", "limit", "window_seconds")) == [("agent", 10, 60)]
    assert list(ToolCost.objects.values_list("tools", "cost")) == [(["get-*"], 5)]
    # A platform admin moves the tenant to a plan that allows editing: edits work again.
    tenant_plan_set(tenant=tenant, plan=plan_set(name="pro", daily=None, monthly=None))
    budget_set(tenant=tenant, scope="team", name="platform", daily=200, monthly=None)
    assert _budgets() == [("team", "platform", 200, None)]


def test_a_plan_in_use_cannot_be_deleted(world: dict) -> None:
    plan = plan_set(name="starter", daily=1, monthly=None)
    tenant_plan_set(tenant=world["tenant"], plan=plan)
    with pytest.raises(ValidationError, match=f"plan 'starter' is assigned to tenant\\(s\\) {world['tenant'].slug}"):
        plan_delete(plan=plan)
    tenant_plan_set(tenant=world["tenant"], plan=None)
    plan_delete(plan=plan)


@pytest.mark.parametrize(("daily", "monthly"), [(-1, None), (None, 2**31), (True, None)])
def test_a_plans_caps_are_whole_units(db: None, daily: int | None, monthly: int | None) -> None:
    with pytest.raises(ValidationError, match="must be a whole number from 0 to 2147483647"):
        plan_set(name="bad", daily=daily, monthly=monthly)


@pytest.mark.django_db(transaction=True)  # the snapshot's own transaction is the outermost one
def test_the_snapshot_clamps_every_budget_to_the_plan_and_compiles_tool_costs() -> None:
    tenant = factories.tenant_factory()
    team = factories.team_factory(tenant=tenant, slug="platform")
    agent = factories.api_key_factory(tenant=tenant, name="agent", team=team).secret
    loner = factories.api_key_factory(tenant=tenant, name="loner").secret
    host = factories.virtual_host_factory(tenant=tenant, slug="main")
    budget_set(tenant=tenant, scope="team", name="platform", daily=100, monthly=1000)
    budget_set(tenant=tenant, scope="key", name="agent", daily=20, monthly=None)
    tool_costs_set(virtual_host=host, costs=[ToolCostSpec(["get-*"], 5)])

    def load() -> object:
        return tenant_snapshot_load(slug=tenant.slug, http=OpenApiHttp())

    snapshot = load()
    assert snapshot.principal_for_credential(agent).budgets == (  # type: ignore[attr-defined]
        Budget(tenant.pk, "key", "agent", 20, None),
        Budget(tenant.pk, "team", "platform", 100, 1000),
    )
    assert snapshot.principal_for_credential(loner).budgets == ()  # type: ignore[attr-defined]
    assert snapshot.virtual_host("main").costs.of("get-x", "x") == 5  # type: ignore[attr-defined]

    tenant_plan_set(tenant=tenant, plan=plan_set(name="starter", daily=50, monthly=None))
    snapshot = load()
    # The plan's daily 50 is below the team's 100 (and names the plan), above the key's 20; it also
    # caps the key without a budget, and a token subject without a team.
    assert snapshot.principal_for_credential(agent).budgets == (  # type: ignore[attr-defined]
        Budget(tenant.pk, "key", "agent", 20, None),
        Budget(tenant.pk, "team", "platform", 50, 1000, daily_plan="starter"),
    )
    assert snapshot.principal_for_credential(loner).budgets == (  # type: ignore[attr-defined]
        Budget(tenant.pk, "key", "loner", 50, None, daily_plan="starter"),
    )
    on_team = snapshot.principal_for_token(ISSUER, {"sub": "alice", "team": "platform"})  # type: ignore[attr-defined]
    assert [b.scope for b in on_team.budgets] == ["team"]
    alone = snapshot.principal_for_token(ISSUER, {"sub": "bob"})  # type: ignore[attr-defined]
    assert alone.budgets == (Budget(tenant.pk, "token", "bob@https://login.test/", 50, None, daily_plan="starter"),)
