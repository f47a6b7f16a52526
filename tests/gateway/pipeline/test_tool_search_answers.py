"""`search_answers` (pure): what a tool_search answer holds, and how it fits its byte budget while the
tools in it stay callable — on EC2's real schemas, compiled here, and on hand-made ones."""

from __future__ import annotations

import random
from functools import cache
from pathlib import Path
from typing import Any

import orjson
import pytest
from jsonschema import Draft202012Validator

from apps.catalog.openapi import ArgumentError, CompiledTool, compile_spec, validate_arguments
from apps.gateway.pipeline.tool_search_answers import (
    ANSWER_BUDGET,
    ExpandUnknown,
    Shortened,
    answer_build,
    answer_bytes,
    answer_result,
)
from apps.kernel.search_tool import Found, IdNeed

CATALOG = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "catalog" / "openapi"
Key = tuple[int, str]


@cache
def ec2() -> tuple[dict[Key, dict[str, Any]], dict[str, CompiledTool]]:
    """EC2's 765 tools as tools/list shows them (as `ToolSet.of` builds the entries), and compiled."""
    compiled = compile_spec((CATALOG / "aws" / "ec2.json").read_bytes()).tools
    shown: dict[Key, dict[str, Any]] = {}
    for tool in compiled:
        entry: dict[str, Any] = {"name": tool.name, "description": tool.description, "inputSchema": tool.input_schema}
        if tool.output_schema is not None:
            entry["outputSchema"] = tool.output_schema
        if tool.annotations:
            entry["annotations"] = tool.annotations
        shown[(1, tool.name)] = entry
    return shown, {tool.name: tool for tool in compiled}


def largest(count: int) -> list[Key]:
    shown, _ = ec2()
    return sorted(shown, key=lambda key: (-len(orjson.dumps(shown[key])), key))[:count]


def wire(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value))


def minimal(schema: Any) -> Any:
    """The smallest value an agent would build from `schema`: required members only, first enum values."""
    if not isinstance(schema, dict):
        return {}
    for key in ("allOf", "anyOf", "oneOf"):
        if schema.get(key):
            return minimal(schema[key][0]) if key != "allOf" else _merged([minimal(s) for s in schema[key]])
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    kind = next((k for k in kind if k != "null"), "null") if isinstance(kind, list) else kind
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        return {name: minimal(properties.get(name, {})) for name in schema.get("required", [])}
    if kind == "array":
        return [minimal(schema.get("items", {})) for _ in range(schema.get("minItems", 0))]
    if kind in ("integer", "number"):
        return max(schema.get("minimum", 1), 1) if "maximum" not in schema else schema.get("minimum", schema["maximum"])
    if kind == "boolean":
        return True
    if kind == "string":
        return "x" * max(1, schema.get("minLength", 1))
    return "x"


def _merged(values: list[Any]) -> Any:
    objects = [v for v in values if isinstance(v, dict)]
    return {k: v for o in objects for k, v in o.items()} if len(objects) == len(values) else values[0]


def richer(schema: Any, rnd: random.Random, depth: int = 0) -> Any:
    """A value with optional members too, often valid for `schema` (callers check)."""
    if not isinstance(schema, dict) or depth > 6:
        return minimal(schema)
    kind = schema.get("type")
    if (kind == "object" or "properties" in schema) and not schema.get("enum"):
        value = minimal(schema)
        for name, sub in schema.get("properties", {}).items():
            if name in value or rnd.random() < 0.5:
                value[name] = richer(sub, rnd, depth + 1)
        return value
    if kind == "array" and isinstance(schema.get("items"), dict):
        return [richer(schema["items"], rnd, depth + 1) for _ in range(max(schema.get("minItems", 0), 1))]
    return minimal(schema)


def accepted_by_gateway(tool: CompiledTool, arguments: Any) -> bool:
    try:
        validate_arguments(tool, arguments)
    except ArgumentError:
        return False
    return True


