"""A host's tool curation (apps/kernel/curation.py) and how the naming contract applies it: pure, no services."""

from __future__ import annotations

import pytest

from apps.kernel.curation import Curation, ToolRuleSpec, description_check, tool_rule_check
from apps.kernel.globs import glob_problem
from apps.kernel.names import Naming


def rule(action: str, match: str, pattern: str, map_key: str = "") -> ToolRuleSpec:
    return ToolRuleSpec(action, match, pattern, map_key)


def test_nothing_curated_builds_nothing() -> None:
    assert Curation.build([], map_keys=["a"]) is None
    # A rule of a map key that is not mounted curates nothing either.
    assert Curation.build([rule("exclude", "name", "x", "gone")], map_keys=["a"]) is None


def test_excludes_hide_and_win_over_includes() -> None:
    curation = Curation.build([
        rule("include", "glob", "Describe*"),
        rule("exclude", "name", "DescribeSecrets"),
    ], map_keys=["ec2"])
    assert curation is not None
    assert curation.shows("ec2", "DescribeVpcs")
    assert not curation.shows("ec2", "DescribeSecrets")  # included by the glob, excluded by name: hidden
    assert not curation.shows("ec2", "TerminateInstances")  # no include rule matches it


def test_include_rules_apply_per_map_key() -> None:
    curation = Curation.build([rule("include", "name", "echo", "a")], map_keys=["a", "b"])
    assert curation is not None
    assert curation.shows("a", "echo") and not curation.shows("a", "add")
    assert curation.shows("b", "add")  # no include rule applies to b: all of its tools are served


def test_names_and_globs_match_the_default_exposed_name_too() -> None:
    curation = Curation.build([rule("exclude", "glob", "s3-Delete*")], map_keys=["s3", "ec2"])
    assert curation is not None
    assert not curation.shows("s3", "DeleteBucket") and curation.shows("ec2", "DeleteVpc")
    single = Curation.build([rule("exclude", "glob", "s3-Delete*")], map_keys=["s3"])
    assert single is not None and single.shows("s3", "DeleteBucket")  # one backend: names are not prefixed


def test_globs_are_case_sensitive_whole_name_with_classes() -> None:
    curation = Curation.build([rule("exclude", "glob", "[DT]*Instance?")], map_keys=["k"])
    assert curation is not None
    assert not curation.shows("k", "TerminateInstances") and not curation.shows("k", "DescribeInstances")
    assert curation.shows("k", "describeInstances") and curation.shows("k", "RunInstances")
    assert curation.shows("k", "TerminateInstancesNow")  # whole name


def test_tags_select_the_tools_that_carry_them() -> None:
    tags = {"api": {"ListPets": ["pets", "read"], "DeletePet": ["pets", "admin"], "Health": []}}
    curation = Curation.build([rule("include", "tag", "pets"), rule("exclude", "tag", "admin")], map_keys=["api"],
                              tags=tags)
    assert curation is not None
    assert curation.shows("api", "ListPets")
    assert not curation.shows("api", "DeletePet") and not curation.shows("api", "Health")
    assert curation.hidden_by("api", "DeletePet") == rule("exclude", "tag", "admin")
    assert curation.hidden_by("api", "Health") is None  # only the include rules leave it out


def test_descriptions_override_without_hiding() -> None:
    curation = Curation.build([], map_keys=["a"], descriptions={("a", "echo"): "Say it back.", ("gone", "x"): "y"})
    assert curation is not None and not curation.filters
    assert curation.description("a", "echo") == "Say it back." and curation.description("a", "add") is None
    assert curation.shows("a", "anything")


@pytest.mark.parametrize(("pattern", "bad"), [
    ("Describe[", True), ("Describe[!", True), ("[]", True), ("a[]]", False), ("[!]]x", False),
    ("Describe*", False), ("a[bc]d[ef]", False), ("a[bc]d[", True),
])
def test_glob_problems(pattern: str, bad: bool) -> None:
    assert (glob_problem(pattern) is not None) is bad


