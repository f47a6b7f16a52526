"""Argument and structured-result validation (DB-free)."""

from __future__ import annotations

import math
import random
import time
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from apps.catalog.openapi import ArgumentError, check_structured, compile_spec, validate_arguments
from apps.catalog.openapi.checks import compile_node
from apps.catalog.openapi.model import ArgumentBinding, CompiledTool, ToolBinding
from apps.catalog.openapi.validation import KEPT_KEYWORDS, MAX_LISTED, _Sanitizer, arguments_validator, output_validator

from .helpers import oas3, run, tool

CATALOG = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "catalog" / "openapi"

FILTER = {"type": "object", "properties": {"Name": {"type": "string"}, "Values": {"type": "array",
                                                                                     "items": {"type": "string"}}},
          "required": ["Name"], "additionalProperties": False}


def _tool(properties: dict[str, Any], required: tuple[str, ...] = (), locations: dict[str, str] | None = None,
          output: dict[str, Any] | None = None, **root: Any) -> CompiledTool:
    locations = locations or {}
    bindings = tuple(ArgumentBinding(name, locations.get(name, "query"), name, name in required) for name in properties)
    schema = {"type": "object", "properties": properties, "required": list(required), **root}
    return CompiledTool("t", "", schema, output, {}, ToolBinding("GET", "/x", ("https://h",), bindings))


def _message(t: CompiledTool, arguments: Any) -> str:
    with pytest.raises(ArgumentError) as caught:
        validate_arguments(t, arguments)
    return caught.value.message


SAMPLE = _tool({"VpcId": {"type": "string"}, "Count": {"type": "integer", "minimum": 1},
                "Mode": {"type": "string", "enum": ["a", "b"]}, "Filter": {"type": "array", "items": FILTER},
                "Tag": {"type": ["string", "null"]}, "Body": {"type": "string"}},
               required=("VpcId",), locations={"Body": "body"})


# --------------------------------------------------------------------------- arguments


def test_valid_arguments_pass():
    validate_arguments(SAMPLE, {"VpcId": "vpc-1", "Count": 2, "Mode": "a", "Filter": [{"Name": "n", "Values": ["v"]}]})
    validate_arguments(SAMPLE, {"VpcId": "vpc-1", "Count": 2.0})  # 2.0 is an integer in JSON Schema


@pytest.mark.parametrize(("arguments", "expected"), [
    ({"VpcId": 5}, "arguments.VpcId: 5 is not of type 'string'"),
    ({"VpcId": "v", "Count": True}, "arguments.Count: True is not of type 'integer'"),
    ({"VpcId": "v", "Count": 0}, "arguments.Count: 0 is less than the minimum of 1"),
    ({"VpcId": "v", "Mode": "c"}, "arguments.Mode: 'c' is not one of ['a', 'b']"),
    ({"VpcId": "v", "Filter": [{"Name": 5}]}, "arguments.Filter[0].Name: 5 is not of type 'string'"),
    ({"VpcId": "v", "Filter": [{"Values": []}]}, "arguments.Filter[0]: 'Name' is a required property"),
    ({"VpcId": "v", "Filter": [{"Name": "n", "Values": ["x", 1]}]}, "arguments.Filter[0].Values[1]: 1 is not of type"),
    ({"VpcId": "v", "Filter": [{"Name": "n", "Foo": 1}]},
     "arguments.Filter[0]: Additional properties are not allowed ('Foo' was unexpected)"),
    ({}, "missing required argument: VpcId"),
    ({"VpcId": "v", "Foo": 1}, "unknown argument: Foo"),
    ({"VpcId": "v", "Cont": 1}, "unknown argument: Cont (did you mean 'Count'?)"),
    ({"VpcId": "v", "a b": 1}, 'unknown argument: "a b"'),
])
def test_single_problem_messages(arguments, expected):
    message = _message(SAMPLE, arguments)
    assert message.startswith("Invalid arguments for tool 't': ") and "\n" not in message
    assert expected in message


def test_several_problems_are_listed_one_per_line_and_capped():
    message = _message(SAMPLE, {"Count": "x", "Foo": 1, "Filter": [{"Name": i} for i in range(20)]})
    lines = message.splitlines()
    assert lines[0] == "Invalid arguments for tool 't':"
    assert lines[1] == "- missing required argument: VpcId"
    assert lines[2] == "- unknown argument: Foo"
    assert lines[3] == "- arguments.Count: 'x' is not of type 'integer'"
    assert lines[4] == "- arguments.Filter[0].Name: 0 is not of type 'string'"
    assert len(lines) == 1 + MAX_LISTED + 1 and lines[-1] == "… and 13 more problems"


