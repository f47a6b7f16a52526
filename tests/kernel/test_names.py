import random

import pytest

from apps.kernel.names import Naming, uri_prefix

GATEWAYS = Naming.build(["gateway", "gateway-one"], {})
AB = Naming.build(["a", "a-b"], {})


# --- tools: the splitter -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("naming", "exposed", "target"),
    [
        (GATEWAYS, "gateway-one-increment", ("gateway-one", "increment")),
        (GATEWAYS, "gateway-increment", ("gateway", "increment")),
        (GATEWAYS, "gateway-oneincrement", None),  # longest key `gateway-one`, no `-` after it
        (GATEWAYS, "gateway-one", None),
        (GATEWAYS, "gateway-one-", None),
        (GATEWAYS, "gateway-", None),
        (GATEWAYS, "gatewayincrement", None),
        (GATEWAYS, "increment", None),
        (GATEWAYS, "Gateway-increment", None),  # map keys are case-sensitive in names
        (GATEWAYS, "gateway-a b", None),  # not a valid tool name
        (GATEWAYS, "gateway-" + "x" * 121, None),  # 128 characters at most
        (GATEWAYS, "gateway-" + "x" * 120, ("gateway", "x" * 120)),
        (Naming.build(["gateway-one", "other"], {}), "gateway-oneincrement", None),
        (AB, "a-b-x", ("a-b", "x")),
        (AB, "a-x", ("a", "x")),
        (AB, "a-bx", None),
        (AB, "a-c-b-x", ("a", "c-b-x")),
        (Naming.build(["a-b", "z"], {}), "a-x", None),  # `a` itself is not mounted
        (AB, "a-b-c-d", ("a-b", "c-d")),
        (AB, "b-x", None),
        (Naming.build(["a.b", "a"], {}), "a.b-x", ("a.b", "x")),
        (Naming.build(["1db", "my_db"], {}), "1db-q", ("1db", "q")),
        (Naming.build(["1db", "my_db"], {}), "my_db-q", ("my_db", "q")),
    ],
)
def test_multi_backend_tool_names_split_on_the_longest_map_key(
    naming: Naming, exposed: str, target: tuple[str, str] | None
) -> None:
    assert naming.route_tool(exposed) == target
    if target is not None:
        assert naming.expose_tool(*target) == exposed


def test_the_shadowed_name_of_a_shorter_key_is_not_advertised() -> None:
    # `a` + `b-x` and `a-b` + `x` would both be `a-b-x`; the splitter says `a-b`, so only that one is shown.
    assert AB.expose_tool("a-b", "x") == "a-b-x"
    assert AB.expose_tool("a", "b-x") is None
    # `a-bx` and `a-b` start with the longer key `a-b`, which `-` does not follow: rejected, so not shown.
    assert AB.expose_tool("a", "bx") is None
    assert AB.expose_tool("a", "b") is None
    assert AB.expose_tool("a", "c-b") == "a-c-b"
    shown, dropped = AB.expose_tools("a", [{"name": "b-x"}, {"name": "y"}, {"name": "bx"}])
    assert shown == [{"name": "a-y"}]
    assert [(d.kind, d.map_key, d.name) for d in dropped] == [("tool", "a", "b-x"), ("tool", "a", "bx")]
    assert "routes to map key 'a-b'" in dropped[0].reason and "does not route" in dropped[1].reason
    # Without `a-b` mounted the same tool is fine: the rule depends on configuration only.
    assert Naming.build(["a", "c"], {}).expose_tool("a", "b-x") == "a-b-x"


