"""Tool access control (`policy.py`): rules compiled once, calls decided with their arguments,
lists shown for what some arguments could let through."""

from __future__ import annotations

from typing import Any

import pytest

from apps.kernel.identity import Principal
from apps.kernel.policy import ConditionError, PolicyError, RuleSpec, patterns_unmatched, policy_check, policy_compile

AGENT = Principal(tenant_id=1, tenant_slug="acme", key_id=1, key_name="agent", team="platform")
OTHER = Principal(tenant_id=1, tenant_slug="acme", key_id=2, key_name="other", team=None)


def rule(rule_id: str, effect: str, tools: list[str], when: str = "", subject: tuple[str, str] = ("tenant", "acme")) -> RuleSpec:
    return RuleSpec(rule_id, subject[0], subject[1], effect, tools, when)


def test_an_argument_condition_decides_the_call_and_leaves_the_tool_listed() -> None:
    policy = policy_compile("deny", [rule("sum-a1-only", "allow", ["get-sum"], "arguments.a == 1", ("team", "platform"))])
    assert policy.visible(AGENT, "get-sum", "sum") is True
    allowed = policy.decide(AGENT, "get-sum", "sum", {"a": 1})
    denied = policy.decide(AGENT, "get-sum", "sum", {"a": 2})
    assert (allowed.allowed, allowed.rule) == (True, "sum-a1-only")
    assert (denied.allowed, denied.rule, denied.reason) == (False, None, "denied by default")
    assert policy.decide(AGENT, "get-sum", "sum", {}).allowed is False  # a missing argument does not hold
    assert policy.visible(OTHER, "get-sum", "sum") is False  # not on the team: nothing could allow it


@pytest.mark.parametrize("pattern", ["get-sum", "sum", "get-*", "s?m", "*"])
def test_a_pattern_matches_the_exposed_or_the_upstream_name(pattern: str) -> None:
    policy = policy_compile("allow", [rule("no-sum", "deny", [pattern])])
    assert policy.decide(AGENT, "get-sum", "sum", {}).rule == "no-sum"
    assert policy.visible(AGENT, "get-sum", "sum") is False


def test_patterns_are_case_sensitive_and_anchored() -> None:
    policy = policy_compile("allow", [rule("no-sum", "deny", ["sum"])])
    assert policy.decide(AGENT, "get-Sum", "Sum", {}).allowed is True
    assert policy.decide(AGENT, "sums", "sums", {}).allowed is True


def test_deny_overrides_allow_whatever_the_order() -> None:
    rules = [rule("all", "allow", ["*"]), rule("no-big", "deny", ["transfer"], "arguments.amount > 100")]
    policy = policy_compile("deny", rules)
    assert policy.decide(AGENT, "transfer", "transfer", {"amount": 500}).rule == "no-big"
    assert policy.decide(AGENT, "transfer", "transfer", {"amount": 5}).rule == "all"
    assert policy.visible(AGENT, "transfer", "transfer") is True  # a deny reading arguments never hides


def test_a_deny_on_the_principal_alone_hides_the_tool() -> None:
    policy = policy_compile("allow", [rule("no-team", "deny", ["admin*"], 'principal.team == ""')])
    assert policy.visible(OTHER, "admin-reset", "reset") is False
    assert policy.visible(AGENT, "admin-reset", "reset") is True
    assert policy.decide(OTHER, "admin-reset", "reset", {}).rule == "no-team"


@pytest.mark.parametrize(("subject", "sees"), [
    (("tenant", "acme"), {"agent", "other"}), (("team", "platform"), {"agent"}), (("key", "other"), {"other"}),
])
def test_subjects(subject: tuple[str, str], sees: set[str]) -> None:
    policy = policy_compile("deny", [rule("r", "allow", ["*"], subject=subject)])
    assert {p.key_name for p in (AGENT, OTHER) if policy.visible(p, "t", "t")} == sees


def test_a_condition_that_cannot_be_evaluated_does_not_hold() -> None:
    policy = policy_compile("deny", [rule("typed", "allow", ["t"], 'arguments.a + "x" == "1x"')])
    assert policy.decide(AGENT, "t", "t", {"a": 1}).allowed is False


