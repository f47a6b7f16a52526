"""One check behind every face that writes an access rule (`apps.kernel.policy.policy_compile`) or a
tool cost (`apps.kernel.costs.tool_cost_check`): the service, the REST API, the console and a
configuration document refuse a bad one with the same words, and store nothing."""

from __future__ import annotations

import html
import json
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from apps.configuration.document import ConfigInvalid
from apps.configuration.services import config_apply
from apps.kernel.costs import ToolCostSpec, call_cost, tool_cost_check
from apps.kernel.policy import RuleSpec
from apps.policies.models import AccessPolicy, AccessRule, ToolCost
from apps.policies.selectors import access_policy_compiled, tool_costs_compiled
from apps.policies.services import access_policy_set, tool_costs_set
from tests.factories import tenant_factory, virtual_host_factory

pytestmark = pytest.mark.django_db

LONG_PATTERN = "t" * 129
PATTERN = "a tool name or glob is at most 128 characters, not 129"
COST = "cost must be a whole number from 0 to 2147483647"


def _document(**sections: Any) -> str:
    return json.dumps({
        "tenants": [{"slug": "doc", "name": "Doc"}],
        "backends": [{"tenant": "doc", "name": "demo", "urls": ["http://127.0.0.1:9001/mcp"]}],
        "virtual_hosts": [{"tenant": "doc", "slug": "main", "backends": {"demo": "demo"}}],
        **sections,
    })


def _document_refuses(document: str, words: str) -> None:
    with pytest.raises(ConfigInvalid) as refused:
        config_apply(document=document, prune=False)
    assert words in str(refused.value), str(refused.value)


# --- access rules ---------------------------------------------------------------------------------
RULE_CASES = [
    ({"id": "no spaces"}, "ids are 1-64 letters, digits, '_', '.' and '-'"),
    ({"id": "r" * 65}, "ids are 1-64 letters, digits, '_', '.' and '-'"),
    ({"tools": [LONG_PATTERN]}, PATTERN),
    ({"condition": "arguments.a =="}, "is not valid CEL"),
    ({"condition": "true || " * 300 + "true"}, "a condition is at most 2000 characters"),
    ({"condition": "arguments.MaxResults + 1"},
     "rule 'r1': condition 'arguments.MaxResults + 1' gives an int, never true or false"),
    ({"condition": "frobnicate(arguments)"},
     "rule 'r1': condition 'frobnicate(arguments)' calls frobnicate(), which CEL conditions do not have"),
    ({"tools": ["Describe["]},
     "rule 'r1': the glob 'Describe[' opens a character class with '[' that is never closed with ']'"),
]
RULE_IDS = ["id-space", "id-long", "pattern-long", "condition-cel", "condition-long", "condition-not-bool",
            "condition-unknown-function", "glob-unclosed"]


@pytest.mark.parametrize(("bad", "words"), RULE_CASES, ids=RULE_IDS)
def test_every_face_refuses_a_bad_rule(admin_client: Client, bad: dict[str, Any], words: str) -> None:
    host = virtual_host_factory()
    tenant = host.tenant
    rule = {"id": "r1", "effect": "deny", "tools": ["echo"], "condition": "", **bad}
    with pytest.raises(ValidationError) as refused:
        access_policy_set(virtual_host=host, default="allow", rules=[RuleSpec(
            rule["id"], "tenant", tenant.slug, rule["effect"], tuple(rule["tools"]), rule["condition"])])
    assert any(words in message for message in refused.value.messages), refused.value.messages

    body = {"default": "allow", "rules": [{**rule, "subject_kind": "tenant", "subject_name": tenant.slug}]}
    response = admin_client.put(f"/api/v1/tenants/{tenant.slug}/virtual-hosts/{host.pk}/access-policy", body,
                                content_type="application/json")
    assert response.status_code == 400 and words in response.json()["detail"], response.json()

    form = {"new-rule_id": rule["id"], "new-subject": f"tenant:{tenant.slug}", "new-effect": rule["effect"],
            "new-tools": ", ".join(rule["tools"]), "new-condition": rule["condition"]}
    response = admin_client.post(f"/console/t/{tenant.slug}/access/{host.pk}/rules/", form)
    assert response.status_code == 400 and html.escape(words) in response.content.decode()

    written = {"id": rule["id"], "subject": {"tenant": "doc"}, "effect": rule["effect"], "tools": rule["tools"],
               "when": rule["condition"]}
    _document_refuses(_document(policies=[{"tenant": "doc", "virtual_host": "main", "rules": [written]}]), words)
    assert not AccessPolicy.objects.exists()


def test_a_policy_of_too_many_rules_is_refused_by_the_service_and_a_document() -> None:
    host = virtual_host_factory()
    rules = [RuleSpec(f"r{i}", "tenant", host.tenant.slug, "deny", ("x",)) for i in range(501)]
    words = "a policy has at most 500 rules, not 501"
    with pytest.raises(ValidationError, match=words):
        access_policy_set(virtual_host=host, default="allow", rules=rules)
    written = [{"id": rule.id, "subject": {"tenant": "doc"}, "effect": "deny", "tools": ["x"]} for rule in rules]
    _document_refuses(_document(policies=[{"tenant": "doc", "virtual_host": "main", "rules": written}]), words)
    assert not AccessPolicy.objects.exists()