def test_every_listed_name_routes_back_to_its_tool() -> None:
    rng = random.Random(4)
    keys = ["a", "a-b", "a-b-c", "gateway", "gateway-one", "g.w", "1x", "x_1", "Mixed"]
    naming = Naming.build(keys, {"Alias.One": ("a", "t-1"), "alias_two": ("a-b", "c-t")})
    alphabet = "ab-c_.x1"
    for _ in range(3000):
        key = rng.choice(keys)
        name = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))
        for exposed in naming.tool_names(key, name):
            assert naming.route_tool(exposed) == (key, name)
        exposed_prompt = naming.expose_prompt(key, name)
        if exposed_prompt is not None:
            assert naming.route_prompt(exposed_prompt) == (key, name)


def _reference_split(text: str, prefixes: dict[str, str]) -> tuple[str, str] | None:
    """Rule 3 read literally and slowly: the longest prefix the text starts with, then `-` and a non-empty rest."""
    starts = [prefix for prefix in prefixes if text.startswith(prefix)]
    if not starts:
        return None
    longest = max(starts, key=len)
    rest = text[len(longest) + 1 :]
    return (prefixes[longest], rest) if text[len(longest) : len(longest) + 1] == "-" and rest else None


def test_the_fast_splitter_agrees_with_the_rule_read_literally() -> None:
    rng = random.Random(3986)
    keys = ["a", "a-b", "a-b-c", "ab", "b-a", "gateway", "gateway-one", "1x", "x_1", "x_1-y", "Q", "q-Q"]
    naming = Naming.build(keys, {"a-b-c-z": ("a", "x")})
    lowered = [key.lower() for key in keys]
    uri_prefixes = {uri_prefix(key, lowered.count(key.lower()) > 1).lower(): key for key in keys}
    for _ in range(20000):
        start = rng.choice([*keys, "", "A", "gateway-o"])  # mostly a key, then anything (often `-`)
        text = start + "".join(rng.choice("ab--cgq1x_Q") for _ in range(rng.randint(0, 6)))
        expected = _reference_split(text, {key: key for key in keys})
        assert naming.route_prompt(text) == expected, text
        if text == "a-b-c-z":
            assert naming.route_tool(text) == ("a", "x")  # the alias
        else:
            assert naming.route_tool(text) == (None if expected == ("a", "x") else expected), text
        uri = f"{text}:{text}"
        routed = _reference_split(uri.lower(), uri_prefixes)
        if routed is not None:  # the reference split a lower-cased copy: take the rest from the original
            rest = uri[len(uri) - len(routed[1]) :]
            routed = (routed[0], rest) if rest.find(":") > 0 else None
        assert naming.route_uri(uri) == routed, uri


def test_naming_a_whole_backend_at_once_agrees_with_naming_each_tool() -> None:
    from apps.kernel.curation import Curation, ToolRuleSpec

    rng = random.Random(7)
    names = ["x", "b-x", "b", "bx", "t", "a-b-x", "", "bad name", "z" * 130, "c-t", "Find", "x.y", "q"]
    for _ in range(300):
        keys = rng.sample(["a", "a-b", "a-b-c", "ab", "b-a", "Q", "q-Q", "1x", "x_1"], rng.randint(1, 5))
        aliases = {rng.choice(["a-b-x", "Find", "a-t", "b-a-q", "x", "alias"]): (rng.choice(keys), rng.choice(names))
                   for _ in range(rng.randint(0, 3))}
        rules = [ToolRuleSpec(rng.choice(["include", "exclude"]), match := rng.choice(["name", "glob", "tag"]),
                              rng.choice(["T", "U"] if match == "tag" else ["x", "b*", "*-x", "a-*", "t"]),
                              rng.choice(["", *keys]))
                 for _ in range(rng.randint(0, 2))]
        tags = {key: {name: [rng.choice(["T", "U"])] for name in rng.sample(names, 4)} for key in keys}
        curation = Curation.build(rules, map_keys=keys, tags=tags,
                                  descriptions={(keys[0], "t"): "d"} if rng.random() < 0.3 else None)
        naming = Naming.build(keys, aliases, curation)
        for key in [*keys, "unmounted"]:
            assert naming.tool_names_all(key, names) == [naming.tool_names(key, n) for n in names], (keys, aliases, rules, key)