@pytest.mark.parametrize("hits", [
    pytest.param(lambda: largest(15), id="the 15 largest tools"),
    pytest.param(lambda: largest(765)[::51], id="15 of every size"),
])
def test_an_answer_over_ec2_sized_schemas_fits_the_budget(hits: Any) -> None:
    shown, _ = ec2()
    keys = hits()
    assert len(keys) == 15
    prerequisites = {key: tuple(largest(25)[15:25]) for key in keys[:3]}  # ten more big tools, in brief
    found = Found(keys, prerequisites)
    result = answer_result(answer_build(found, shown))
    assert answer_bytes(result) <= ANSWER_BUDGET
    assert answer_bytes(answer_result(answer_build(found, shown, budget=1 << 40))) > 10 * ANSWER_BUDGET
    received = wire(result)
    assert [t["name"] for t in received["structuredContent"]["tools"]] == [name for _, name in keys]
    assert len(received["structuredContent"]["prerequisites"]) == 10
    assert orjson.loads(received["content"][0]["text"]) == received["structuredContent"]
    assert answer_bytes(result) == len(orjson.dumps(received))


@pytest.mark.parametrize("budget", [0, ANSWER_BUDGET, 8 * ANSWER_BUDGET])
def test_shortened_hits_stay_callable_as_listed(budget: int) -> None:
    """Every EC2 tool, shortened as far as each budget takes it among fourteen others: its schema is
    valid, the call an agent builds from it is one the gateway accepts, and every call the full schema
    accepts it accepts too."""
    shown, compiled = ec2()
    keys = sorted(shown)
    rnd = random.Random(budget)
    shortened = rich = 0
    for start in range(0, len(keys), 15):
        answer = answer_build(Found(keys[start:start + 15], {}), shown, budget=budget)
        for listed in answer["tools"]:
            tool = compiled[listed["name"]]
            schema = listed["inputSchema"]
            Draft202012Validator.check_schema(schema)
            shortened += listed["_meta"].get("gateway/shortened", False)
            assert accepted_by_gateway(tool, minimal(schema)), listed["name"]
            full = Draft202012Validator(tool.input_schema)
            compact = Draft202012Validator(schema)
            for call in (minimal(tool.input_schema), *(richer(tool.input_schema, rnd) for _ in range(3))):
                if full.is_valid(call):
                    rich += len(call) > len(tool.input_schema.get("required", ()))
                    assert compact.is_valid(call), (listed["name"], call)
    assert shortened > (700 if budget == 0 else 100)
    assert rich > 500  # the richer calls mostly hold optional members, and are valid


def test_references_branches_and_closed_objects_are_relaxed_never_tightened() -> None:
    schema = {
        "type": "object",
        "$defs": {"Tag": {"type": "object", "properties": {"Key": {"type": "string"}, "Value": {"type": "string"}},
                          "required": ["Key"], "additionalProperties": False},
                  "Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
        "properties": {
            "Tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}, "description": "The tags. Many."},
            "Target": {"oneOf": [{"type": "object", "properties": {"Id": {"type": "string"}}, "required": ["Id"]},
                                 {"type": "object", "properties": {"Arn": {"type": "string"}}, "required": ["Arn"]},
                                 # Matches neither call below, until its optional members are left out.
                                 {"type": "object", "properties": {"Id": {"type": "integer"},
                                                                   "Arn": {"type": "integer"}}}]},
            "Mode": {"type": "string", "enum": ["fast", "slow"]},
            "Size": {"type": "integer", "not": {"const": 3}},
            "Chain": {"$ref": "#/$defs/Node"},
            "Remote": {"$ref": "https://example.com/schema.json"},
        },
        "required": ["Tags", "Target", "Mode"],
        "additionalProperties": False,
    }
    shown = {(1, "Tagged"): {"name": "Tagged", "description": "Tags a thing. " * 40, "inputSchema": schema}}
    listed = answer_build(Found([(1, "Tagged")], {}), shown, budget=0)["tools"][0]
    compact = listed["inputSchema"]
    Draft202012Validator.check_schema(compact)
    assert "$ref" not in orjson.dumps(compact).decode()
    assert compact["required"] == ["Tags", "Target", "Mode"]
    assert compact["properties"]["Mode"]["enum"] == ["fast", "slow"]
    assert compact["properties"]["Tags"]["items"]["required"] == ["Key"]  # the reference read in place
    assert listed["description"] == " ".join(["Tags a thing."] * 11)  # the sentences that fit in 160 characters
    full, relaxed = Draft202012Validator(schema), Draft202012Validator(compact)
    calls = [
        {"Tags": [{"Key": "a"}], "Target": {"Id": "i-1"}, "Mode": "fast"},
        {"Tags": [{"Key": "a", "Value": "b"}], "Target": {"Arn": "arn:x"}, "Mode": "slow", "Size": 4,
         "Chain": {"next": {"next": {}}}},
    ]
    for call in calls:
        assert full.is_valid(call) and relaxed.is_valid(call)
    assert relaxed.is_valid({**calls[0], "Remote": 1})  # a reference it cannot read accepts anything
    assert not relaxed.is_valid({"Tags": [{"Value": "b"}], "Target": {"Id": "i-1"}, "Mode": "fast"})  # Key required


def test_the_best_hits_keep_the_most_and_answers_are_deterministic() -> None:
    shown, _ = ec2()
    big = shown[(1, "RunInstances")]
    copies = {(1, f"Run{n:02}"): {**big, "name": f"Run{n:02}"} for n in range(15)}
    found = Found(sorted(copies), {})
    answer = answer_build(found, copies)
    sizes = [len(orjson.dumps(tool)) for tool in answer["tools"]]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] > 4 * sizes[-1]
    flags = [tool["_meta"].get("gateway/shortened", False) for tool in answer["tools"]]
    assert flags[-1] and flags == sorted(flags)  # shortened from the bottom up
    assert orjson.dumps(answer_build(found, copies)) == orjson.dumps(answer)
    assert answer_bytes(answer_result(answer)) <= ANSWER_BUDGET


