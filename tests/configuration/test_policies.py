"""The `policies` section: applied as written, idempotent, refused with a path, pruned, exported."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml

from apps.configuration.document import ConfigInvalid
from apps.configuration.reports import Action, ApplyReport
from apps.configuration.services import config_apply, config_export
from apps.policies.models import AccessPolicy
from tests.configuration.documents import README_EXAMPLE

pytestmark = pytest.mark.django_db

# Exactly the shape users are told to write; must apply as written.
POLICIES = """\
policies:
  - tenant: acme
    virtual_host: main
    default: deny                      # allow | deny
    rules:
      - id: sum-a1-only
        subject: {team: platform}      # or {key: agent} or {tenant: acme}
        effect: allow                  # allow | deny
        tools: ["get-sum", "echo*"]    # exposed or upstream names, globs allowed
        when: "arguments.a == 1"       # optional CEL
"""
DOCUMENT = README_EXAMPLE + POLICIES

# One rule per subject kind, written in an order no sorting would produce.
THREE_RULES = DOCUMENT + """\
      - id: no-echo-for-agent
        subject: {key: agent}
        effect: deny
        tools: ["echo"]
      - id: everyone-lists
        subject: {tenant: acme}
        effect: allow
        tools: ["list-*", "search"]
"""

TWO_HOSTS = README_EXAMPLE + """\
  - tenant: acme
    slug: other
    backends: {demo: demo}
""" + POLICIES + """\
  - tenant: acme
    virtual_host: other
    rules:
      - {id: agent-only, subject: {key: agent}, effect: allow, tools: ["*"]}