# --- tools: aliases ------------------------------------------------------------------------------

ALIASED = Naming.build(
    ["gateway", "gateway-one"],
    {
        "Increment.Now": ("gateway-one", "increment"),
        "get_Thing": ("gateway", "fetch"),
        "fetch2": ("gateway", "fetch"),
        "gateway-echo": ("gateway-one", "say"),  # looks prefixed, is an alias
        "ghost": ("unmounted", "x"),
    },
)


@pytest.mark.parametrize(
    ("exposed", "target"),
    [
        ("Increment.Now", ("gateway-one", "increment")),
        ("increment.now", None),  # exactly as written
        ("gateway-one-increment", None),  # an aliased tool answers to its alias only
        ("get_Thing", ("gateway", "fetch")),
        ("fetch2", ("gateway", "fetch")),
        ("gateway-fetch", None),
        ("gateway-echo", ("gateway-one", "say")),
        ("gateway-one-say", None),
        ("ghost", None),  # alias to a map key that is not mounted
    ],
)
def test_aliases_win_and_are_routed_exactly_as_written(exposed: str, target: tuple[str, str] | None) -> None:
    assert ALIASED.route_tool(exposed) == target


def test_an_aliased_tool_is_listed_under_its_aliases_only() -> None:
    assert ALIASED.expose_tool("gateway-one", "increment") == "Increment.Now"
    assert ALIASED.tool_names("gateway", "fetch") == ("fetch2", "get_Thing")
    tool = {"name": "fetch", "inputSchema": {"type": "object"}}
    shown, dropped = ALIASED.expose_tools("gateway", [tool, {"name": "echo"}])
    assert shown == [{**tool, "name": "fetch2"}, {**tool, "name": "get_Thing"}]
    # `gateway-echo` is an alias of another tool, so the default name of `gateway`'s `echo` is taken.
    assert [d.name for d in dropped] == ["echo"] and "alias" in dropped[0].reason
    assert tool == {"name": "fetch", "inputSchema": {"type": "object"}}  # inputs are not mutated


# --- single-backend hosts ------------------------------------------------------------------------

SINGLE = Naming.build(["only"], {"Pretty.Name": ("only", "ugly_name"), "other": ("only", "z")})


def test_single_backend_hosts_pass_identifiers_through() -> None:
    assert SINGLE.route_tool("increment") == ("only", "increment")
    assert SINGLE.expose_tool("only", "increment") == "increment"
    assert SINGLE.expose_tool("only", "odd/name with space") == "odd/name with space"  # the upstream's own name
    assert SINGLE.route_prompt("only-x") == ("only", "only-x")
    assert SINGLE.expose_prompt("only", "p") == "p"
    assert SINGLE.expose_resource_name("only", "r") == "r"
    for uri in ("file:///x", "users://7/profile", "relative/path", "1weird:thing"):
        assert SINGLE.expose_uri("only", uri) == uri
        assert SINGLE.route_uri(uri) == ("only", uri)
    assert SINGLE.expose_uri_template("only", "{+url}") == "{+url}"
    tools = [{"name": "a"}]
    assert SINGLE.expose_tools("only", tools)[0][0] is tools[0]  # unchanged items are shared, not copied


def test_single_backend_hosts_still_apply_aliases() -> None:
    assert SINGLE.route_tool("Pretty.Name") == ("only", "ugly_name")
    assert SINGLE.route_tool("ugly_name") is None
    assert SINGLE.expose_tool("only", "ugly_name") == "Pretty.Name"
    assert SINGLE.route_tool("other") == ("only", "z")
    assert SINGLE.expose_tool("only", "other") is None  # its name is another tool's alias