@pytest.mark.parametrize(("default", "rules", "message"), [
    ("maybe", [], "default must be allow or deny"),
    ("deny", [rule("r", "allow", ["t"], "arguments.a ==")], "not valid CEL"),
    ("deny", [rule("r", "allow", ["t"], "request.size > 1")], "only arguments and principal"),
    ("deny", [rule("r", "allow", ["t"]), rule("r", "deny", ["u"])], "used twice"),
    ("deny", [rule("bad id", "allow", ["t"])], "ids are"),
    ("deny", [rule("r", "permit", ["t"])], "effect must be"),
    ("deny", [rule("r", "allow", [])], "tools must be a list of 1-200"),
    ("deny", [RuleSpec("r", "group", "x", "allow", ["t"])], "tenant, team or key"),
    ("deny", [rule("r", "allow", ["t"], "arguments.MaxResults + 1")],
     "rule 'r': condition 'arguments.MaxResults \\+ 1' gives an int, never true or false"),
    ("deny", [rule("r", "allow", ["t"], "frobnicate(arguments)")],
     "rule 'r': condition 'frobnicate\\(arguments\\)' calls frobnicate\\(\\), which CEL conditions do not have"),
    ("deny", [rule("r", "allow", ["Describe["])],
     "rule 'r': the glob 'Describe\\[' opens a character class with '\\[' that is never closed"),
    ("deny", [rule("r", "allow", ["ok", "a[!b"])], "the glob 'a\\[!b' opens a character class"),
])
def test_bad_rules_are_refused_with_the_reason(default: str, rules: list[Any], message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        policy_check(default, rules)


def test_a_policy_past_the_limits_for_writing_is_refused_written_but_compiled_stored() -> None:
    # A limit added later must not turn a stored policy into "deny everything": it still compiles.
    too_big = [
        [rule("long", "deny", ["t" * 129])],
        [rule("many", "deny", [f"t{i}" for i in range(201)])],
        [rule("spaced", "deny", [" t"])],
        [rule("cond", "deny", ["t"], "true || " * 300 + "true")],
        [rule(f"r{i}", "deny", ["x"]) for i in range(501)],
    ]
    for rules in too_big:
        with pytest.raises(PolicyError):
            policy_check("allow", rules)
        assert policy_compile("allow", rules).rules[0].id == rules[0].id


def test_a_deny_condition_that_cannot_be_evaluated_denies() -> None:
    policy = policy_compile("allow", [rule("no-etc", "deny", ["read"], 'arguments.path.startsWith("/etc")')])
    assert policy.decide(AGENT, "read", "read", {"path": "/etc/passwd"}).rule == "no-etc"
    assert policy.decide(AGENT, "read", "read", {"path": "/home/x"}).allowed is True
    for hostile in ({"path": ["/etc/passwd"]}, {"path": 5}, {}):
        assert policy.decide(AGENT, "read", "read", hostile).rule == "no-etc"  # fail closed
    assert policy.visible(AGENT, "read", "read") is True  # it reads arguments: never hides


def test_glob_classes_work_and_brackets_are_patterns() -> None:
    policy = policy_compile("allow", [rule("r", "deny", ["a[bc]"])])
    assert policy.decide(AGENT, "ab", "ab", {}).rule == "r"
    assert policy.decide(AGENT, "a[bc]", "a[bc]", {}).allowed is True


@pytest.mark.parametrize("pattern", ["a[bc]", "a[!b]c", "a[]]", "[[]x", "a[!]]"])
def test_a_closed_class_is_a_glob_that_can_be_written(pattern: str) -> None:
    assert policy_check("deny", [rule("r", "allow", [pattern])]).rules[0].patterns == (pattern,)


def test_a_condition_that_gives_no_bool_counts_against_the_caller() -> None:
    # `arguments.flag` is accepted when written (only the call knows what it holds): a call that
    # gives it no bool cannot let an allow rule through, nor dodge a deny rule.
    allow = policy_check("deny", [rule("flagged", "allow", ["t"], "arguments.flag")])
    deny = policy_check("allow", [rule("stop", "deny", ["t"], "arguments.flag")])
    assert [allow.decide(AGENT, "t", "t", {"flag": flag}).allowed for flag in (True, False, 1, "yes")] == [
        True, False, False, False]
    assert [deny.decide(AGENT, "t", "t", {"flag": flag}).allowed for flag in (True, False, 1, "yes")] == [
        False, True, False, False]


def test_deciding_says_which_conditions_could_not_be_evaluated_and_how_they_counted() -> None:
    policy = policy_compile("deny", [
        rule("small", "allow", ["t"], "arguments.amount < 10"),
        rule("no-etc", "deny", ["t"], 'arguments.path.startsWith("/etc")'),
        rule("flag", "allow", ["t"], "arguments.flag"),
    ])
    errors: list[ConditionError] = []
    decision = policy.decide(AGENT, "t", "t", {"flag": 3}, errors)
    assert (decision.allowed, decision.rule) == (False, "no-etc")
    assert [(e.rule, e.message, e.treated) for e in errors] == [
        ("small", "no such key 'amount'", "treated as not matching"),
        ("no-etc", "no such key 'path'", "treated as matching: a deny rule whose condition cannot be evaluated denies"),
    ]  # deciding stops at the deny: the third rule's condition is not evaluated
    errors.clear()
    decision = policy.decide(AGENT, "t", "t", {"amount": 1, "path": "/home", "flag": 3}, errors)
    assert decision.rule == "small" and [(e.rule, e.message) for e in errors] == [
        ("flag", "it gave 3, not true or false")]
    assert policy.decide(AGENT, "t", "t", {"amount": 1, "path": "/home", "flag": True}).rule == "small"


def test_a_stored_condition_the_check_refuses_now_still_compiles() -> None:
    # Written before the check existed: the snapshot compiles it, and a call it cannot judge
    # counts against the caller, rather than the whole policy denying everything.
    stored = [rule("old", "allow", ["t"], "arguments.a + 1"), rule("macro", "allow", ["u"], "[1].all(x, x > 0)")]
    with pytest.raises(PolicyError):
        policy_check("deny", stored)
    policy = policy_compile("deny", stored)
    assert policy.decide(AGENT, "t", "t", {"a": 1}).allowed is False
    assert policy.decide(AGENT, "u", "u", {}).rule == "macro"


def test_the_patterns_that_name_no_tool_are_found() -> None:
    tools = [("get-sum", "sum"), ("calc-mul", "mul")]
    assert patterns_unmatched(["sum", "calc-*", "get-s?m", "div", "x*", "[gc]et-sum"], tools) == ("div", "x*")
    assert patterns_unmatched(["*"], []) == ("*",)