def test_counting_stops_early():
    message = _message(SAMPLE, {"VpcId": "v", "Filter": [{"Name": i} for i in range(500)]})
    assert message.splitlines()[-1] == "… and at least 90 more problems"


def test_null_handling_follows_build_request():
    # Optional non-body argument: null is "not given", even where the schema is not nullable.
    validate_arguments(SAMPLE, {"VpcId": "v", "Count": None, "Mode": None, "Filter": None})
    # Required argument: null counts as missing (build_request says the same).
    assert _message(SAMPLE, {"VpcId": None}).endswith("missing required argument: VpcId (null counts as absent)")
    # Optional body argument: null is sent as null, so the schema decides.
    assert "arguments.Body: None is not of type 'string'" in _message(SAMPLE, {"VpcId": "v", "Body": None})
    nullable = _tool({"Body": {"type": ["string", "null"]}}, locations={"Body": "body"})
    validate_arguments(nullable, {"Body": None})


def test_compiler_nullable_becomes_a_type_array():
    doc = oas3({"/x": {"post": {"operationId": "op", "requestBody": {"content": {"application/json": {"schema": {
        "type": "object", "properties": {"a": {"type": "string", "nullable": True}, "b": {"type": "string"}}}}}},
        "responses": {"200": {"description": "ok"}}}}})
    t = tool(run(doc), "op")
    assert t.input_schema["properties"]["a"]["type"] == ["string", "null"]
    validate_arguments(t, {"a": None, "b": "x"})
    assert "arguments.b: None is not of type 'string'" in _message(t, {"b": None})


def test_arguments_must_be_an_object():
    for bad in ([], "x", None, 3):
        assert _message(SAMPLE, bad) == "arguments must be an object"


def test_enum_and_type_edge_cases_agree_with_jsonschema():
    t = _tool({"e": {"enum": ["1", None]}, "n": {"type": "number", "maximum": 3}, "i": {"type": "integer"}},
              locations={"e": "body", "n": "body", "i": "body"})
    validate_arguments(t, {"e": None, "n": float("nan"), "i": 10**30})  # NaN passes bounds, as in jsonschema
    assert "arguments.e: 1 is not one of" in _message(t, {"e": 1})
    assert "arguments.n: True is not of type 'number'" in _message(t, {"n": True})
    assert "arguments.i: 1.5 is not of type 'integer'" in _message(t, {"i": 1.5})


def test_validators_are_cached_per_tool():
    first = arguments_validator(SAMPLE)
    assert arguments_validator(SAMPLE) is first
    other = _tool(dict(SAMPLE.input_schema["properties"]), required=("VpcId",))
    assert arguments_validator(other) is not first
    t = _tool({}, output={"type": "object"})
    assert output_validator(t) is output_validator(t) is not None


def test_invalid_schema_keywords_are_ignored_not_fatal():
    t = _tool({"limit": {"type": "integer", "maximum": "50", "pattern": "("}, "x": {"type": "string"}})
    assert sorted(arguments_validator(t).ignored) == [
        "/properties/limit/maximum: invalid value; ignored",
        "/properties/limit/pattern: not enforced: a spec's regular expression could backtrack catastrophically; "
        "the service checks it"]
    validate_arguments(t, {"limit": 500})
    assert "arguments.limit: 'x' is not of type 'integer'" in _message(t, {"limit": "x"})