def test_unmounted_map_keys_and_empty_hosts_expose_nothing() -> None:
    assert GATEWAYS.expose_tool("nope", "x") is None
    assert GATEWAYS.expose_prompt("nope", "x") is None
    assert GATEWAYS.expose_uri("nope", "file:///x") is None
    assert SINGLE.expose_uri("nope", "file:///x") is None
    empty = Naming.build([], {})
    assert empty.route_tool("x") is None and empty.route_uri("file:///x") is None


# --- tool name grammar ---------------------------------------------------------------------------


def test_prefixed_tool_names_must_be_valid_mcp_tool_names() -> None:
    shown, dropped = GATEWAYS.expose_tools(
        "gateway", [{"name": "ok.name_1"}, {"name": "has/slash"}, {"name": "sp ace"}, {"name": "x" * 121}, {}]
    )
    assert [t["name"] for t in shown] == ["gateway-ok.name_1"]
    assert [d.name for d in dropped] == ["has/slash", "sp ace", "x" * 121, "None"]
    assert all("valid MCP tool name" in d.reason for d in dropped[:3]) and dropped[3].reason == "no name"


# --- prompts and resource names ------------------------------------------------------------------


def test_prompts_follow_the_tool_rule_without_aliases_or_grammar() -> None:
    assert GATEWAYS.expose_prompt("gateway-one", "summarize") == "gateway-one-summarize"
    assert GATEWAYS.route_prompt("gateway-one-summarize") == ("gateway-one", "summarize")
    assert GATEWAYS.expose_prompt("gateway", "one-summarize") is None  # shadowed by `gateway-one`
    assert GATEWAYS.expose_prompt("gateway", "with space") == "gateway-with space"
    assert ALIASED.route_prompt("Increment.Now") is None  # tool aliases are for tools
    shown, dropped = GATEWAYS.expose_prompts("gateway", [{"name": "p", "arguments": []}, {"name": "one-p"}])
    assert shown == [{"name": "gateway-p", "arguments": []}]
    assert [d.kind for d in dropped] == ["prompt"]


def test_resource_names_are_labels_and_always_prefixed() -> None:
    assert GATEWAYS.expose_resource_name("gateway", "one-thing") == "gateway-one-thing"


# --- URIs and templates --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "key", "uri", "exposed"),
    [
        (["demo", "other"], "demo", "file:///x", "demo-file:///x"),
        (["demo", "other"], "demo", "users://7/profile", "demo-users://7/profile"),
        (["demo", "other"], "demo", "https://example.com/a?b=c#d", "demo-https://example.com/a?b=c#d"),
        (["demo", "other"], "demo", "svn+ssh://h/r", "demo-svn+ssh://h/r"),
        (["demo", "other"], "demo", "urn:isbn:0451450523", "demo-urn:isbn:0451450523"),
        (["demo", "other"], "demo", "memo:insights", "demo-memo:insights"),
        (["demo", "other"], "demo", "FILE:///X", "demo-FILE:///X"),
        (["gateway", "gateway-one"], "gateway-one", "file:///x", "gateway-one-file:///x"),
        (["gateway", "gateway-one"], "gateway", "file:///x", "gateway-file:///x"),
        (["gateway", "gateway-one"], "gateway", "one-file:///x", None),  # shadowed by `gateway-one`
        (["a", "a-b"], "a", "b-file:///x", None),
        (["a", "a-b"], "a", "bfile:///x", None),  # scheme `a-bfile` starts with `a-b`, no `-` after it
        (["a", "a-b"], "a", "cb-file:///x", "a-cb-file:///x"),
        (["a", "A-B"], "a", "b-file:///x", None),  # prefixes match ignoring case in schemes
        (["Demo", "other"], "Demo", "file:///x", "Demo-file:///x"),  # unique ignoring case: verbatim
        (["g.w", "other"], "g.w", "file:///x", "g.w-file:///x"),
        (["1db", "other"], "1db", "file:///x", "x+1db-file:///x"),  # a scheme starts with a letter
        (["my_db", "other"], "my_db", "file:///x", "x+my++db-file:///x"),  # `_` is no scheme character
        (["Demo", "demo"], "Demo", "file:///x", "x++demo-file:///x"),  # schemes ignore case
        (["Demo", "demo"], "demo", "file:///x", "x+demo-file:///x"),
        (["My_DB", "x"], "My_DB", "file:///x", "x++my+++d+b-file:///x"),
        (["demo", "other"], "demo", "/relative/path", None),  # not an absolute URI
        (["demo", "other"], "demo", "no-scheme", None),
        (["demo", "other"], "demo", "1bad:x", None),
        (["demo", "other"], "demo", "", None),
    ],
)
def test_multi_backend_uris_get_the_map_key_in_front_of_the_scheme(
    keys: list[str], key: str, uri: str, exposed: str | None
) -> None:
    naming = Naming.build(keys, {})
    assert naming.expose_uri(key, uri) == exposed
    if exposed is not None:
        assert naming.route_uri(exposed) == (key, uri)