def test_shortened_tools_kept_across_answers_change_no_answer() -> None:
    """One `Shortened` across many answers of overlapping hits, some with chains and lookups (the
    `_meta` each answer adds): every answer is byte for byte the one built afresh."""
    shown, _ = ec2()
    keys = largest(120)
    rnd = random.Random(7)
    kept = Shortened(size=200)  # smaller than what the answers shorten: entries come and go
    for _ in range(40):
        hits = rnd.sample(keys, 15)
        found = Found(hits, {hits[0]: (hits[1], hits[2])}, {hits[3]: (IdNeed("VpcId", hits[4], hits[5]),)})
        assert orjson.dumps(answer_build(found, shown, shortened=kept)) == orjson.dumps(answer_build(found, shown))
    assert len(kept) == 200


def _tool(name: str, description: str = "") -> dict[str, Any]:
    return {"name": name, "description": description or f"{name} does it. And more, at length.",
            "inputSchema": {"type": "object", "properties": {"Id": {"type": "string"}}, "required": ["Id"]}}


NAMES = ["AttachVolume", "CreateVpc", "CreateSubnet", "RunInstances", "CreateVolume", "DescribeInstances",
         "DescribeVolumes", "DescribeVpcs"]
SHOWN = {(1, name): _tool(name) for name in NAMES}
K = {name: (1, name) for name in NAMES}
CHAINS = {
    K["AttachVolume"]: (K["CreateVpc"], K["CreateSubnet"], K["RunInstances"], K["CreateVolume"]),
    K["RunInstances"]: (K["CreateVpc"], K["CreateSubnet"]),
    K["CreateSubnet"]: (K["CreateVpc"],),
}
NEEDS = {
    K["AttachVolume"]: (IdNeed("InstanceId", K["RunInstances"], K["DescribeInstances"]),
                        IdNeed("VolumeId", K["CreateVolume"], K["DescribeVolumes"])),
    K["RunInstances"]: (IdNeed("SubnetId", K["CreateSubnet"], None),),
    K["CreateSubnet"]: (IdNeed("VpcId", K["CreateVpc"], K["DescribeVpcs"]),),
}
FOUND = Found([K["AttachVolume"]], CHAINS, NEEDS)