@pytest.mark.parametrize("schema", [
    {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    {"type": "array", "prefixItems": [{"type": "string"}], "items": False},
    {"type": "array", "uniqueItems": True},
    {"not": {"type": "string"}},
    {"type": "number", "multipleOf": 0.5},
    {"const": [1, True]},
])
def test_other_keywords_are_delegated_to_jsonschema(schema):
    node = compile_node(_Sanitizer().clean(schema, ""), {})
    reference = Draft202012Validator(schema)
    for value in ("a", 1, 1.5, 2, True, None, [], ["a"], ["a", "b"], [1, 1], [1, True], {"x-a": "s"}, {"y": 1}):
        assert node.accept(value) == reference.is_valid(value), (schema, value)


# --------------------------------------------------------------------------- hostile input


def test_deep_nesting_is_bounded():
    deep: Any = "leaf"
    for _ in range(10_000):
        deep = [deep]
    any_value = _tool({"v": {}}, locations={"v": "body"})
    validate_arguments(any_value, {"v": deep})  # the schema does not descend: nothing to check
    typed = _tool({"v": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}})
    message = _message(typed, {"v": deep})
    assert message.startswith("Invalid arguments for tool 't': arguments.v")
    enum = _tool({"v": {"enum": [[["x"]], "y"]}})  # jsonschema compares enum members recursively
    assert "arguments.v" in _message(enum, {"v": deep})


def test_huge_array_is_bounded():
    t = _tool({"ids": {"type": "array", "items": {"type": "string"}}})
    ids = ["x"] * 1_000_000
    started = time.perf_counter()
    validate_arguments(t, {"ids": ids})
    ids[-1] = 5
    message = _message(t, {"ids": ids})
    assert time.perf_counter() - started < 5
    assert "arguments.ids[999999]: 5 is not of type 'string'" in message


def test_weird_values_never_crash():
    t = _tool({"n": {"type": "number", "multipleOf": 0.1}, "s": {"type": "string"}}, locations={"n": "body"})
    for value in (float("nan"), float("inf"), 10**5000, object(), (1, 2), {1, 2}, b"x"):
        try:
            validate_arguments(t, {"n": value, "s": value})
        except ArgumentError as exc:
            assert exc.message.startswith("Invalid arguments")
    validate_arguments(t, {"n": 0.5})
    assert "arguments.n: cannot be validated" in _message(t, {"n": math.nan})


# --------------------------------------------------------------------------- structured results

OUTPUT = {"type": "object", "properties": {"Items": {"type": "array", "items": {
    "type": "object", "properties": {"Id": {"type": "string"}, "Size": {"type": "integer"}}, "required": ["Id"]}}}}


def test_check_structured():
    t = _tool({}, output=OUTPUT)
    assert check_structured(t, {"Items": [{"Id": "a", "Size": 1}]}) is None
    assert check_structured(t, {"Items": [{"Id": 1}]}) == "structuredContent.Items[0].Id: 1 is not of type 'string'"
    problems = check_structured(t, {"Items": [{"Size": "x"} for _ in range(5)]})
    assert problems.count("; ") == 2 and problems.endswith("(and 7 more)")
    assert check_structured(_tool({}), {"anything": 1}) is None  # no output schema, nothing to check


def test_output_schema_is_only_given_to_object_responses():
    def op(schema):
        return {"get": {"operationId": "op", "responses": {"200": {"description": "ok", "content": {
            "application/json": {"schema": schema}}}}}}
    assert tool(run(oas3({"/x": op({"type": "array", "items": {}})})), "op").output_schema is None
    assert tool(run(oas3({"/x": op({"type": "string"})})), "op").output_schema is None
    t = tool(run(oas3({"/x": op({"type": "object", "properties": {"a": {"type": "integer"}}})})), "op")
    assert check_structured(t, {"a": 1}) is None
    # An object schema but an array came back: shape_result wraps it as {"result": [...]}; the check judges that.
    assert check_structured(t, {"result": [1]}) is None
    assert check_structured(t, {"a": "x"}) is not None


def test_huge_structured_content_is_bounded():
    t = _tool({}, output=OUTPUT)
    items = [{"Id": str(i), "Size": i} for i in range(200_000)]
    items[150_000]["Size"] = "big"
    started = time.perf_counter()
    assert check_structured(t, {"Items": items}) == "structuredContent.Items[150000].Size: 'big' is not of type 'integer'"
    assert time.perf_counter() - started < 5


# --------------------------------------------------------------------------- the real catalog


@cache
def _compiled(relative: str):
    return compile_spec((CATALOG / relative).read_bytes())


SPECS = ["aws/ec2.json", "restbench/spotify.json", "restbench/tmdb.json"]


@pytest.mark.parametrize("relative", SPECS)
def test_every_tool_gets_validators(relative):
    for t in _compiled(relative).tools:
        arguments_validator(t)
        output_validator(t)