@pytest.mark.parametrize(
    ("exposed", "target"),
    [
        ("DEMO-file:///x", ("demo", "file:///x")),  # SDKs may lower- or upper-case the scheme
        ("demo-File:///x", ("demo", "File:///x")),
        ("demo-file", None),  # no scheme
        ("demo-:x", None),
        ("demofile:///x", None),
        ("other-file:///x", ("other", "file:///x")),
        ("third-file:///x", None),
        ("file:///demo-x", None),  # the prefix is only ever in the scheme
        ("X+1DB-file:///x", ("1db", "file:///x")),
        ("demo-x:y", None),  # with `demo-x` mounted below
        ("demo-xy:z", None),
        ("demo-x-y:z", ("demo-x", "y:z")),
        ("DEMO-X-y:z", ("demo-x", "y:z")),
    ],
)
def test_uri_routing(exposed: str, target: tuple[str, str] | None) -> None:
    assert Naming.build(["demo", "demo-x", "other", "1db"], {}).route_uri(exposed) == target


def test_uri_prefixes_are_injective() -> None:
    keys = ["a", "A", "a_b", "a-b", "A_B", "1a", "a1", "a.b", "x", "x1a", "x-1a", "ab", "aB"]
    naming = Naming.build(keys, {})
    assert len({p.lower() for p in naming.uri_prefixes.values()}) == len(keys)
    assert uri_prefix("gateway-one") == "gateway-one"
    for key in keys:
        assert naming.route_uri(naming.expose_uri(key, "s:x") or "") == (key, "s:x")


def _expand(template: str, values: dict[str, str]) -> str:
    """Enough RFC 6570 for the tests: `{var}` and `{+var}`."""
    for name, value in values.items():
        template = template.replace("{" + name + "}", value).replace("{+" + name + "}", value)
    return template


TEMPLATES = ["file:///{path}", "file:///{+path}", "users://{id}/profile", "db:{table}/{id}", "x-y.z+w://{a}{?q}"]


@pytest.mark.parametrize("template", TEMPLATES)
def test_templates_expand_to_exposed_uris_that_route_back(template: str) -> None:
    naming = Naming.build(["gateway", "gateway-one", "1db", "my_db", "a", "a-b"], {})
    values = {"path": "etc/hosts", "id": "42", "table": "users", "a": "b:c", "q": ""}
    for key in naming.keys:
        exposed = naming.expose_uri_template(key, template)
        assert exposed is not None and exposed.endswith(template)
        assert naming.route_uri(exposed) == (key, template)  # completion refs name templates
        assert naming.route_uri(_expand(exposed, values)) == (key, _expand(template, values))


@pytest.mark.parametrize("template", ["{+url}", "{scheme}://x", "file{ext}://x", "/{path}"])
def test_templates_without_a_literal_scheme_are_not_exposed(template: str) -> None:
    assert GATEWAYS.expose_uri_template("gateway", template) is None


