"""Generated request builders against the generic one: same request, or the same error first (DB-free)."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from apps.catalog.openapi import ArgumentError, Credential, InvokeError, build_request, compile_spec
from apps.catalog.openapi.codegen import generate_source
from apps.catalog.openapi.invoke import build_request_reference, has_builder, plan_for, prepare_builder
from apps.catalog.openapi.model import ArgumentBinding, CompiledTool, ToolBinding

CATALOG = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "catalog" / "openapi"


class Unserialisable:
    pass


class Text(str):
    pass


VALUES: list[Any] = [
    None, "", ".", "..", "abc", "v0", "a b/c?d#e&f=g+h;i,j", "héllo wörld", "x\r\ny", "nul\x00", "tab\there",
    "lone \ud800", "%41", "{x}", "a" * 200, Text("sub class"), 0, -7, 2**70, True, False, 1.5, math.inf,
    [], ["a", "b c"], ["alpha", "beta", "v0"], [1, True, None, "x", 2.5], [["n", 1]], ["x\ny"], [""],
    ("t", "u"), ["lone \ud800"], {}, {"a": "b", "c": 1}, {"k": {"n": [1, 2]}, "z": "q r"}, {1: "int key"},
    {"a": None, "b": True}, {"é": "ü"}, {"bad": Unserialisable()}, Unserialisable(),
]
CREDENTIALS = [
    None,
    Credential("bearer", "tok"),
    Credential("basic", "p@ss", username="alice"),
    Credential("api_key_header", "k", name="X-Api-Key"),
    Credential("api_key_header", "k", name="authorization"),
    Credential("api_key_query", "k v", name="key"),
    Credential("api_key_query", "k", name="a"),
    Credential("api_key_cookie", "c", name="sid"),
    Credential("api_key_cookie", "c", name="a"),
]
BASE_URLS = [None, None, "http://localhost:8080/", "https://b.example"]


def _outcome(call: Any) -> tuple[str, Any]:
    try:
        return "request", call()
    except (ArgumentError, InvokeError) as exc:
        return type(exc).__name__, exc.message
    except Exception as exc:  # noqa: BLE001 - e.g. UnicodeEncodeError of a text body: the same in both builders
        return type(exc).__name__, str(exc)


def _random_arguments(rng: random.Random, tool: CompiledTool) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    for binding in tool.binding.arguments:
        if rng.random() < 0.75:
            arguments[binding.argument] = rng.choice(VALUES)
    if rng.random() < 0.05:
        arguments["not_an_argument"] = 1
    return arguments


def _assert_same(tool: CompiledTool, arguments: dict[str, Any], base_url: str | None,
                 credential: Credential | None) -> None:
    options = {"base_url": base_url, "credential": credential, "boundary": "BOUNDARY"}
    generated = _outcome(partial(build_request, tool, arguments, **options))
    reference = _outcome(partial(build_request_reference, tool, arguments, **options))
    assert generated == reference, (tool.name, arguments, generated, reference)


def _check_tools(tools: tuple[CompiledTool, ...], rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    for tool in tools:
        prepare_builder(tool)
        assert not isinstance(plan_for(tool).build, partial)  # compiled tools get a generated builder
        for _ in range(rounds):
            _assert_same(tool, _random_arguments(rng, tool), rng.choice(BASE_URLS), rng.choice(CREDENTIALS))
        # Every argument valid-looking, and every argument absent (the required ones go missing).
        _assert_same(tool, {b.argument: "v0" for b in tool.binding.arguments}, None, None)
        _assert_same(tool, {}, "https://b.example", None)


@pytest.mark.parametrize(("folder", "name", "rounds"), [
    ("aws", "ec2.json", 4),
    ("restbench", "spotify.json", 30),
    ("restbench", "tmdb.json", 30),
    ("alibaba", "alibaba-ecs.json", 4),
])
def test_generated_builders_match_the_generic_one_on_real_specs(folder, name, rounds):
    result = compile_spec((CATALOG / folder / name).read_bytes())
    assert result.ok and result.tools
    _check_tools(result.tools, rounds, seed=len(name))


def _binding(argument: str, location: str, name: str | None, required: bool = False, style: str | None = None,
             explode: bool | None = None, allow_reserved: bool = False,
             content_type: str | None = None) -> ArgumentBinding:
    return ArgumentBinding(argument, location, name, required, style, explode, allow_reserved,  # type: ignore[arg-type]
                           content_type)


def _every_style_tool(body_mode: str, body_content_type: str | None, body_required: bool) -> CompiledTool:
    args = [
        _binding("p_simple", "path", "p_simple", True, "simple", False),
        _binding("p_simple_x", "path", "p_simple_x", True, "simple", True),
        _binding("p_label", "path", "p_label", False, "label", True),
        _binding("p_matrix", "path", "p_matrix", False, "matrix", False),
        _binding("p_content", "path", "p_content", False, content_type="application/json"),
        _binding("p_nowhere", "path", "p_nowhere", False, "simple", False),  # no placeholder for it
    ]
    for style in ("form", "spaceDelimited", "pipeDelimited", "tabDelimited", "deepObject", None):
        for explode in (True, False):
            args.append(_binding(f"q_{style}_{explode}", "query", f"q {style}[{explode}]", False, style, explode))
    args += [
        _binding("q_reserved", "query", "r:/?", False, "form", True, allow_reserved=True),
        _binding("q_reserved_flat", "query", "rf", False, "form", False, allow_reserved=True),
        _binding("q_json", "query", "qj", False, content_type="application/json"),
        _binding("q_text", "query", "qt", False, content_type="text/plain"),
        _binding("q_required", "query", "a", True, "form", True),
        _binding("h_simple", "header", "X-Simple", False, "simple", False),
        _binding("h_explode", "header", "X-Explode", False, "simple", True),
        _binding("h_json", "header", "X-Json", False, content_type="application/json"),
        _binding("h_auth", "header", "Authorization", False, "simple", False),
        _binding("c_form", "cookie", "a", False, "form", True),
        _binding("c_flat", "cookie", "c flat", False, "form", False),
        _binding("c_json", "cookie", "cj", False, content_type="application/json"),
    ]
    if body_mode == "whole":
        args.append(_binding("body", "body", None, body_required))
    elif body_mode == "properties":
        args += [_binding("b_one", "body", "one", body_required), _binding("b_two", "body", "two", False)]
    binding = ToolBinding("POST", "/s/{p_simple}/{p_simple_x}{p_label}{p_matrix}/{p_content}/{unfilled}",
                          ("https://api.example/v1",), tuple(args), body_mode, body_content_type,  # type: ignore[arg-type]
                          body_required)
    return CompiledTool("every_style", "", {}, None, {}, binding)


BODIES = [("none", None, False), ("properties", "application/json", True), ("properties", None, False),
          ("properties", "application/x-www-form-urlencoded", False), ("properties", "multipart/form-data", True),
          ("whole", "application/vnd.api+json", True), ("whole", "text/plain", False), ("whole", "*/*", False),
          ("whole", "multipart/form-data", False), ("whole", "application/x-www-form-urlencoded", False)]


@pytest.mark.parametrize(("body_mode", "content_type", "required"), BODIES)
def test_generated_builders_match_on_every_style_and_body(body_mode, content_type, required):
    _check_tools((_every_style_tool(body_mode, content_type, required),), rounds=400, seed=7)


def test_names_are_literals_not_code():
    nasty = ["a'b", 'c"d', "e\\f", "g\nh", "i'''j", "k{l}m", "p\x00q", "é€𝄞", "__import__('os')"]
    args = [_binding(f"arg{i}", "query", name, False, "deepObject" if i % 2 else "form", True)
            for i, name in enumerate(nasty)]
    # (A query parameter named with a lone surrogate fails when the plan is made, in both builders alike.)
    args += [_binding(f"h{i}", "header", name, False, "simple", False)
             for i, name in enumerate([*nasty, "n\ud800o"])]
    args.append(_binding("p'\"", "path", "p'\"", True, "simple", False))
    binding = ToolBinding("GET", "/x'''{p'\"}\"\"\"{", ("https://h.example/'\\",), tuple(args))
    tool = CompiledTool("nasty", "", {}, None, {}, binding)
    source, _ = generate_source(plan_for(tool), binding.arguments)
    compile(source, "<test>", "exec")
    _check_tools((tool,), rounds=200, seed=3)
    request = build_request(tool, {"p'\"": "v", "arg0": "1", "h4": "x"})
    assert request.url == "https://h.example/'\\/x'''v\"\"\"{?a%27b=1"
    assert request.headers == (("i'''j", "x"),)


def test_error_precedence_is_the_generic_one():
    tool = _every_style_tool("properties", "application/json", True)
    # A bad header value comes before an unknown argument, which comes before missing ones.
    bad = {"h_simple": "x\ny", "zzz": 1, "p_content": Unserialisable()}
    assert _outcome(partial(build_request, tool, bad)) == (
        "ArgumentError", "value cannot be serialised as JSON: Type is not JSON serializable: Unserialisable")
    assert _outcome(partial(build_request, tool, {"h_simple": "x\ny", "zzz": 1}))[1] == (
        "header 'X-Simple' must not contain CR, LF or NUL characters")
    assert _outcome(partial(build_request, tool, {"zzz": 1}))[1] == "unknown argument: zzz"
    assert _outcome(partial(build_request, tool, {"b_one": None}))[1] == (
        "missing required arguments: p_simple, p_simple_x, q_required, b_one")
    for arguments in (bad, {"h_simple": "x\ny", "zzz": 1}, {"zzz": 1}, {"b_one": None}):
        _assert_same(tool, arguments, None, None)


class ReadOnly(Mapping):
    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def test_other_mappings_and_duplicate_names_take_the_generic_walk():
    tool = _every_style_tool("none", None, False)
    arguments = {"p_simple": "a", "p_simple_x": ["b", "c"], "q_required": 1, "q_form_True": {"k": "v"}}
    assert build_request(tool, ReadOnly(arguments)) == build_request(tool, arguments)
    twice = ToolBinding("GET", "/x", ("https://h",), (_binding("a", "query", "a"), _binding("a", "header", "A")))
    duplicated = CompiledTool("dup", "", {}, None, {}, twice)
    prepare_builder(duplicated)
    assert isinstance(plan_for(duplicated).build, partial)
    assert _outcome(partial(build_request, duplicated, {"a": "1"})) == ("ArgumentError", "unknown argument: ")


def test_memo_misses_and_long_values_match():
    # Values the percent-encoding memo has not seen (or never keeps: longer than 128 characters) take the
    # serialisers' path inside the generated builder; the result must not depend on the memo.
    tool = _every_style_tool("none", None, False)
    rng = random.Random(11)
    for n in range(300):
        fresh = [f"fresh {n} {rng.random()}", "y" * (129 + n), f"é{n}"]
        arguments = {"p_simple": fresh[0], "p_simple_x": fresh[1], "q_required": fresh,
                     "q_form_False": fresh, "q_pipeDelimited_False": fresh, "q_deepObject_True": {fresh[2]: fresh[0]},
                     "c_form": fresh, "c_flat": fresh}
        _assert_same(tool, arguments, None, rng.choice(CREDENTIALS))


def test_a_builder_is_generated_only_when_prepared():
    tool = _every_style_tool("none", None, False)
    arguments = {"p_simple": "a", "p_simple_x": ["b", "c"], "q_required": 1}
    generic = build_request(tool, arguments)
    assert not has_builder(tool) and isinstance(plan_for(tool).build, partial)
    prepare_builder(tool)
    assert has_builder(tool) and not isinstance(plan_for(tool).build, partial)
    assert build_request(tool, arguments) == generic


def test_a_failed_generation_settles_the_tool_on_the_generic_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    from apps.catalog.openapi import invoke

    calls: list[str] = []

    def broken(plan: Any, arguments: Any, name: str) -> Any:
        calls.append(name)
        raise RuntimeError("codegen bug")

    monkeypatch.setattr(invoke, "generate", broken)
    tool = _every_style_tool("none", None, False)
    arguments = {"p_simple": "a", "p_simple_x": ["b", "c"], "q_required": 1}
    expected = build_request_reference(tool, arguments)
    with pytest.raises(RuntimeError, match="codegen bug"):
        prepare_builder(tool)
    # Settled: not queued again on every call, and requests are still built (by the generic walk).
    assert has_builder(tool) and isinstance(plan_for(tool).build, partial)
    prepare_builder(tool)
    assert calls == ["every_style"]
    assert build_request(tool, arguments) == expected


def test_duplicate_names_settle_on_the_generic_walk() -> None:
    twice = ToolBinding("GET", "/x", ("https://h",), (_binding("a", "query", "a"), _binding("a", "header", "A")))
    duplicated = CompiledTool("dup", "", {}, None, {}, twice)
    prepare_builder(duplicated)
    assert has_builder(duplicated) and isinstance(plan_for(duplicated).build, partial)


def test_list_and_object_key_memos_tell_values_apart():
    # A list's query entry is memoised under its items joined by U+001F, with the item count; items that
    # hold U+001F themselves, a full memo and object keys (memoised as "name[key]=") must not mix up.
    tool = _every_style_tool("none", None, False)
    prepare_builder(tool)
    lists = [["a", "b"], ["a\x1fb"], ["a\x1f", "b"], ["a", "\x1fb"], ["a", "b", ""], ["", "a", "b"], [],
             [""], ["a\x1fb", "c"], ["a", "b\x1fc"], ["a", "b"], [Text("a"), "b"], ["a", 1], ["a\x1f"]]
    lists += [[f"item {n}", "x"] for n in range(300)]  # more than the memo keeps
    keys = ["k", "k\x1f", "k]", "k[", "é", "x" * 300, *[f"key {n}" for n in range(300)]]
    for n, items in enumerate(lists * 2):
        item = {keys[n % len(keys)]: items[0] if items else n, "k": n}
        arguments = {"p_simple": "a", "p_simple_x": "b", "q_required": items, "q_form_False": items,
                     "q_spaceDelimited_False": items, "q_deepObject_True": item, "q_reserved": items,
                     "q_reserved_flat": items, "h_simple": items[0] if items else n, "c_form": n}
        _assert_same(tool, arguments, None, None)


def test_null_and_unknown_arguments_with_a_matching_count():
    # The builder counts the arguments it saw given; a null one or an unknown one must still be told.
    tool = _every_style_tool("properties", "application/json", False)
    prepare_builder(tool)
    given = {"p_simple": "a", "p_simple_x": "b", "q_required": 1}
    for extra in ({"zzz": 1}, {"h_simple": None}, {"h_simple": None, "zzz": 1}, {"b_one": None},
                  {"b_one": None, "zzz": None}, {"q_form_True": None, "b_two": None}):
        _assert_same(tool, {**given, **extra}, None, None)
    assert _outcome(partial(build_request, tool, {**given, "h_simple": None, "zzz": 1}))[1] == "unknown argument: zzz"
