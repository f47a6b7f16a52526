"""The policies REST API: access policy and simulator, rate limits, budgets and tool costs — the
same services as the console pages, the same isolation, members read-only."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from apps.catalog.services import ToolTarget
from apps.common.redis import redis_client
from apps.kernel.costs import ToolCostSpec
from apps.kernel.policy import RuleSpec
from apps.policies.models import AccessPolicy, Budget, RateLimit, ToolCost
from apps.policies.services import access_policy_set, budget_set, rate_limit_set, tool_costs_set
from apps.tenants.services import membership_set, plan_set, tenant_plan_set
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(django_user_model: Any) -> dict[str, Any]:
    tenant = factories.tenant_factory()
    team = factories.team_factory(tenant=tenant, slug="platform")
    agent = factories.api_key_factory(tenant=tenant, name="agent", team=team).api_key
    calc = factories.backend_factory(tenant=tenant)
    for tool in ("sum", "mul"):  # the tools the catalog knows the backend has
        factories.indexed_tool_factory(backend=calc, name=tool)
    host = factories.virtual_host_factory(
        tenant=tenant, mounts={"calc": calc}, tool_aliases={"get-sum": ToolTarget(map_key="calc", upstream_name="sum")},
    )
    admin = django_user_model.objects.create_user(username=f"admin-{tenant.slug}", password="pw")
    membership_set(tenant=tenant, user=admin, role="admin")
    member = django_user_model.objects.create_user(username=f"member-{tenant.slug}", password="pw")
    membership_set(tenant=tenant, user=member, role="member")
    return {"tenant": tenant, "agent": agent, "host": host, "admin": admin, "member": member}


def _api(world: dict[str, Any], suffix: str) -> str:
    return f"/api/v1/tenants/{world['tenant'].slug}/{suffix}"


def _client(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


POLICY = {
    "default": "deny",
    "rules": [
        {"id": "sum-small", "subject_kind": "team", "subject_name": "platform", "effect": "allow",
         "tools": ["get-sum"], "condition": "arguments.a < 10"},
        {"id": "no-big", "subject_kind": "key", "subject_name": "agent", "effect": "deny", "tools": ["m*"]},
    ],
}


def test_the_access_policy_is_read_replaced_and_removed(world: dict[str, Any]) -> None:
    client = _client(world["admin"])
    url = _api(world, f"virtual-hosts/{world['host'].pk}/access-policy")
    assert client.get(url).status_code == 404
    response = client.put(url, POLICY, format="json")
    assert response.status_code == 200, response.json()
    assert response.json() == {**POLICY, "rules": [POLICY["rules"][0], {**POLICY["rules"][1], "condition": ""}],
                               "warnings": []}
    assert client.get(url).json()["rules"][1]["id"] == "no-big"
    assert client.delete(url).status_code == 204
    assert not AccessPolicy.objects.exists()


@pytest.mark.parametrize(("body", "message"), [
    ({"default": "maybe", "rules": []}, "default: \"maybe\" is not a valid choice."),
    ({"default": "deny", "rules": [{**POLICY["rules"][0], "tools": []}]}, "tools must be a list of 1-200 tool names or globs"),
    ({"default": "deny", "rules": [{**POLICY["rules"][0], "condition": "arguments.a <"}]}, "not valid CEL"),
    ({"default": "deny", "rules": [{**POLICY["rules"][0], "subject_name": "ghost"}]}, "has no team 'ghost'"),
])
def test_a_bad_policy_is_refused_and_changes_nothing(world: dict[str, Any], body: dict, message: str) -> None:
    access_policy_set(virtual_host=world["host"], default="allow", rules=[])
    response = _client(world["admin"]).put(_api(world, f"virtual-hosts/{world['host'].pk}/access-policy"), body,
                                           format="json")
    assert response.status_code == 400 and message in response.json()["detail"]
    assert AccessPolicy.objects.get().default_effect == "allow"


def test_the_simulator_answers_the_decision_and_its_rule(world: dict[str, Any]) -> None:
    _client(world["admin"]).put(_api(world, f"virtual-hosts/{world['host'].pk}/access-policy"), POLICY, format="json")
    url = _api(world, f"virtual-hosts/{world['host'].pk}/access-policy/simulate")
    client = _client(world["member"])  # a read: members may simulate
    allowed = client.post(url, {"key": world["agent"].pk, "tool": "get-sum", "arguments": {"a": 1}}, format="json")
    assert allowed.status_code == 200
    assert allowed.json() | {"reason": ""} == {
        "listed": True, "allowed": True, "rule": "sum-small", "rule_position": 1, "reason": "",
        "map_key": "calc", "upstream_name": "sum", "cost": 1, "tool_known": True, "tools_note": "",
        "condition_errors": [],
    }
    denied = client.post(url, {"key": world["agent"].pk, "tool": "get-sum", "arguments": {"a": 11}}, format="json")
    assert (denied.json()["allowed"], denied.json()["rule"]) == (False, None)
    hidden = client.post(url, {"key": world["agent"].pk, "tool": "mul"}, format="json").json()
    assert (hidden["listed"], hidden["rule"], hidden["rule_position"]) == (False, "no-big", 2)
    token = client.post(url, {"token": {"subject": "alice", "team": "platform"}, "tool": "get-sum",
                              "arguments": {"a": 2}}, format="json").json()
    assert (token["allowed"], token["rule"]) == (True, "sum-small")


def test_the_simulator_refuses_another_tenants_key_team_and_host(world: dict[str, Any]) -> None:
    stranger = factories.tenant_factory()
    their_key = factories.api_key_factory(tenant=stranger).api_key
    factories.team_factory(tenant=stranger, slug="theirs")
    their_host = factories.virtual_host_factory(tenant=stranger)
    client = _client(world["admin"])
    url = _api(world, f"virtual-hosts/{world['host'].pk}/access-policy/simulate")
    response = client.post(url, {"key": their_key.pk, "tool": "get-sum"}, format="json")
    assert response.status_code == 400 and "has no API key with id" in response.json()["detail"]
    response = client.post(url, {"token": {"subject": "x", "team": "theirs"}, "tool": "get-sum"}, format="json")
    assert response.status_code == 400 and "has no team 'theirs'" in response.json()["detail"]
    response = client.post(url, {"tool": "get-sum"}, format="json")
    assert response.status_code == 400 and "exactly one of key and token" in response.json()["detail"]
    response = client.post(url, {"key": world["agent"].pk, "tool": "x", "arguments": [1]}, format="json")
    assert response.status_code == 400 and response.json()["detail"].startswith("arguments:")
    for suffix in ("access-policy", "access-policy/simulate", "tool-costs"):
        assert client.get(_api(world, f"virtual-hosts/{their_host.pk}/{suffix}")).status_code in (404, 405)
        assert client.put(_api(world, f"virtual-hosts/{their_host.pk}/{suffix}"), POLICY,
                          format="json").status_code in (404, 405)
    theirs = f"/api/v1/tenants/{stranger.slug}/virtual-hosts/{their_host.pk}/access-policy"
    assert client.get(theirs).status_code == 404
    assert client.put(theirs, {"default": "deny", "rules": []}, format="json").status_code == 404
    assert not AccessPolicy.objects.exists()


def test_rate_limits_are_listed_with_their_use_set_and_cleared(world: dict[str, Any]) -> None:
    redis_client().flushdb()
    client = _client(world["admin"])
    response = client.put(_api(world, "rate-limits/key/agent"), {"limit": 10, "window_seconds": 60}, format="json")
    assert response.status_code == 200
    assert response.json() == {"scope": "key", "name": "agent", "limit": 10, "window_seconds": 60,
                               "usage": {"used": 0, "full_in_seconds": 0.0, "checked": True}}
    listed = client.get(_api(world, "rate-limits")).json()
    assert listed["count"] == 1 and listed["results"][0]["name"] == "agent"
    refused = client.put(_api(world, "rate-limits/key/ghost"), {"limit": 1, "window_seconds": 1}, format="json")
    assert refused.status_code == 400 and "has no key 'ghost'" in refused.json()["detail"]
    shape = client.put(_api(world, "rate-limits/key/agent"), {"limit": 0, "window_seconds": 1}, format="json")
    assert shape.status_code == 400 and shape.json()["detail"].startswith("limit must be a whole number")
    assert client.delete(_api(world, "rate-limits/key/agent")).status_code == 204
    assert client.get(_api(world, "rate-limits/key/agent")).status_code == 404


def test_budgets_answer_the_value_in_force_and_the_spending(world: dict[str, Any]) -> None:
    tenant_plan_set(tenant=world["tenant"], plan=plan_set(name="small", daily=20, monthly=None))
    client = _client(world["admin"])
    response = client.put(_api(world, "budgets/team/platform"), {"daily": 100, "monthly": 500}, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["daily"], body["monthly"]) == (100, 500)
    assert body["effective"] == {"daily": 20, "monthly": 500, "daily_plan": "small", "monthly_plan": ""}
    assert body["usage"]["checked"] is True
    refused = client.put(_api(world, "budgets/team/platform"), {"daily": None, "monthly": None}, format="json")
    assert refused.status_code == 400 and "daily cap, a monthly cap or both" in refused.json()["detail"]
    assert client.get(_api(world, "budgets")).json()["results"][0]["effective"]["daily"] == 20
    assert client.delete(_api(world, "budgets/team/platform")).status_code == 204
    assert not Budget.objects.exists()


def test_a_plan_that_forbids_edits_refuses_them(world: dict[str, Any]) -> None:
    rate_limit_set(tenant=world["tenant"], scope="key", name="agent", limit=5, window_seconds=1)
    tenant_plan_set(tenant=world["tenant"], plan=plan_set(name="fixed", daily=None, monthly=None,
                                                          limits_editable=False))
    client = _client(world["admin"])
    for method, suffix, body in [
        ("put", "rate-limits/key/agent", {"limit": 9, "window_seconds": 1}),
        ("delete", "rate-limits/key/agent", None),
        ("put", "budgets/key/agent", {"daily": 1}),
        ("put", f"virtual-hosts/{world['host'].pk}/tool-costs", [{"tools": ["x"], "cost": 2}]),
    ]:
        response = getattr(client, method)(_api(world, suffix), body, format="json")
        assert response.status_code == 400 and "does not allow editing" in response.json()["detail"], suffix
    assert RateLimit.objects.get().limit == 5 and not Budget.objects.exists() and not ToolCost.objects.exists()


def test_tool_costs_are_read_and_replaced(world: dict[str, Any]) -> None:
    client = _client(world["admin"])
    url = _api(world, f"virtual-hosts/{world['host'].pk}/tool-costs")
    assert client.get(url).json() == []
    entries = [{"tools": ["get-*"], "cost": 5}, {"tools": ["echo"], "cost": 0}]
    assert client.put(url, entries, format="json").json() == entries
    assert client.get(url).json() == entries
    bad = client.put(url, [{"tools": [], "cost": 1}], format="json")
    assert bad.status_code == 400 and bad.json()["detail"].startswith("tool cost 1: tools must be a list")
    assert client.put(url, [], format="json").json() == []
    assert not ToolCost.objects.exists()


def test_members_read_but_do_not_write(world: dict[str, Any]) -> None:
    rate_limit_set(tenant=world["tenant"], scope="key", name="agent", limit=5, window_seconds=1)
    client = _client(world["member"])
    assert client.get(_api(world, "rate-limits")).status_code == 200
    assert client.get(_api(world, "budgets")).status_code == 200
    assert client.get(_api(world, f"virtual-hosts/{world['host'].pk}/tool-costs")).status_code == 200
    for method, suffix, body in [
        ("put", f"virtual-hosts/{world['host'].pk}/access-policy", POLICY),
        ("delete", f"virtual-hosts/{world['host'].pk}/access-policy", None),
        ("put", "rate-limits/key/agent", {"limit": 9, "window_seconds": 1}),
        ("delete", "rate-limits/key/agent", None),
        ("put", "budgets/key/agent", {"daily": 1}),
        ("put", f"virtual-hosts/{world['host'].pk}/tool-costs", []),
    ]:
        assert getattr(client, method)(_api(world, suffix), body, format="json").status_code == 403, suffix
    assert RateLimit.objects.get().limit == 5 and not AccessPolicy.objects.exists()


def test_anonymous_callers_get_401_and_sessions_need_csrf(world: dict[str, Any]) -> None:
    assert APIClient().get(_api(world, "rate-limits")).status_code == 401
    session = Client(enforce_csrf_checks=True)
    session.force_login(world["admin"])
    assert session.get(_api(world, "rate-limits")).status_code == 200
    response = session.put(_api(world, "rate-limits/key/agent"), {"limit": 1, "window_seconds": 1},
                           content_type="application/json")
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]
    assert not RateLimit.objects.exists()


def test_lists_are_paginated_with_bounded_queries(world: dict[str, Any], django_assert_max_num_queries: Any) -> None:
    tenant = world["tenant"]
    for n in range(55):
        factories.api_key_factory(tenant=tenant, name=f"k{n:02d}")
        rate_limit_set(tenant=tenant, scope="key", name=f"k{n:02d}", limit=1, window_seconds=1)
        budget_set(tenant=tenant, scope="key", name=f"k{n:02d}", daily=1, monthly=None)
    access_policy_set(virtual_host=world["host"], default="deny",
                      rules=[RuleSpec(f"r{n}", "key", f"k{n:02d}", "allow", ["*"]) for n in range(55)])
    tool_costs_set(virtual_host=world["host"], costs=[ToolCostSpec([f"t{n}"], n) for n in range(55)])
    client = _client(world["admin"])
    for suffix in ("rate-limits", "budgets"):
        with django_assert_max_num_queries(8):
            page = client.get(_api(world, suffix)).json()
        assert page["count"] == 55 and len(page["results"]) == 50 and page["next"]
        assert len(client.get(_api(world, suffix), {"offset": 50}).json()["results"]) == 5
    for suffix in ("access-policy", "tool-costs"):
        with django_assert_max_num_queries(8):
            assert client.get(_api(world, f"virtual-hosts/{world['host'].pk}/{suffix}")).status_code == 200


def test_the_simulator_says_unknown_tool_and_which_conditions_could_not_be_evaluated(world: dict[str, Any]) -> None:
    slug = world["tenant"].slug
    access_policy_set(virtual_host=world["host"], default="allow", rules=[
        RuleSpec("small", "tenant", slug, "allow", ["get-sum"], "arguments.a < 10"),
        RuleSpec("no-etc", "tenant", slug, "deny", ["mul"], 'arguments.path.startsWith("/etc")'),
    ])
    client = _client(world["member"])
    url = _api(world, f"virtual-hosts/{world['host'].pk}/access-policy/simulate")

    def simulate(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        response = client.post(url, {"key": world["agent"].pk, "tool": tool, "arguments": arguments}, format="json")
        assert response.status_code == 200, response.json()
        return response.json()

    for tool in ("div", "sum"):  # not a tool of the backend; the default name of an aliased tool
        unknown = simulate(tool, {})
        assert (unknown["listed"], unknown["allowed"], unknown["tool_known"]) == (False, False, False)
        assert unknown["reason"].startswith("unknown tool: a call is answered -32602 Unknown tool"), unknown
    assert "but its backend has no such tool" in simulate("div", {})["reason"]
    missing = simulate("get-sum", {})
    assert (missing["allowed"], missing["rule"], missing["tool_known"]) == (True, None, True)  # the default allows
    assert missing["condition_errors"] == [
        {"rule": "small", "message": "no such key 'a'", "treated": "treated as not matching"}]
    hostile = simulate("mul", {"path": 5})
    assert (hostile["allowed"], hostile["rule"]) == (False, "no-etc")
    assert [(e["rule"], e["treated"]) for e in hostile["condition_errors"]] == [
        ("no-etc", "treated as matching: a deny rule whose condition cannot be evaluated denies")]
    assert simulate("mul", {"path": "/home"})["condition_errors"] == []


def test_the_simulator_says_when_the_backends_tools_are_not_known(world: dict[str, Any]) -> None:
    host = factories.virtual_host_factory(tenant=world["tenant"], mounts={"new": factories.backend_factory(
        tenant=world["tenant"], name="new")})
    answer = _client(world["admin"]).post(_api(world, f"virtual-hosts/{host.pk}/access-policy/simulate"),
                                          {"key": world["agent"].pk, "tool": "anything"}, format="json").json()
    assert (answer["allowed"], answer["tool_known"]) == (True, None)
    assert answer["tools_note"] == ("the tools of MCP backend 'new' (mount 'new') are not known: the tool index holds "
                                    "none of them (not indexed yet, or indexing is off): whether it has 'anything' "
                                    "was not checked")