def test_uris_round_trip_for_generated_cases() -> None:
    rng = random.Random(6570)
    keys = ["a", "a-b", "a-b-c", "gateway", "gateway-one", "g.w", "1x", "x_1", "Mixed", "mixed", "Solo"]
    naming = Naming.build(keys, {})
    scheme_chars = "ab-c+.1"
    rest_chars = "/:?#{}ab-_.%20@!$&'()*+,;="
    exposed_seen: dict[str, tuple[str, str]] = {}
    for _ in range(5000):
        key = rng.choice(keys)
        scheme = rng.choice("abcz") + "".join(rng.choice(scheme_chars) for _ in range(rng.randint(0, 5)))
        uri = f"{scheme}:{''.join(rng.choice(rest_chars) for _ in range(rng.randint(0, 12)))}"
        exposed = naming.expose_uri(key, uri)
        if exposed is None:
            continue
        assert naming.route_uri(exposed) == (key, uri)
        colon = exposed.index(":")
        shouted = naming.route_uri(exposed[:colon].upper() + exposed[colon:])  # schemes ignore case
        assert shouted == (key, uri[: uri.index(":")].upper() + uri[uri.index(":") :])
        assert exposed_seen.setdefault(exposed, (key, uri)) == (key, uri)  # no two items share a URI
    assert len(exposed_seen) > 2000


def test_list_rewriting_for_resources_and_templates() -> None:
    resources = [
        {"uri": "file:///x", "name": "x", "mimeType": "text/plain"},
        {"uri": "one-file:///y", "name": "y"},
        {"uri": "relative", "name": "z"},
    ]
    shown, dropped = GATEWAYS.expose_resources("gateway", resources)
    assert shown == [{"uri": "gateway-file:///x", "name": "gateway-x", "mimeType": "text/plain"}]
    assert [(d.kind, d.name) for d in dropped] == [("resource", "one-file:///y"), ("resource", "relative")]
    assert "routes to map key 'gateway-one'" in dropped[0].reason and "absolute URI" in dropped[1].reason
    assert resources[0] == {"uri": "file:///x", "name": "x", "mimeType": "text/plain"}
    shown, dropped = GATEWAYS.expose_resource_templates(
        "gateway-one", [{"uriTemplate": "users://{id}", "name": "user"}, {"uriTemplate": "{+u}", "name": "any"}]
    )
    assert shown == [{"uriTemplate": "gateway-one-users://{id}", "name": "gateway-one-user"}]
    assert [(d.kind, d.name) for d in dropped] == [("resource template", "{+u}")]


# --- routed requests, completion refs, notifications ---------------------------------------------


@pytest.mark.parametrize(
    ("method", "params", "routed"),
    [
        ("tools/call", {"name": "gateway-one-decrement", "arguments": {"n": 1}},
         ("gateway-one", {"name": "decrement", "arguments": {"n": 1}})),
        ("tools/call", {"name": "gateway-one-increment"}, None),  # aliased
        ("tools/call", {"name": "Increment.Now"}, ("gateway-one", {"name": "increment"})),
        ("tools/call", {"name": "gateway-oneincrement"}, None),
        ("tools/call", {"name": "nowhere"}, None),
        ("tools/call", {"name": 7}, None),
        ("tools/call", {}, None),
        ("prompts/get", {"name": "gateway-p", "arguments": {}}, ("gateway", {"name": "p", "arguments": {}})),
        ("resources/read", {"uri": "gateway-one-file:///x"}, ("gateway-one", {"uri": "file:///x"})),
        ("resources/subscribe", {"uri": "gateway-file:///x"}, ("gateway", {"uri": "file:///x"})),
        ("resources/unsubscribe", {"uri": "gateway-file:///x"}, ("gateway", {"uri": "file:///x"})),
        ("resources/read", {"uri": "file:///x"}, None),
        ("completion/complete",
         {"ref": {"type": "ref/prompt", "name": "gateway-one-p"}, "argument": {"name": "a", "value": "b"}},
         ("gateway-one", {"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": "b"}})),
        ("completion/complete", {"ref": {"type": "ref/resource", "uri": "gateway-users://{id}"}},
         ("gateway", {"ref": {"type": "ref/resource", "uri": "users://{id}"}})),
        ("completion/complete", {"ref": {"type": "ref/tool", "name": "gateway-x"}}, None),
        ("completion/complete", {"ref": {"type": "ref/prompt"}}, None),
        ("completion/complete", {"ref": "gateway-p"}, None),
        ("tools/list", {}, None),
    ],
)
def test_routed_requests_get_upstream_params(
    method: str, params: dict[str, object], routed: tuple[str, dict[str, object]] | None
) -> None:
    snapshot = repr(params)
    assert ALIASED.route_request(method, params) == routed
    assert repr(params) == snapshot


