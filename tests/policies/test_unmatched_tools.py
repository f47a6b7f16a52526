"""A rule whose tool patterns name no tool the host is known to have (an OpenAPI backend's compiled
tools, an MCP backend's in the tool index, named by the host's naming) is stored only with a
warning: the service returns it, the console and the REST API ask before storing (save anyway /
`allow_unmatched`), `gateway apply` stores it and reports it. Where a backend's tools are not
known, the warning says so instead of claiming the pattern names nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from apps.catalog.curation import tools_hide
from apps.catalog.models import SpecVersion
from apps.catalog.services import ToolTarget
from apps.catalog.specs import spec_upload
from apps.configuration.reports import report_lines
from apps.configuration.services import config_apply
from apps.kernel.policy import RuleSpec
from apps.policies.models import AccessPolicy
from apps.policies.selectors import access_rules_of, policy_virtual_host_get
from apps.policies.services import UnmatchedTools, access_policy_set
from apps.tenants.services import membership_set
from tests import factories
from tests.backends.specs import as_json, swagger_spec

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(django_user_model: Any, django_capture_on_commit_callbacks: Any) -> dict[str, Any]:
    tenant = factories.tenant_factory()
    pets = factories.openapi_backend_factory(tenant=tenant, name="pets")
    with django_capture_on_commit_callbacks(execute=True):  # compiled now: listItems, getItem
        spec_upload(backend=pets, document=as_json(swagger_spec()), filename="spec.json", uploaded_by="test")
    assert SpecVersion.objects.get(backend=pets).status == SpecVersion.Status.READY
    calc = factories.backend_factory(tenant=tenant, name="calc")
    for tool in ("sum", "mul"):
        factories.indexed_tool_factory(backend=calc, name=tool)
    host = factories.virtual_host_factory(
        tenant=tenant, slug="main", mounts={"pets": pets, "calc": calc},
        tool_aliases={"get-sum": ToolTarget(map_key="calc", upstream_name="sum")},
    )
    admin = django_user_model.objects.create_user(username=f"admin-{tenant.slug}", password="pw")
    membership_set(tenant=tenant, user=admin, role="admin")
    return {"tenant": tenant, "host": host, "admin": admin}


def _rule(rule_id: str, tools: list[str], tenant: str) -> RuleSpec:
    return RuleSpec(rule_id, "tenant", tenant, "deny", tuple(tools))


# The host lists pets-listItems, pets-getItem, calc-mul and get-sum (calc's sum, under its alias).
KNOWN = "(its 4 tools, as the catalog knows them): the rule does nothing for such a name until the host has such a tool"


def test_the_service_warns_of_each_pattern_that_names_no_known_tool(world: dict[str, Any]) -> None:
    slug = world["tenant"].slug
    rules = [
        _rule("fine", ["pets-*", "sum", "calc-mul", "get-sum", "listItems"], slug),  # exposed or upstream names
        _rule("typo", ["calc-summ", "get-sum"], slug),
        _rule("nothing", ["delete*", "calc-sum"], slug),  # an aliased tool answers to its alias only
    ]
    warnings = access_policy_set(virtual_host=world["host"], default="allow", rules=rules)
    assert warnings == (
        f"rule 'typo': 'calc-summ' matches no tool of virtual host 'main' {KNOWN}",
        f"rule 'nothing': 'delete*', 'calc-sum' match no tool of virtual host 'main' {KNOWN}",
    )
    assert [rule.id for rule in access_rules_of(virtual_host=world["host"])[1]] == ["fine", "typo", "nothing"]
    # What is stored is not warned about again: not when moved, nor when its patterns are reordered.
    moved = [rules[2], rules[0], RuleSpec("typo", "tenant", slug, "allow", ("get-sum", "calc-summ"), "true")]
    assert access_policy_set(virtual_host=world["host"], default="deny", rules=moved, allow_unmatched=False) == ()


def test_asked_not_to_store_it_the_service_stores_nothing(world: dict[str, Any]) -> None:
    with pytest.raises(UnmatchedTools) as refused:
        access_policy_set(virtual_host=world["host"], default="allow", allow_unmatched=False,
                          rules=[_rule("typo", ["calc-summ"], world["tenant"].slug)])
    assert refused.value.warnings == (f"rule 'typo': 'calc-summ' matches no tool of virtual host 'main' {KNOWN}",)
    assert not AccessPolicy.objects.exists()


def test_a_backend_whose_tools_are_not_known_is_named_rather_than_no_match_claimed(world: dict[str, Any]) -> None:
    tenant = world["tenant"]
    fresh = factories.backend_factory(tenant=tenant, name="fresh")  # an MCP server not indexed yet
    draft = factories.openapi_backend_factory(tenant=tenant, name="draft")  # no spec compiled yet
    host = factories.virtual_host_factory(tenant=tenant, slug="new", mounts={"fresh": fresh, "draft": draft})
    warnings = access_policy_set(virtual_host=host, default="allow", rules=[_rule("r", ["fresh-echo"], tenant.slug)])
    assert warnings == (
        "rule 'r': 'fresh-echo' matches no tool of virtual host 'new' that the catalog knows; backend 'draft' "
        "(mount 'draft') has no compiled OpenAPI spec yet; the tools of MCP backend 'fresh' (mount 'fresh') are "
        "not known: the tool index holds none of them (not indexed yet, or indexing is off): it may name one of those",
    )


def test_the_api_asks_for_allow_unmatched_and_then_stores_it_with_the_warning(world: dict[str, Any]) -> None:
    client = APIClient()
    client.force_authenticate(world["admin"])
    url = f"/api/v1/tenants/{world['tenant'].slug}/virtual-hosts/{world['host'].pk}/access-policy"
    rule = {"id": "typo", "subject_kind": "tenant", "subject_name": world["tenant"].slug, "effect": "deny",
            "tools": ["calc-summ"], "condition": ""}
    warning = f"rule 'typo': 'calc-summ' matches no tool of virtual host 'main' {KNOWN}"
    refused = client.put(url, {"default": "allow", "rules": [rule]}, format="json")
    assert refused.status_code == 400
    assert refused.json() == {
        "detail": f'not saved: {warning}; send "allow_unmatched": true to save it anyway', "warnings": [warning]}
    assert not AccessPolicy.objects.exists()
    stored = client.put(url, {"default": "allow", "rules": [rule], "allow_unmatched": True}, format="json")
    assert stored.status_code == 200 and stored.json()["warnings"] == [warning]
    assert client.get(url).json() == {"default": "allow", "rules": [rule]}


def test_the_console_shows_the_warning_and_stores_only_when_told_to(world: dict[str, Any]) -> None:
    client = Client()
    client.force_login(world["admin"])
    url = f"/console/t/{world['tenant'].slug}/access/{world['host'].pk}/"
    form = {"new-rule_id": "typo", "new-subject": f"tenant:{world['tenant'].slug}", "new-effect": "deny",
            "new-tools": "calc-summ", "new-condition": ""}
    asked = client.post(f"{url}rules/", form)
    body = asked.content.decode()
    assert asked.status_code == 400 and "Not saved yet" in body and "matches no tool of virtual host" in body
    assert 'name="new-allow_unmatched"' in body
    def stored_rules() -> list[str]:
        host = policy_virtual_host_get(tenant=world["tenant"], virtual_host_id=world["host"].pk)
        return [rule.id for rule in access_rules_of(virtual_host=host)[1]]

    assert stored_rules() == []
    stored = client.post(f"{url}rules/", {**form, "new-allow_unmatched": "on"}, follow=True)
    body = stored.content.decode()
    assert "Rule typo added." in body and "Warning: rule &#x27;typo&#x27;: &#x27;calc-summ&#x27; matches" in body
    assert stored_rules() == ["typo"]
    # Editing another rule's condition does not ask about this one again; changing its tools does.
    edited = client.post(f"{url}rules/typo/", {**{k.replace("new-", "edit-"): v for k, v in form.items()},
                                               "edit-condition": "arguments.a == 1"})
    assert edited.status_code == 302
    edited = client.post(f"{url}rules/typo/", {**{k.replace("new-", "edit-"): v for k, v in form.items()},
                                               "edit-tools": "calc-div"})
    assert edited.status_code == 400 and 'name="edit-allow_unmatched"' in edited.content.decode()


def test_gateway_apply_stores_it_and_reports_the_warning() -> None:
    document = {
        "tenants": [{"slug": "doc", "name": "Doc"}],
        "backends": [{"tenant": "doc", "name": "demo", "urls": ["http://127.0.0.1:9001/mcp"]}],
        "virtual_hosts": [{"tenant": "doc", "slug": "main", "backends": {"demo": "demo"}}],
        "policies": [{"tenant": "doc", "virtual_host": "main", "rules": [
            {"id": "no-echo", "subject": {"tenant": "doc"}, "effect": "deny", "tools": ["echo"]}]}],
    }
    report = config_apply(document=json.dumps(document), prune=False)
    line = next(line for line in report_lines(report) if " policy " in line)
    assert line.startswith("created    policy        doc/main  (default allow, 1 rules; WARNING: rule 'no-echo': "
                           "'echo' matches no tool of virtual host 'main' that the catalog knows; the tools of MCP "
                           "backend 'demo' (mount 'demo') are not known"), line
    assert AccessPolicy.objects.get().rules.get().rule_id == "no-echo"


def test_a_tool_the_hosts_curation_hides_is_no_tool_of_the_host(world: dict[str, Any]) -> None:
    tools_hide(virtual_host=world["host"], tools=[("calc", "mul")])
    warnings = access_policy_set(virtual_host=world["host"], default="allow",
                                 rules=[_rule("r", ["calc-mul", "mul"], world["tenant"].slug)])
    assert warnings == ("rule 'r': 'calc-mul', 'mul' match no tool of virtual host 'main' (its 3 tools, as the "
                        "catalog knows them): the rule does nothing for such a name until the host has such a tool",)