def test_rule_check_names_each_problem() -> None:
    assert tool_rule_check(rule("include", "glob", "Describe*", "ec2"), map_keys={"ec2"}) == []
    problems = {p.field: p.message for p in tool_rule_check(ToolRuleSpec("drop", "regex", " x", "s3"), map_keys={"ec2"})}
    assert set(problems) == {"action", "match", "pattern", "map_key"}
    assert "not mounted" in problems["map_key"]
    assert tool_rule_check(rule("exclude", "glob", "Describe["), map_keys=set())[0].field == "pattern"
    assert tool_rule_check(rule("exclude", "name", ""), map_keys=set())[0].field == "pattern"
    assert description_check("   ") and description_check("x" * 10_001) and not description_check("Fine.")


def test_the_naming_contract_hides_what_the_curation_hides() -> None:
    curation = Curation.build([rule("exclude", "name", "add")], map_keys=["a", "b"],
                              descriptions={("a", "echo"): "Mine."})
    naming = Naming.build(["a", "b"], {"plus": ("a", "add"), "say": ("b", "echo")}, curation)
    # The hidden tool routes under no name: not its default, not its alias.
    assert naming.route_tool("a-add") is None and naming.route_tool("plus") is None
    assert naming.route_tool("b-add") is None  # the rule has no map key: it hides add of every backend
    assert naming.route_tool("a-echo") == ("a", "echo") and naming.route_tool("say") == ("b", "echo")
    shown, dropped = naming.expose_tools("a", [{"name": "add", "description": "x"}, {"name": "echo", "description": "x"}])
    assert shown == [{"name": "a-echo", "description": "Mine."}]
    assert dropped == []  # left out on purpose is not "dropped"
    assert naming.tool_names("a", "add") == ()


def test_a_curated_single_backend_host_is_composed() -> None:
    plain = Naming.build(["only"], {})
    assert not plain.composed
    curated = Naming.build(["only"], {}, Curation.build([rule("exclude", "name", "add")], map_keys=["only"]))
    assert curated.composed
    assert curated.route_tool("add") is None and curated.route_tool("echo") == ("only", "echo")


def test_an_alias_of_a_hidden_tool_never_falls_through_to_another_tool() -> None:
    # Single backend: the alias `search` would otherwise pass through as the backend's own `search`.
    single = Naming.build(["k"], {"search": ("k", "search_v2")},
                          Curation.build([rule("exclude", "name", "search_v2")], map_keys=["k"]))
    assert single.route_tool("search") is None and single.route_tool("search_v2") is None
    assert single.route_tool("other") == ("k", "other")
    # Several backends: the alias `b-y` would otherwise split into b's tool `y`.
    multi = Naming.build(["a", "b"], {"b-y": ("a", "x")}, Curation.build([rule("exclude", "name", "x", "a")],
                                                                         map_keys=["a", "b"]))
    assert multi.route_tool("b-y") is None and multi.route_tool("b-z") == ("b", "z")
    assert multi.tool_names("b", "y") == ()  # and b's `y` is not listed under the alias's name either


def test_a_default_name_taken_by_an_alias_of_a_hidden_tool_says_so() -> None:
    # The alias x-echo names y's add, which the host hides: x's echo stays unlisted (the alias never
    # falls through), and the reason is the same whether or not y's tool is hidden.
    aliases = {"x-echo": ("y", "add")}
    for rules in ([], [ToolRuleSpec("exclude", "name", "add", "y")]):
        naming = Naming.build(["x", "y"], aliases, Curation.build(rules, map_keys=["x", "y"]))
        shown, dropped = naming.expose_tools("x", [{"name": "echo"}])
        assert shown == [] and [d.reason for d in dropped] == ["'x-echo' is an alias of another tool"]