def test_single_backend_requests_pass_through() -> None:
    assert SINGLE.route_request("resources/read", {"uri": "file:///x"}) == ("only", {"uri": "file:///x"})
    assert SINGLE.route_ref({"type": "ref/prompt", "name": "p"}) == ("only", {"type": "ref/prompt", "name": "p"})


def test_resource_update_notifications_carry_the_exposed_uri() -> None:
    params = {"uri": "file:///x"}
    assert GATEWAYS.expose_notification("gateway", "notifications/resources/updated", params) == {
        "uri": "gateway-file:///x"
    }
    assert params == {"uri": "file:///x"}
    assert GATEWAYS.expose_notification("gateway", "notifications/resources/updated", {"uri": "one-a:b"}) is None
    assert GATEWAYS.expose_notification("gateway", "notifications/resources/updated", {}) is None
    other = {"progressToken": 1}
    assert GATEWAYS.expose_notification("gateway", "notifications/progress", other) is other
    assert SINGLE.expose_notification("only", "notifications/resources/updated", params) is params


# --- MCP Apps: a tool's UI resource -------------------------------------------------------------


def test_a_tools_apps_ui_is_named_as_the_host_shows_resources_and_routes_back() -> None:
    naming = Naming.build(["charts", "demo"], {})
    tool = {"name": "show", "_meta": {"ui": {"resourceUri": "ui://charts/main", "visibility": ["app"]},
                                      "ui/resourceUri": "ui://charts/main", "openai/outputTemplate": "ui://charts/w",
                                      "other": 1}}
    (shown,), dropped = naming.expose_tools("charts", [tool])
    assert dropped == [] and shown["name"] == "charts-show"
    assert shown["_meta"] == {"ui": {"resourceUri": "charts-ui://charts/main", "visibility": ["app"]},
                              "ui/resourceUri": "charts-ui://charts/main", "openai/outputTemplate": "charts-ui://charts/w",
                              "other": 1}
    assert naming.route_uri(shown["_meta"]["ui"]["resourceUri"]) == ("charts", "ui://charts/main")
    assert tool["_meta"]["ui"]["resourceUri"] == "ui://charts/main"  # the input is not changed


def test_an_apps_ui_without_an_exposed_form_is_left_out_and_one_host_passes_it_through() -> None:
    naming = Naming.build(["charts", "demo"], {})
    tool = {"name": "show", "_meta": {"ui": {"resourceUri": "no-scheme", "visibility": ["app"]}, "ui/resourceUri": "x",
                                      "openai/outputTemplate": "y"}}
    (shown,), _ = naming.expose_tools("charts", [tool])
    assert shown["_meta"] == {"ui": {"visibility": ["app"]}}
    single = Naming.build(["charts"], {})
    plain = {"name": "show", "_meta": {"ui": {"resourceUri": "ui://charts/main"}}}
    assert single.expose_tools("charts", [plain])[0][0] is plain
    untouched = {"name": "show", "_meta": {"other": 1}}
    assert naming.expose_tools("charts", [untouched])[0][0]["_meta"] is untouched["_meta"]
