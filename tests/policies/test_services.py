"""Setting access policies (checked before anything is written) and the policy simulator."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from apps.catalog.services import ToolTarget
from apps.kernel.policy import RuleSpec
from apps.policies.models import AccessPolicy
from apps.policies.selectors import access_decision_simulate, access_policy_compiled
from apps.policies.services import access_policy_clear, access_policy_set
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def world() -> dict:
    tenant = factories.tenant_factory()
    team = factories.team_factory(tenant=tenant, slug="platform")
    agent = factories.api_key_factory(tenant=tenant, name="agent", team=team).api_key
    other = factories.api_key_factory(tenant=tenant, name="other").api_key
    host = factories.virtual_host_factory(
        tenant=tenant, mounts={"calc": factories.backend_factory(tenant=tenant), "docs": factories.backend_factory(tenant=tenant)},
        tool_aliases={"get-sum": ToolTarget(map_key="calc", upstream_name="sum")},
    )
    return {"tenant": tenant, "host": host, "agent": agent, "other": other}


RULES = [
    RuleSpec("sum-a1-only", "team", "platform", "allow", ["get-sum"], "arguments.a == 1"),
    RuleSpec("no-docs", "key", "other", "deny", ["docs-*"]),
]


def test_rules_are_stored_in_order_and_compile_as_the_gateway_does(world: dict) -> None:
    access_policy_set(virtual_host=world["host"], default="deny", rules=RULES)
    stored = AccessPolicy.objects.get(virtual_host=world["host"])
    assert [(r.rule_id, r.position, r.condition) for r in stored.rules.all()] == [
        ("sum-a1-only", 0, "arguments.a == 1"), ("no-docs", 1, "")]
    policy = access_policy_compiled(virtual_host=world["host"])
    assert policy is not None and [rule.id for rule in policy.rules] == ["sum-a1-only", "no-docs"]


@pytest.mark.parametrize(("rule", "message"), [
    (RuleSpec("r", "team", "nope", "allow", ["*"]), "has no team 'nope'"),
    (RuleSpec("r", "key", "ghost", "allow", ["*"]), "has no key 'ghost'"),
    (RuleSpec("r", "tenant", "someone-else", "allow", ["*"]), "has no tenant 'someone-else'"),
    (RuleSpec("r", "team", "platform", "allow", ["*"], "arguments.a =="), "not valid CEL"),
])
def test_a_bad_rule_changes_nothing(world: dict, rule: RuleSpec, message: str) -> None:
    access_policy_set(virtual_host=world["host"], default="deny", rules=RULES)
    with pytest.raises(ValidationError, match=message):
        access_policy_set(virtual_host=world["host"], default="allow", rules=[rule])
    stored = AccessPolicy.objects.get(virtual_host=world["host"])
    assert stored.default_effect == "deny" and stored.rules.count() == 2


def test_clearing_opens_the_host_again(world: dict) -> None:
    access_policy_set(virtual_host=world["host"], default="deny", rules=RULES)
    access_policy_clear(virtual_host=world["host"])
    assert access_decision_simulate(virtual_host=world["host"], key=world["other"], tool="docs-x", arguments={}).allowed


def test_the_simulator_says_what_the_gateway_would_do(world: dict) -> None:
    access_policy_set(virtual_host=world["host"], default="deny", rules=RULES)

    def simulate(key: str, tool: str, **arguments: object) -> tuple[bool, bool, str | None]:
        result = access_decision_simulate(virtual_host=world["host"], key=world[key], tool=tool, arguments=arguments)
        return result.listed, result.allowed, result.rule

    assert simulate("agent", "get-sum", a=1) == (True, True, "sum-a1-only")
    assert simulate("agent", "get-sum", a=2) == (True, False, None)
    assert simulate("other", "get-sum", a=1) == (False, False, None)  # not on the team: hidden
    assert simulate("other", "docs-read") == (False, False, None)  # denied outright: hidden
    upstream = access_decision_simulate(virtual_host=world["host"], key=world["agent"], tool="get-sum", arguments={})
    assert (upstream.map_key, upstream.upstream_name) == ("calc", "sum")
    unknown = access_decision_simulate(virtual_host=world["host"], key=world["agent"], tool="nokey-x", arguments={})
    assert (unknown.listed, unknown.allowed, unknown.map_key) == (False, False, None)
