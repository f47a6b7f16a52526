"""The `budgets`, `tool_costs` and `plans` sections (and a tenant's `plan:`): applied as written,
idempotent, refused with a path, pruned, exported — and a plan that forbids editing refuses a
document that changes the tenant's limits, writing nothing."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from apps.configuration.document import ConfigInvalid
from apps.configuration.reports import Action, ApplyReport
from apps.configuration.services import config_apply, config_export
from apps.policies.models import Budget, RateLimit, ToolCost
from apps.tenants.models import Plan, Tenant
from tests.configuration.documents import DOCS, README_EXAMPLE, assert_refused_and_nothing_written

pytestmark = pytest.mark.django_db

# Exactly the shape users are told to write; must apply as written.
BUDGETS = """\
budgets:
  - {tenant: acme, scope: team, name: platform, daily: 5000, monthly: 100000}
  - {tenant: acme, scope: key, name: agent, monthly: 20000}
tool_costs:
  - {tenant: acme, virtual_host: main, tools: ["get-*"], cost: 5}
  - {tenant: acme, virtual_host: main, tools: ["echo", "ping*"], cost: 0}
"""
DOCUMENT = README_EXAMPLE + BUDGETS
PLANS = """\
plans:
  - {name: starter, daily: 1000, limits_editable: false}
  - {name: pro, monthly: 1000000}