# --- tool costs -----------------------------------------------------------------------------------
COST_CASES = [
    ({"cost": -1}, COST),
    ({"cost": 2_147_483_648}, COST),  # past the database's integer column
    ({"tools": [LONG_PATTERN]}, PATTERN),
    ({"tools": ["Describe["]}, "the glob 'Describe[' opens a character class with '[' that is never closed with ']'"),
]
COST_IDS = ["cost-negative", "cost-too-big", "pattern-long", "glob-unclosed"]


def test_the_cost_check_names_each_wrong_field() -> None:
    assert tool_cost_check(ToolCostSpec(("echo", "get-*"), 0)) == []
    assert [p.field for p in tool_cost_check(ToolCostSpec((), True))] == ["tools", "cost"]  # type: ignore[arg-type]


@pytest.mark.parametrize(("bad", "words"), COST_CASES, ids=COST_IDS)
def test_every_face_refuses_a_bad_tool_cost(admin_client: Client, bad: dict[str, Any], words: str) -> None:
    host = virtual_host_factory(tenant=tenant_factory())
    tenant = host.tenant
    entry = {"tools": ["echo"], "cost": 3, **bad}
    with pytest.raises(ValidationError) as refused:
        tool_costs_set(virtual_host=host, costs=[ToolCostSpec(tuple(entry["tools"]), entry["cost"])])
    assert any(words in message for message in refused.value.messages), refused.value.messages

    response = admin_client.put(f"/api/v1/tenants/{tenant.slug}/virtual-hosts/{host.pk}/tool-costs", [entry],
                                content_type="application/json")
    assert response.status_code == 400 and words in response.json()["detail"], response.json()

    form = {"costs-TOTAL_FORMS": 1, "costs-INITIAL_FORMS": 0, "costs-0-tools": " ".join(entry["tools"]),
            "costs-0-cost": entry["cost"], "costs-0-ORDER": 1}
    response = admin_client.post(f"/console/t/{tenant.slug}/limits/costs/{host.pk}/", form)
    assert response.status_code == 400 and html.escape(words) in response.content.decode()

    _document_refuses(_document(tool_costs=[{"tenant": "doc", "virtual_host": "main", **entry}]), words)
    assert not ToolCost.objects.exists()


def test_what_was_stored_before_a_limit_still_serves() -> None:
    # Written before the limits for writing existed (rows made directly, as an old release wrote them):
    # the gateway's snapshot still compiles them, instead of denying everything or charging 1 a call.
    host = virtual_host_factory()
    policy = AccessPolicy.objects.create(virtual_host=host, default_effect="deny")
    AccessRule.objects.create(policy=policy, rule_id="old", position=0, subject_kind="tenant",
                              subject_name=host.tenant.slug, effect="allow",
                              tools=[f"t{i}" for i in range(250)] + [LONG_PATTERN], condition="")
    ToolCost.objects.create(virtual_host=host, position=0, tools=[LONG_PATTERN], cost=0)
    compiled = access_policy_compiled(virtual_host=host)
    assert compiled is not None and [rule.id for rule in compiled.rules] == ["old"]
    assert call_cost(tool_costs_compiled(virtual_host=host), "tools/call", LONG_PATTERN, LONG_PATTERN) == 0


def test_a_pattern_with_a_space_is_refused_where_it_can_be_given(admin_client: Client) -> None:
    # It could never match a tool name; the console splits its input on spaces, so only these faces see one.
    host = virtual_host_factory()
    words = "a tool name or glob has no spaces: ' delete_repo'"
    with pytest.raises(ValidationError, match=words):
        access_policy_set(virtual_host=host, default="allow",
                          rules=[RuleSpec("r1", "tenant", host.tenant.slug, "deny", (" delete_repo",))])
    body = {"default": "allow", "rules": [{"id": "r1", "subject_kind": "tenant", "subject_name": host.tenant.slug,
                                           "effect": "deny", "tools": [" delete_repo"]}]}
    response = admin_client.put(f"/api/v1/tenants/{host.tenant.slug}/virtual-hosts/{host.pk}/access-policy", body,
                                content_type="application/json")
    assert response.status_code == 400 and words in response.json()["detail"]
    response = admin_client.put(f"/api/v1/tenants/{host.tenant.slug}/virtual-hosts/{host.pk}/tool-costs",
                                [{"tools": [" delete_repo"], "cost": 0}], content_type="application/json")
    assert response.status_code == 400 and words in response.json()["detail"]
    written = {"id": "r1", "subject": {"tenant": "doc"}, "effect": "deny", "tools": [" delete_repo"]}
    _document_refuses(_document(policies=[{"tenant": "doc", "virtual_host": "main", "rules": [written]}]), words)
    assert not AccessPolicy.objects.exists() and not ToolCost.objects.exists()
