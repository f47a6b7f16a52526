"""The access rules pages: the editor (each change stored whole through `access_policy_set`, a
refusal shown next to its rule and changing nothing), the simulator, and who may do what."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from apps.catalog.services import ToolTarget
from apps.kernel.policy import RuleSpec
from apps.policies.models import AccessPolicy
from apps.policies.selectors import access_rules_of, policy_virtual_host_get
from apps.policies.services import access_policy_set
from apps.tenants.services import membership_set
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(django_user_model: Any) -> dict[str, Any]:
    tenant = factories.tenant_factory()
    team = factories.team_factory(tenant=tenant, slug="platform")
    agent = factories.api_key_factory(tenant=tenant, name="agent", team=team).api_key
    other = factories.api_key_factory(tenant=tenant, name="other").api_key
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
    return {"tenant": tenant, "host": host, "agent": agent, "other": other, "admin": admin, "member": member}


def _url(world: dict[str, Any], suffix: str = "") -> str:
    return f"/console/t/{world['tenant'].slug}/access/{world['host'].pk}/{suffix}"


def _rules(world: dict[str, Any]) -> tuple[str | None, list[RuleSpec]]:
    host = policy_virtual_host_get(tenant=world["tenant"], virtual_host_id=world["host"].pk)
    return access_rules_of(virtual_host=host)


def _rule_post(rule_id: str, subject: str, effect: str, tools: str, condition: str = "", prefix: str = "new") -> dict:
    return {f"{prefix}-rule_id": rule_id, f"{prefix}-subject": subject, f"{prefix}-effect": effect,
            f"{prefix}-tools": tools, f"{prefix}-condition": condition}


def test_an_admin_builds_a_policy_rule_by_rule(client: Client, world: dict[str, Any]) -> None:
    client.force_login(world["admin"])
    page = client.get(_url(world))
    assert page.status_code == 200 and "no policy" in page.content.decode()
    response = client.post(_url(world, "rules/"), _rule_post("no-sum", "key:other", "deny", "get-sum, m*"))
    assert response.status_code == 302
    client.post(_url(world, "rules/"), _rule_post("team-a1", "team:platform", "allow", "get-sum", "arguments.a == 1"))
    client.post(_url(world, "default/"), {"default": "deny"})
    default, rules = _rules(world)
    assert default == "deny"
    assert [(r.id, r.subject_kind, r.subject_name, r.effect, r.tools, r.condition) for r in rules] == [
        ("no-sum", "key", "other", "deny", ("get-sum", "m*"), ""),
        ("team-a1", "team", "platform", "allow", ("get-sum",), "arguments.a == 1"),
    ]
    editing = client.get(_url(world), {"edit": "team-a1"}).content.decode()
    assert 'aria-label="Edit rule team-a1"' in editing and 'value="arguments.a == 1"' not in editing
    assert "arguments.a == 1</textarea>" in editing
    # Move the second up, edit it, delete the first.
    assert client.post(_url(world, "rules/team-a1/move/"), {"direction": "up"}).status_code == 302
    assert [r.id for r in _rules(world)[1]] == ["team-a1", "no-sum"]
    edited = client.post(_url(world, "rules/team-a1/"),
                         _rule_post("team-a2", "team:platform", "allow", "get-sum", "arguments.a == 2", prefix="edit"))
    assert edited.status_code == 302
    assert [(r.id, r.condition) for r in _rules(world)[1]] == [("team-a2", "arguments.a == 2"), ("no-sum", "")]
    assert client.post(_url(world, "rules/no-sum/delete/")).status_code == 302
    assert [r.id for r in _rules(world)[1]] == ["team-a2"]
    page = client.get(_url(world)).content.decode()
    assert "team-a2" in page and "Rule no-sum deleted." in page
    assert client.post(_url(world, "remove/")).status_code == 302
    assert not AccessPolicy.objects.filter(virtual_host=world["host"]).exists()


def test_a_bad_rule_is_refused_next_to_its_form_and_changes_nothing(client: Client, world: dict[str, Any]) -> None:
    access_policy_set(virtual_host=world["host"], default="deny", rules=[RuleSpec("keep", "key", "agent", "allow", ["*"])])
    client.force_login(world["admin"])
    response = client.post(_url(world, "rules/"), _rule_post("bad", "team:platform", "allow", "x", "arguments.a =="))
    assert response.status_code == 400
    body = response.content.decode()
    assert "The rule was refused" in body and "not valid CEL" in body
    assert [r.id for r in _rules(world)[1]] == ["keep"]
    # A duplicate id in an edit: refused in the edit form of that rule.
    client.post(_url(world, "rules/"), _rule_post("second", "key:other", "deny", "get-sum"))
    response = client.post(_url(world, "rules/second/"), _rule_post("keep", "key:other", "deny", "x", prefix="edit"))
    assert response.status_code == 400 and "the id is used twice" in response.content.decode()
    assert 'aria-label="Edit rule second"' in response.content.decode()
    assert [r.id for r in _rules(world)[1]] == ["keep", "second"]


def test_a_rule_whose_key_was_deleted_is_named_next_to_that_rule(client: Client, world: dict[str, Any]) -> None:
    access_policy_set(virtual_host=world["host"], default="allow",
                      rules=[RuleSpec("old", "key", "other", "deny", ["*"])])
    world["other"].delete()
    client.force_login(world["admin"])
    response = client.post(_url(world, "default/"), {"default": "deny"})
    assert response.status_code == 400
    body = response.content.decode()
    assert "rule &#x27;old&#x27;: tenant" in body and "has no key &#x27;other&#x27;" in body
    assert _rules(world)[0] == "allow"


def test_the_subject_and_host_must_be_the_tenants_own(client: Client, world: dict[str, Any]) -> None:
    stranger = factories.tenant_factory()
    their_key = factories.api_key_factory(tenant=stranger, name="theirs").api_key
    their_host = factories.virtual_host_factory(tenant=stranger)
    client.force_login(world["admin"])
    response = client.post(_url(world, "rules/"), _rule_post("x", f"key:{their_key.name}", "deny", "*"))
    assert response.status_code == 400 and "Select a valid choice" in response.content.decode()
    assert not AccessPolicy.objects.exists()
    slug = world["tenant"].slug
    assert client.get(f"/console/t/{slug}/access/{their_host.pk}/").status_code == 404
    assert client.post(f"/console/t/{slug}/access/{their_host.pk}/default/", {"default": "deny"}).status_code == 404
    assert client.get(f"/console/t/{stranger.slug}/access/{their_host.pk}/").status_code == 404
    assert not AccessPolicy.objects.exists()


def test_members_read_and_simulate_but_do_not_edit(client: Client, world: dict[str, Any]) -> None:
    access_policy_set(virtual_host=world["host"], default="allow", rules=[RuleSpec("r", "key", "agent", "deny", ["*"])])
    client.force_login(world["member"])
    page = client.get(_url(world)).content.decode()
    assert "Add a rule" not in page and "<code>r</code>" in page
    assert client.post(_url(world, "default/"), {"default": "deny"}).status_code == 403
    assert client.post(_url(world, "rules/r/delete/")).status_code == 403
    assert client.post(_url(world, "rules/r/move/"), {"direction": "down"}).status_code == 403
    assert client.post(_url(world, "remove/")).status_code == 403
    simulated = client.get(_url(world), {"sim-caller": "key", "sim-key": world["agent"].pk, "sim-tool": "get-sum",
                                         "sim-arguments": "{}"})
    assert simulated.status_code == 200 and 'id="decision">deny' in simulated.content.decode()
    assert _rules(world)[0] == "allow"


def test_anonymous_visitors_go_to_the_login_form(client: Client, world: dict[str, Any]) -> None:
    response = client.get(_url(world))
    assert response.status_code == 302 and response["Location"].startswith("/console/login/")
    assert client.post(_url(world, "default/"), {"default": "deny"}).status_code == 302
    assert not AccessPolicy.objects.exists()


def test_every_form_needs_the_csrf_token(world: dict[str, Any]) -> None:
    access_policy_set(virtual_host=world["host"], default="allow", rules=[RuleSpec("r", "key", "agent", "deny", ["*"])])
    client = Client(enforce_csrf_checks=True)
    client.force_login(world["admin"])
    for suffix, data in [("default/", {"default": "deny"}), ("rules/", _rule_post("x", "key:agent", "deny", "*")),
                         ("rules/r/", _rule_post("r", "key:agent", "allow", "*", prefix="edit")),
                         ("rules/r/move/", {"direction": "down"}), ("rules/r/delete/", {}), ("remove/", {})]:
        assert client.post(_url(world, suffix), data).status_code == 403, suffix
    assert [(r.id, r.effect) for r in _rules(world)[1]] == [("r", "deny")]


def test_the_simulator_names_the_deciding_rule(client: Client, world: dict[str, Any]) -> None:
    access_policy_set(virtual_host=world["host"], default="allow", rules=[
        RuleSpec("fine", "tenant", world["tenant"].slug, "allow", ["*"]),
        RuleSpec("no-big", "team", "platform", "deny", ["get-sum"], "arguments.a > 10"),
    ])
    client.force_login(world["admin"])

    def simulate(**fields: str) -> str:
        response = client.get(_url(world), {f"sim-{k}": v for k, v in fields.items()})
        assert response.status_code == 200, response.content.decode()
        return response.content.decode()

    denied = simulate(caller="key", key=str(world["agent"].pk), tool="get-sum", arguments='{"a": 11}')
    assert 'id="decision">deny' in denied and "rule 2: <code>no-big</code>" in denied
    assert "denied by rule &#x27;no-big&#x27;" in denied
    allowed = simulate(caller="key", key=str(world["agent"].pk), tool="get-sum", arguments='{"a": 1}')
    assert 'id="decision">allow' in allowed and "rule 1: <code>fine</code>" in allowed
    # A JWT subject on the team is denied the same way; one without a team is not.
    token = simulate(caller="token", subject="alice", team="platform", tool="get-sum", arguments='{"a": 99}')
    assert "rule 2: <code>no-big</code>" in token
    teamless = simulate(caller="token", subject="alice", tool="get-sum", arguments='{"a": 99}')
    assert 'id="decision">allow' in teamless
    assert "<code>sum</code> on mount <code>calc</code>" in allowed


def test_a_hidden_tool_names_the_rule_that_hides_it(client: Client, world: dict[str, Any]) -> None:
    access_policy_set(virtual_host=world["host"], default="allow",
                      rules=[RuleSpec("hide", "key", "other", "deny", ["get-*"])])
    client.force_login(world["admin"])
    body = client.get(_url(world), {"sim-caller": "key", "sim-key": world["other"].pk, "sim-tool": "get-sum"}).content
    assert b"hidden: not listed" in body and b"rule 1: <code>hide</code>" in body


@pytest.mark.parametrize(("fields", "message"), [
    ({"sim-arguments": "{not json"}, "Not valid JSON"),
    ({"sim-arguments": "[1, 2]"}, "Give a JSON object"),
    ({"sim-key": ""}, "Choose the key that calls."),
    ({"sim-caller": "token", "sim-key": ""}, "Give the token&#x27;s subject."),
    ({"sim-tool": ""}, "This field is required."),
])
def test_the_simulator_says_what_is_wrong_with_its_form(
    client: Client, world: dict[str, Any], fields: dict[str, str], message: str
) -> None:
    client.force_login(world["admin"])
    data = {"sim-caller": "key", "sim-key": world["agent"].pk, "sim-tool": "get-sum", "sim-arguments": "{}", **fields}
    response = client.get(_url(world), data)
    assert response.status_code == 400
    assert message in response.content.decode()


def test_the_simulator_refuses_another_tenants_key_and_team(client: Client, world: dict[str, Any]) -> None:
    stranger = factories.tenant_factory()
    their_key = factories.api_key_factory(tenant=stranger).api_key
    factories.team_factory(tenant=stranger, slug="theirs")
    client.force_login(world["admin"])
    response = client.get(_url(world), {"sim-caller": "key", "sim-key": their_key.pk, "sim-tool": "get-sum"})
    assert response.status_code == 400 and "Select a valid choice" in response.content.decode()
    response = client.get(_url(world), {"sim-caller": "token", "sim-subject": "s", "sim-team": "theirs",
                                         "sim-tool": "get-sum"})
    assert response.status_code == 400 and "Select a valid choice" in response.content.decode()


def test_the_host_list_is_paginated_with_bounded_queries(
    client: Client, world: dict[str, Any], django_assert_max_num_queries: Any
) -> None:
    tenant = world["tenant"]
    backend = factories.backend_factory(tenant=tenant)
    for n in range(55):
        host = factories.virtual_host_factory(tenant=tenant, slug=f"h{n:02d}", mounts={"m": backend})
        access_policy_set(virtual_host=host, default="deny", rules=[RuleSpec("r", "key", "agent", "allow", ["*"])])
    client.force_login(world["admin"])
    with django_assert_max_num_queries(12):
        page = client.get(f"/console/t/{tenant.slug}/access/")
    body = page.content.decode()
    assert page.status_code == 200 and "Page 1 of 2" in body and "h00" in body and "h55" not in body
    with django_assert_max_num_queries(12):
        assert "h54" in client.get(f"/console/t/{tenant.slug}/access/", {"page": 2}).content.decode()


def test_the_editor_page_has_bounded_queries(
    client: Client, world: dict[str, Any], django_assert_max_num_queries: Any
) -> None:
    rules = [RuleSpec(f"r{n}", "key", "agent", "allow", ["*"]) for n in range(40)]
    access_policy_set(virtual_host=world["host"], default="deny", rules=rules)
    client.force_login(world["admin"])
    with django_assert_max_num_queries(15):
        body = client.get(_url(world)).content.decode()
    assert "r39" in body


def test_deleting_a_rule_and_removing_the_policy_ask_first(client: Client, world: dict[str, Any]) -> None:
    access_policy_set(virtual_host=world["host"], default="deny", rules=[
        RuleSpec("keep", "key", "agent", "allow", ["*"]), RuleSpec("go", "team", "platform", "deny", ["mul"])])
    client.force_login(world["admin"])
    page = client.get(_url(world)).content.decode()
    assert f'href="{_url(world, "rules/go/delete/")}"' in page and f'href="{_url(world, "remove/")}"' in page
    asked = client.get(_url(world, "rules/go/delete/"))
    body = asked.content.decode()
    assert asked.status_code == 200 and "Delete rule go?" in body
    assert "Rule 2 of" in body and "deny team platform for mul, is deleted." in body
    assert "calls it denies may then be allowed" in body and f'href="{_url(world)}">Cancel' in body
    assert [r.id for r in _rules(world)[1]] == ["keep", "go"]  # asking changes nothing
    assert client.post(_url(world, "rules/go/delete/")).status_code == 302
    assert [r.id for r in _rules(world)[1]] == ["keep"]
    assert client.get(_url(world, "rules/go/delete/")).status_code == 404

    asked = client.get(_url(world, "remove/"))
    body = asked.content.decode()
    assert asked.status_code == 200 and "Remove the access policy of" in body
    assert "Its default (deny) and its 1 rule are deleted." in body and "every key of the tenant may see" in body
    assert AccessPolicy.objects.filter(virtual_host=world["host"]).exists()
    assert client.post(_url(world, "remove/")).status_code == 302
    assert not AccessPolicy.objects.filter(virtual_host=world["host"]).exists()
    assert client.get(_url(world, "remove/")).status_code == 302  # nothing left to remove: back to the page


def test_members_are_not_asked_to_delete(client: Client, world: dict[str, Any]) -> None:
    access_policy_set(virtual_host=world["host"], default="allow", rules=[RuleSpec("r", "key", "agent", "deny", ["*"])])
    client.force_login(world["member"])
    assert client.get(_url(world, "rules/r/delete/")).status_code == 403
    assert client.get(_url(world, "remove/")).status_code == 403
    assert 'rules/r/delete/' not in client.get(_url(world)).content.decode()


def test_the_simulator_shows_an_unknown_tool_and_the_conditions_that_could_not_be_evaluated(
    client: Client, world: dict[str, Any]
) -> None:
    slug = world["tenant"].slug
    access_policy_set(virtual_host=world["host"], default="allow", rules=[
        RuleSpec("small", "tenant", slug, "allow", ["get-sum"], "arguments.a < 10"),
        RuleSpec("no-etc", "tenant", slug, "deny", ["mul"], 'arguments.path.startsWith("/etc")'),
    ])
    client.force_login(world["member"])

    def simulate(tool: str, arguments: str = "{}") -> str:
        response = client.get(_url(world), {"sim-caller": "key", "sim-key": world["agent"].pk, "sim-tool": tool,
                                             "sim-arguments": arguments})
        assert response.status_code == 200
        return response.content.decode()

    unknown = simulate("div")
    assert 'id="decision">unknown tool</strong>' in unknown and "Routes to" not in unknown
    assert "unknown tool: a call is answered -32602 Unknown tool" in unknown
    failed = simulate("get-sum")
    assert 'id="decision">allow' in failed
    assert ("condition of rule <code>small</code> raised: no such key &#x27;a&#x27; — treated as not matching"
            in failed)
    denied = simulate("mul", '{"path": 5}')
    assert 'id="decision">deny' in denied and "rule 2: <code>no-etc</code>" in denied
    assert "— treated as matching: a deny rule whose condition cannot be evaluated denies" in denied
    host = factories.virtual_host_factory(tenant=world["tenant"], mounts={"new": factories.backend_factory(
        tenant=world["tenant"], name="new")})
    response = client.get(f"/console/t/{slug}/access/{host.pk}/", {
        "sim-caller": "key", "sim-key": world["agent"].pk, "sim-tool": "echo", "sim-arguments": "{}"})
    body = response.content.decode()
    assert 'id="decision">allow' in body and 'id="tools-note"' in body
    assert "not checked: the tools of MCP backend &#x27;new&#x27; (mount &#x27;new&#x27;) are not known" in body