"""
ON_STARTER = PLANS + DOCUMENT.replace("    name: Acme Corp\n", "    name: Acme Corp\n    plan: starter\n", 1)


def _budgets() -> list[tuple[str, str, str, int | None, int | None]]:
    return list(
        Budget.objects.order_by("tenant__slug", "scope", "name").values_list(
            "tenant__slug", "scope", "name", "daily", "monthly"
        )
    )


def _costs() -> list[tuple[str, int, list[str], int]]:
    return list(
        ToolCost.objects.order_by("virtual_host__slug", "position").values_list(
            "virtual_host__slug", "position", "tools", "cost"
        )
    )


def _plans() -> list[tuple[str, int | None, int | None, bool, list[str]]]:
    return [
        (p.name, p.daily, p.monthly, p.limits_editable, [t.slug for t in p.tenants.all()])
        for p in Plan.objects.order_by("name")
    ]


def _stored() -> tuple[object, ...]:
    rate_limits = list(RateLimit.objects.order_by("scope", "name").values_list("scope", "name", "limit"))
    return _budgets(), _costs(), _plans(), rate_limits


def _actions(report: ApplyReport) -> dict[tuple[str, str], tuple[Action, str]]:
    return {(c.kind, c.name): (c.action, c.detail) for c in report.changes}


def test_the_documented_shape_applies_as_written() -> None:
    report = config_apply(document=DOCUMENT, prune=False)
    assert _budgets() == [("acme", "key", "agent", None, 20000), ("acme", "team", "platform", 5000, 100000)]
    assert _costs() == [("main", 0, ["get-*"], 5), ("main", 1, ["echo", "ping*"], 0)]
    actions = _actions(report)
    assert actions[("budget", "acme/team:platform")] == (Action.CREATED, "5000 per day, 100000 per month")
    assert actions[("budget", "acme/key:agent")] == (Action.CREATED, "20000 per month")
    assert actions[("tool_costs", "acme/main")] == (Action.CREATED, "2 entries")


def test_applying_again_changes_nothing(django_capture_on_commit_callbacks: Callable[..., Any]) -> None:
    config_apply(document=ON_STARTER.replace("limits_editable: false", "limits_editable: true"), prune=False)
    with django_capture_on_commit_callbacks() as callbacks:
        report = config_apply(
            document=ON_STARTER.replace("limits_editable: false", "limits_editable: true"), prune=True
        )
    assert not report.changed
    assert callbacks == []  # no configuration version moves


@pytest.mark.parametrize(
    ("old", "new", "kind", "name", "detail"),
    [
        ("daily: 5000,", "daily: 6000,", "budget", "acme/team:platform", "daily"),
        ("daily: 5000, monthly: 100000", "monthly: 100000", "budget", "acme/team:platform", "daily"),
        (
            "name: agent, monthly: 20000",
            "name: agent, daily: 7, monthly: 10",
            "budget",
            "acme/key:agent",
            "daily, monthly",
        ),
        ('tools: ["get-*"], cost: 5', 'tools: ["get-*"], cost: 6', "tool_costs", "acme/main", "2 entries"),
    ],
)
def test_a_changed_entry_is_an_update(
    old: str, new: str, kind: str, name: str, detail: str, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    config_apply(document=DOCUMENT, prune=False)
    changed = DOCUMENT.replace(old, new)
    assert changed != DOCUMENT
    with django_capture_on_commit_callbacks() as callbacks:
        report = config_apply(document=changed, prune=False)
    assert [(c.kind, c.name, c.detail) for c in report.changes if c.action is Action.UPDATED] == [(kind, name, detail)]
    assert len(callbacks) == 1
    assert not config_apply(document=changed, prune=False).changed


def test_the_order_of_tool_costs_is_part_of_them() -> None:
    config_apply(document=DOCUMENT, prune=False)
    lines = BUDGETS.splitlines(keepends=True)
    swapped = README_EXAMPLE + "".join(lines[:4] + [lines[5], lines[4]])
    report = config_apply(document=swapped, prune=False)
    assert _actions(report)[("tool_costs", "acme/main")][0] is Action.UPDATED
    assert _costs() == [("main", 0, ["echo", "ping*"], 0), ("main", 1, ["get-*"], 5)]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "{tenant: acme, scope: team",
            "{tenant: globex, scope: team",
            "budgets[0].tenant: unknown tenant 'globex' (add it under tenants)",
        ),
        ("name: platform, daily", "name: ops, daily", "budgets[0].name: unknown team 'ops'"),
        ("name: agent, monthly", "name: robot, monthly", "budgets[1].name: unknown key 'robot'"),
        ("scope: team", "scope: group", "budgets[0].scope: must be one of: key, team"),
        ("monthly: 100000}", "monthly: 100000, cap: 5}", "budgets[0].cap: unknown field"),
        ("name: agent, monthly: 20000", "name: agent", "budgets[1].daily: a budget needs a daily cap, a monthly cap or both"),
        ("daily: 5000,", "daily: -1,", "budgets[0].daily: daily must be a whole number from 0 to 2147483647"),
        ("daily: 5000,", 'daily: "5000",', "budgets[0].daily: daily must be a whole number from 0"),
        ("daily: 5000,", "daily: true,", "budgets[0].daily: daily must be a whole number from 0"),
        ("monthly: 100000", "monthly: 2147483648", "budgets[0].monthly: monthly must be a whole number from 0"),
        (
            'virtual_host: main, tools: ["get-*"]',
            'virtual_host: other, tools: ["get-*"]',
            "tool_costs[0].virtual_host: unknown virtual host 'other'",
        ),
        ('tools: ["get-*"]', "tools: []", "tool_costs[0].tools: tools must be a list of 1-200 tool names or globs"),
        ('tools: ["get-*"]', 'tools: ["get-*", ""]', "tool_costs[0].tools: tools must be a list of 1-200 tool names or globs; item 2 is empty"),
        ("cost: 5}", "cost: 1.5}", "tool_costs[0].cost: cost must be a whole number from 0"),
        ("cost: 5}", "cost: 5, price: 5}", "tool_costs[0].price: unknown field"),
    ],
)
def test_a_bad_entry_is_refused_at_its_path_and_writes_nothing(old: str, new: str, expected: str) -> None:
    stored_first = DOCUMENT.replace("daily: 5000", "daily: 4000").replace("cost: 5}", "cost: 4}")
    broken = DOCUMENT.replace(old, new, 1)
    assert broken != DOCUMENT
    assert_refused_and_nothing_written(stored_first=stored_first, broken=broken, expected=expected, stored=_stored)


def test_a_second_budget_for_the_same_subject_is_refused() -> None:
    duplicate = "  - {tenant: acme, scope: key, name: agent, daily: 1}\n"
    text = DOCUMENT.replace("tool_costs:\n", duplicate + "tool_costs:\n")
    with pytest.raises(ConfigInvalid) as excinfo:
        config_apply(document=text, prune=False)
    assert [str(p) for p in excinfo.value.problems] == [
        "budgets[2].name: duplicate budget for key 'agent' in tenant 'acme'"
    ]


def test_prune_removes_budgets_and_tool_costs_not_in_the_file() -> None:
    config_apply(document=DOCUMENT, prune=False)
    without = DOCUMENT.replace("  - {tenant: acme, scope: key, name: agent, monthly: 20000}\n", "").split(
        "tool_costs:"
    )[0]
    assert config_apply(document=without, prune=False).count(Action.DELETED) == 0  # without prune
    assert len(_budgets()) == 2 and len(_costs()) == 2
    report = config_apply(document=without, prune=True)
    deleted = {(c.kind, c.name) for c in report.changes if c.action is Action.DELETED}
    assert deleted == {("budget", "acme/key:agent"), ("tool_costs", "acme/main")}
    assert _budgets() == [("acme", "team", "platform", 5000, 100000)] and _costs() == []
    assert not config_apply(document=without, prune=True).changed


def test_plans_apply_with_the_tenants_plan_and_round_trip_through_export() -> None:
    report = config_apply(document=ON_STARTER, prune=False)
    assert _plans() == [("pro", None, 1000000, True, []), ("starter", 1000, None, False, ["acme"])]
    actions = _actions(report)
    assert actions[("plan", "starter")] == (Action.CREATED, "1000 per day, limits locked")
    assert actions[("tenant", "acme")] == (Action.CREATED, "plan starter")
    exported = config_export()
    body = yaml.safe_load(exported)
    assert body["plans"] == [
        {"name": "pro", "monthly": 1000000},
        {"name": "starter", "daily": 1000, "limits_editable": False},
    ]
    assert body["tenants"][0]["plan"] == "starter"
    assert body["budgets"] == [
        {"tenant": "acme", "scope": "key", "name": "agent", "monthly": 20000},
        {"tenant": "acme", "scope": "team", "name": "platform", "daily": 5000, "monthly": 100000},
    ]
    assert body["tool_costs"] == [
        {"tenant": "acme", "virtual_host": "main", "tools": ["get-*"], "cost": 5},
        {"tenant": "acme", "virtual_host": "main", "tools": ["echo", "ping*"], "cost": 0},
    ]
    assert not config_apply(document=exported, prune=True).changed
    assert config_export() == exported


def test_moving_a_tenant_between_plans_and_pruning_an_unused_plan() -> None:
    config_apply(document=ON_STARTER, prune=False)
    on_pro = ON_STARTER.replace("    plan: starter\n", "    plan: pro\n")
    report = config_apply(document=on_pro, prune=False)
    assert _actions(report)[("tenant", "acme")] == (Action.UPDATED, "plan pro")
    no_starter = on_pro.replace("  - {name: starter, daily: 1000, limits_editable: false}\n", "")
    report = config_apply(document=no_starter, prune=True)
    assert {(c.kind, c.name) for c in report.changes if c.action is Action.DELETED} == {("plan", "starter")}
    off_plan = no_starter.replace("    plan: pro\n", "")
    config_apply(document=off_plan, prune=False)
    assert Tenant.objects.get(slug="acme").plan is None


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("    plan: starter\n", "    plan: gold\n", "tenants[0].plan: unknown plan 'gold' (add it under plans)"),
        ("{name: pro,", "{name: Pro,", "plans[1].name: a plan's name is 1-64 lowercase letters, digits and inner hyphens, not 'Pro'"),
        ("limits_editable: false}", "limits_editable: no-thanks}", "plans[0].limits_editable: limits_editable must be true or false"),
        ("daily: 1000,", "daily: -5,", "plans[0].daily: daily must be a whole number from 0"),
        ("{name: pro,", "{name: starter,", "plans[1].name: duplicate plan 'starter'"),
    ],
)
def test_a_bad_plan_is_refused_at_its_path_and_writes_nothing(old: str, new: str, expected: str) -> None:
    editable = ON_STARTER.replace("limits_editable: false", "limits_editable: true")
    broken = editable.replace(old, new, 1) if old in editable else ON_STARTER.replace(old, new, 1)
    assert broken not in (editable, ON_STARTER)
    assert_refused_and_nothing_written(stored_first=editable, broken=broken, expected=expected, stored=_stored)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("daily: 5000,", "daily: 99999,", "budgets[0]: tenant 'acme' is on plan 'starter', which does not allow"),
        ("cost: 5}", "cost: 0}", "tool_costs[0]: tenant 'acme' is on plan 'starter', which does not allow"),
        (
            "  - {tenant: acme, scope: key, name: agent, monthly: 20000}\n",
            "",
            "(prune): tenant 'acme' is on plan 'starter', which does not allow",
        ),
        (
            "tool_costs:\n",
            "rate_limits:\n  - {tenant: acme, scope: key, name: agent, limit: 5, window_seconds: 60}\ntool_costs:\n",
            "rate_limits[0]: tenant 'acme' is on plan 'starter', which does not allow",
        ),
    ],
)
def test_a_plan_that_forbids_editing_refuses_the_document_and_the_old_limits_stay(
    old: str, new: str, expected: str
) -> None:
    assert_refused_and_nothing_written(
        stored_first=ON_STARTER, broken=ON_STARTER.replace(old, new, 1), expected=expected, stored=_stored
    )
    assert ("acme", "team", "platform", 5000, 100000) in _budgets()


def test_a_new_tenant_on_a_locked_plan_gets_the_files_limits_and_keeps_them() -> None:
    config_apply(document=ON_STARTER, prune=False)  # the tenant was on no plan before this apply
    assert _plans()[1] == ("starter", 1000, None, False, ["acme"])
    assert ("acme", "team", "platform", 5000, 100000) in _budgets()
    assert not config_apply(document=ON_STARTER, prune=True).changed  # unchanged limits are no edit


@pytest.mark.parametrize(
    "move",
    [
        lambda doc: doc.replace("limits_editable: false", "limits_editable: true"),  # the plan is unlocked
        lambda doc: doc.replace("    plan: starter\n", "    plan: pro\n"),  # the tenant moves to an open plan
    ],
)
def test_an_apply_that_lets_the_tenant_edit_may_change_its_limits_at_once(move: Callable[[str], str]) -> None:
    config_apply(document=ON_STARTER, prune=False)
    config_apply(document=move(ON_STARTER).replace("daily: 5000", "daily: 1"), prune=False)
    assert ("acme", "team", "platform", 1, 100000) in _budgets()


@pytest.mark.parametrize(
    "before",
    [
        ON_STARTER.replace("limits_editable: false", "limits_editable: true"),  # the apply locks the plan
        ON_STARTER.replace("    plan: starter\n", "    plan: pro\n"),  # the apply moves the tenant onto it
    ],
)
def test_an_apply_that_locks_the_tenant_sets_its_limits_first(before: str) -> None:
    config_apply(document=before, prune=False)
    locked = ON_STARTER.replace("daily: 5000", "daily: 1")
    config_apply(document=locked, prune=True)
    assert ("acme", "team", "platform", 1, 100000) in _budgets()
    assert Tenant.objects.get(slug="acme").plan.limits_editable is False
    with pytest.raises(ConfigInvalid, match="budgets\\[0\\]: tenant 'acme' is on plan 'starter'"):
        config_apply(document=locked.replace("daily: 1,", "daily: 2,"), prune=False)


def test_the_documented_example_with_a_plan_applies_as_written() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", DOCS.read_text(encoding="utf-8"), flags=re.S)
    example = next(block for block in blocks if block.startswith("plans:") and "tenants:" in block)
    config_apply(document=example, prune=False)
    assert _plans() == [("starter", 1000, None, False, ["acme"])]
    assert _budgets() == [("acme", "team", "platform", 5000, 100000)] and len(_costs()) == 1