@pytest.mark.parametrize("relative", ["restbench/spotify.json", "restbench/tmdb.json"])
def test_sanitised_schemas_are_metaschema_valid(relative):
    for t in _compiled(relative).tools:
        for schema in (t.input_schema, t.output_schema):
            if schema is not None:
                Draft202012Validator.check_schema(_Sanitizer().clean(schema, ""))


def test_sanitised_ec2_input_schemas_are_metaschema_valid():
    # Output schemas too in a manual sweep (30 s: the 2020-12 metaschema is slow on big inlined schemas).
    for t in _compiled("aws/ec2.json").tools:
        Draft202012Validator.check_schema(_Sanitizer().clean(t.input_schema, ""))


@pytest.mark.parametrize("relative", ["restbench/spotify.json", "restbench/tmdb.json"])
def test_compiled_schemas_are_metaschema_valid(relative):
    # MCP SDK clients run check_schema on each outputSchema and refuse the tool when it fails.
    for t in _compiled(relative).tools:
        for schema in (t.input_schema, t.output_schema):
            if schema is not None:
                Draft202012Validator.check_schema(schema)


def test_kept_keywords_cover_jsonschema():
    assert set(Draft202012Validator.VALIDATORS) - KEPT_KEYWORDS == {"$ref", "$dynamicRef", "format"}


_ODD = [None, True, 0, -1, 1.5, 2.0, 10**20, "", "x", "running", [], [1], ["a"], {}, {"a": 1}, float("nan")]


def _sample(schema: Any, rnd: random.Random, depth: int = 0) -> Any:
    """A value shaped like ``schema`` most of the time, with random wrong pieces."""
    if rnd.random() < 0.12 or not isinstance(schema, dict) or depth > 12:
        return rnd.choice(_ODD)
    for key in ("allOf", "anyOf", "oneOf"):
        if key in schema:
            return _sample(rnd.choice(schema[key]), rnd, depth + 1)
    if "enum" in schema and schema["enum"]:
        return rnd.choice(schema["enum"])
    kind = schema.get("type")
    kind = rnd.choice(kind) if isinstance(kind, list) else kind
    if kind == "object" or "properties" in schema:
        value = {name: _sample(sub, rnd, depth + 1) for name, sub in schema.get("properties", {}).items()
                 if rnd.random() < 0.5}
        if rnd.random() < 0.1:
            value["Extra"] = 1
        return value
    if kind == "array":
        return [_sample(schema.get("items", {}), rnd, depth + 1) for _ in range(rnd.randint(0, 3))]
    return {"string": lambda: rnd.choice(["", "ab", "x" * 300]), "integer": lambda: rnd.randint(-5, 500),
            "number": lambda: rnd.uniform(-5, 500), "boolean": lambda: rnd.random() < 0.5,
            "null": lambda: None}.get(kind, lambda: rnd.choice(_ODD))()


@pytest.mark.parametrize("relative", SPECS)
def test_fast_path_agrees_with_jsonschema(relative):
    """Differential check of the compiled closures against jsonschema on random, often-wrong values."""
    rnd = random.Random(relative)
    tools = _compiled(relative).tools
    accepted = rejected = 0
    for t in rnd.sample(tools, min(len(tools), 120)):
        nodes = [(s, compile_node(_Sanitizer().clean(s, ""), {})) for s in (t.input_schema, t.output_schema) if s]
        for schema, node in nodes:
            reference = Draft202012Validator(_Sanitizer().clean(schema, ""))
            for _ in range(15):
                value = _sample(schema, rnd)
                verdict = node.accept(value)
                assert verdict == reference.is_valid(value), (t.name, value)
                accepted, rejected = accepted + verdict, rejected + (not verdict)
    assert accepted > 100 and rejected > 100


def test_spec_regular_expressions_never_run_on_arguments():
    # `^(a+)+$` backtracks for minutes on "aaaa…!" in Python's re: the gateway must not run it.
    t = _tool({"name": {"type": "string", "pattern": "^(a+)+$"},
               "tags": {"type": "object", "patternProperties": {"^(a+)+$": {"type": "string"}},
                        "additionalProperties": False}})
    started = time.perf_counter()
    validate_arguments(t, {"name": "a" * 40 + "!", "tags": {"a" * 40 + "!": "x", "other": "y"}})
    assert time.perf_counter() - started < 1  # catastrophic backtracking would take minutes
    assert "arguments.name: 5 is not of type 'string'" in _message(t, {"name": 5})