def test_prerequisites_come_in_brief_with_the_parameters_they_produce() -> None:
    answer = wire(answer_build(FOUND, SHOWN))
    assert answer["tools"] == [{**SHOWN[K["AttachVolume"]], "_meta": {
        "gateway/prerequisites": ["CreateVpc", "CreateSubnet", "RunInstances", "CreateVolume"],
        "gateway/lookups": {"InstanceId": "DescribeInstances", "VolumeId": "DescribeVolumes"},
    }}]
    of = ["AttachVolume"]
    assert answer["prerequisites"] == [
        {"name": "CreateVpc", "description": "CreateVpc does it. And more, at length.",
         "_meta": {"gateway/prerequisiteOf": of, "gateway/produces": {"CreateSubnet": ["VpcId"]}}},
        {"name": "CreateSubnet", "description": "CreateSubnet does it. And more, at length.",
         "_meta": {"gateway/prerequisiteOf": of, "gateway/produces": {"RunInstances": ["SubnetId"]}}},
        {"name": "RunInstances", "description": "RunInstances does it. And more, at length.",
         "_meta": {"gateway/prerequisiteOf": of, "gateway/produces": {"AttachVolume": ["InstanceId"]}}},
        {"name": "CreateVolume", "description": "CreateVolume does it. And more, at length.",
         "_meta": {"gateway/prerequisiteOf": of, "gateway/produces": {"AttachVolume": ["VolumeId"]}}},
    ]
    long = {**SHOWN, K["CreateVpc"]: _tool("CreateVpc", "Creates a VPC with the IPv4 CIDR block you give it, "
                                                        "among many other things it can do " * 5)}
    line = answer_build(FOUND, long)["prerequisites"][0]["description"]
    assert len(line) <= 120 and line.endswith("…") and "\n" not in line


def test_lookups_and_producers_are_named_only_when_the_caller_sees_them() -> None:
    hidden = {key: tool for key, tool in SHOWN.items() if key not in (K["DescribeVolumes"], K["CreateVolume"])}
    answer = wire(answer_build(FOUND, hidden))
    assert answer["tools"][0]["_meta"] == {
        "gateway/prerequisites": ["CreateVpc", "CreateSubnet", "RunInstances"],
        "gateway/lookups": {"InstanceId": "DescribeInstances"},
    }
    assert [p["name"] for p in answer["prerequisites"]] == ["CreateVpc", "CreateSubnet", "RunInstances"]
    assert "CreateVolume" not in orjson.dumps(answer).decode() and "DescribeVolumes" not in orjson.dumps(answer).decode()
    bare = wire(answer_build(Found([K["DescribeVpcs"]], {}), SHOWN))
    assert bare == {"tools": [{**SHOWN[K["DescribeVpcs"]], "_meta": {"gateway/prerequisites": []}}],
                    "prerequisites": []}


def test_expand_returns_hits_and_prerequisites_whole() -> None:
    shown, _ = ec2()
    big = {**SHOWN, **{key: {**shown[(1, key[1])]} for key in SHOWN if (1, key[1]) in shown}}
    many = Found([K["AttachVolume"], K["DescribeInstances"], K["DescribeVolumes"], K["DescribeVpcs"]], CHAINS, NEEDS)
    budget = 4096
    squeezed = answer_build(many, big, budget=budget)
    assert all(tool["_meta"].get("gateway/shortened") for tool in squeezed["tools"][1:])
    answer = answer_build(many, big, expand=["DescribeVpcs", "RunInstances"], budget=budget)
    tools = {tool["name"]: tool for tool in answer["tools"]}
    assert list(tools) == ["AttachVolume", "DescribeInstances", "DescribeVolumes", "DescribeVpcs", "RunInstances"]
    assert tools["DescribeVpcs"] == {**big[K["DescribeVpcs"]], "_meta": {"gateway/prerequisites": []}}
    assert tools["RunInstances"] == {**big[K["RunInstances"]], "_meta": {
        "gateway/prerequisites": ["CreateVpc", "CreateSubnet"], "gateway/prerequisiteOf": ["AttachVolume"],
        "gateway/produces": {"AttachVolume": ["InstanceId"]}}}
    assert [p["name"] for p in answer["prerequisites"]] == ["CreateVpc", "CreateSubnet", "CreateVolume"]
    with pytest.raises(ExpandUnknown, match="does not hold: DeleteVpc, Nope"):
        answer_build(many, big, expand=["Nope", "DeleteVpc", "RunInstances"])