"""


def _stored(host: str = "main") -> tuple[str, list[tuple[Any, ...]]] | None:
    policy = AccessPolicy.objects.filter(virtual_host__tenant__slug="acme", virtual_host__slug=host).first()
    if policy is None:
        return None
    rules = policy.rules.order_by("position").values_list(
        "position", "rule_id", "subject_kind", "subject_name", "effect", "tools", "condition"
    )
    return policy.default_effect, list(rules)


def _actions(report: ApplyReport) -> dict[tuple[str, str], Action]:
    return {(c.kind, c.name): c.action for c in report.changes}


def test_the_documented_shape_applies_as_written() -> None:
    report = config_apply(document=DOCUMENT, prune=False)
    assert _stored() == (
        "deny", [(0, "sum-a1-only", "team", "platform", "allow", ["get-sum", "echo*"], "arguments.a == 1")]
    )
    assert _actions(report)[("policy", "acme/main")] is Action.CREATED


def test_rules_are_stored_in_the_order_written() -> None:
    config_apply(document=THREE_RULES, prune=False)
    assert _stored() == (
        "deny",
        [
            (0, "sum-a1-only", "team", "platform", "allow", ["get-sum", "echo*"], "arguments.a == 1"),
            (1, "no-echo-for-agent", "key", "agent", "deny", ["echo"], ""),
            (2, "everyone-lists", "tenant", "acme", "allow", ["list-*", "search"], ""),
        ],
    )


def test_default_and_rules_are_optional() -> None:
    config_apply(document=README_EXAMPLE + "policies:\n  - {tenant: acme, virtual_host: main}\n", prune=False)
    assert _stored() == ("allow", [])


def test_applying_again_changes_nothing(django_capture_on_commit_callbacks: Callable[..., Any]) -> None:
    config_apply(document=THREE_RULES, prune=False)
    with django_capture_on_commit_callbacks() as callbacks:
        report = config_apply(document=THREE_RULES, prune=True)
    assert not report.changed
    assert _actions(report)[("policy", "acme/main")] is Action.UNCHANGED
    assert callbacks == []  # no configuration version moves


@pytest.mark.parametrize(
    ("old", "new", "detail"),
    [
        ("default: deny ", "default: allow", "default"),
        ('"arguments.a == 1"', '"arguments.a == 2"', "rules"),
        ("tools: [\"list-*\", \"search\"]", "tools: [\"search\", \"list-*\"]", "rules"),
    ],
)
def test_a_changed_policy_is_replaced(
    old: str, new: str, detail: str, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    config_apply(document=THREE_RULES, prune=False)
    changed = THREE_RULES.replace(old, new)
    with django_capture_on_commit_callbacks() as callbacks:
        report = config_apply(document=changed, prune=False)
    (change,) = [c for c in report.changes if c.kind == "policy"]
    assert (change.action, change.detail) == (Action.UPDATED, detail)
    assert len(callbacks) == 1  # one configuration version bump, for the policy
    assert not config_apply(document=changed, prune=False).changed


def test_reordered_rules_are_an_update() -> None:
    config_apply(document=THREE_RULES, prune=False)
    head, first, second, third = THREE_RULES.split("      - id: ")
    config_apply(document="      - id: ".join([head, third, first, second]), prune=False)
    stored = _stored()
    assert stored is not None
    assert [rule[1] for rule in stored[1]] == ["everyone-lists", "sum-a1-only", "no-echo-for-agent"]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('"arguments.a == 1"', '"arguments.a =="',
         "policies[0].rules[0]: rule 'sum-a1-only': condition 'arguments.a ==' is not valid CEL"),
        ('"arguments.a == 1"', '"request.a == 1"',
         "policies[0].rules[0]: rule 'sum-a1-only': condition 'request.a == 1' reads request"),
        ("{team: platform}", "{team: ops}",
         "policies[0].rules[0].subject.team: unknown team 'ops' (add it to tenant 'acme''s teams)"),
        ("{team: platform}", "{key: robot}",
         "policies[0].rules[0].subject.key: unknown key 'robot' (add it to tenant 'acme''s keys)"),
        ("{team: platform}", "{team: platform, key: agent}",
         "policies[0].rules[0].subject: give exactly one of 'tenant', 'team' and 'key'"),
        ("{team: platform}", "{}", "policies[0].rules[0].subject: give exactly one of"),
        ("{team: platform}", "{group: platform}", "policies[0].rules[0].subject.group: unknown field"),
        ("{team: platform}", "{tenant: globex}",
         "policies[0].rules[0].subject.tenant: must be this policy's tenant 'acme', not 'globex'"),
        ('["get-sum", "echo*"]', "[]", "policies[0].rules[0]: rule 'sum-a1-only': tools must be a list of 1-200 tool names or globs"),
        ('["get-sum", "echo*"]', '["get-sum", ""]', "policies[0].rules[0]: rule 'sum-a1-only': tools must be a list of 1-200 tool names or globs; item 2 is empty"),
        ("effect: allow ", "effect: permit", "policies[0].rules[0].effect: must be one of: allow, deny"),
        ("effect: allow ", "effect: allow\n        priority: 1", "policies[0].rules[0].priority: unknown field"),
        ("        effect: allow ", "", "policies[0].rules[0].effect: is required"),
        ('"arguments.a == 1"', "1", "policies[0].rules[0].when: must be a string"),
        ("id: sum-a1-only", "id: 'sum a1'", "policies[0].rules[0]: rule 'sum a1': ids are 1-64 letters"),
        ("default: deny ", "default: maybe", "policies[0].default: must be one of: allow, deny"),
        ("default: deny ", "default: deny\n    owner: me", "policies[0].owner: unknown field"),
        ("virtual_host: main", "virtual_host: other",
         "policies[0].virtual_host: unknown virtual host 'other' (add it under virtual_hosts for tenant 'acme')"),
        ("  - tenant: acme\n    virtual_host", "  - tenant: globex\n    virtual_host",
         "policies[0].tenant: unknown tenant 'globex'"),
    ],
)
def test_a_bad_policy_is_refused_at_its_path_and_writes_nothing(old: str, new: str, expected: str) -> None:
    config_apply(document=THREE_RULES, prune=False)
    before = _stored()
    broken = THREE_RULES.replace(old, new, 1)
    assert broken != THREE_RULES
    with pytest.raises(ConfigInvalid) as excinfo:
        config_apply(document=broken.replace("name: Acme Corp", "name: Renamed"), prune=True)
    problems = [str(p) for p in excinfo.value.problems]
    assert len(problems) == 1 and problems[0].startswith(expected), problems
    assert _stored() == before
    assert not config_apply(document=THREE_RULES, prune=True).changed  # not even the tenant's name


def test_a_duplicate_rule_id_is_refused_at_the_second_rule() -> None:
    config_apply(document=THREE_RULES, prune=False)
    before = _stored()
    broken = THREE_RULES.replace("id: everyone-lists", "id: sum-a1-only")
    with pytest.raises(ConfigInvalid) as excinfo:
        config_apply(document=broken, prune=False)
    assert [str(p) for p in excinfo.value.problems] == ["policies[0].rules[2].id: duplicate rule id 'sum-a1-only'"]
    assert _stored() == before


def test_a_second_entry_for_the_same_host_is_refused() -> None:
    with pytest.raises(ConfigInvalid) as excinfo:
        config_apply(document=DOCUMENT + POLICIES.removeprefix("policies:\n"), prune=False)
    assert [str(p) for p in excinfo.value.problems] == [
        "policies[1].virtual_host: duplicate policy for virtual host 'main' in tenant 'acme'"
    ]
    assert AccessPolicy.objects.count() == 0


def test_without_prune_a_host_left_out_of_policies_keeps_its_policy() -> None:
    config_apply(document=TWO_HOSTS, prune=False)
    before = _stored("other")
    other_without_policy = "virtual_hosts:\n  - {tenant: acme, slug: other, backends: {demo: demo}}\n"
    report = config_apply(document=DOCUMENT.replace("virtual_hosts:\n", other_without_policy), prune=False)
    assert report.count(Action.DELETED) == 0
    assert before is not None and _stored("other") == before


def test_prune_removes_the_policy_of_a_host_left_out_of_policies() -> None:
    config_apply(document=TWO_HOSTS, prune=False)
    main = _stored("main")
    without_other = TWO_HOSTS.split("  - tenant: acme\n    virtual_host: other\n")[0]
    assert without_other != TWO_HOSTS
    report = config_apply(document=without_other, prune=True)
    deleted = {(c.kind, c.name) for c in report.changes if c.action is Action.DELETED}
    assert deleted == {("policy", "acme/other")}
    assert _stored("other") is None
    assert _stored("main") == main
    assert not config_apply(document=without_other, prune=True).changed


def test_export_then_apply_changes_nothing() -> None:
    with_condition = TWO_HOSTS.replace('tools: ["*"]', 'tools: ["*"], when: "principal.key == \'agent\'"')
    config_apply(document=with_condition, prune=False)
    exported = config_export()
    assert yaml.safe_load(exported)["policies"] == [
        {
            "tenant": "acme",
            "virtual_host": "main",
            "default": "deny",
            "rules": [
                {"id": "sum-a1-only", "subject": {"team": "platform"}, "effect": "allow",
                 "tools": ["get-sum", "echo*"], "when": "arguments.a == 1"},
            ],
        },
        {
            "tenant": "acme",
            "virtual_host": "other",
            "default": "allow",
            "rules": [
                {"id": "agent-only", "subject": {"key": "agent"}, "effect": "allow", "tools": ["*"],
                 "when": "principal.key == 'agent'"},
            ],
        },
    ]
    report = config_apply(document=exported, prune=True)
    assert not report.changed
    assert _actions(report)[("policy", "acme/other")] is Action.UNCHANGED
    assert config_export() == exported


def test_a_host_without_a_policy_exports_no_entry() -> None:
    config_apply(document=README_EXAMPLE, prune=False)
    assert yaml.safe_load(config_export())["policies"] == []
