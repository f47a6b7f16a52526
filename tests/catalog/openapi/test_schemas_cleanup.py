"""Keyword values of the wrong type are coerced or dropped, with a warning, so schemas pass the metaschema."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from apps.catalog.openapi.diagnostics import Diagnostics
from apps.catalog.openapi.refs import RefResolver
from apps.catalog.openapi.schemas import SchemaConverter

from .helpers import oas3, run, tool


def _convert(schema: Any, version: str = "3.0") -> tuple[Any, dict[str, str]]:
    """The converted ``schema`` (found at ``/s``) and its warnings by pointer; the result must pass the metaschema."""
    diag = Diagnostics()
    converter = SchemaConverter(RefResolver({"s": schema}, diag), diag, version=version, max_depth=50, max_nodes=1000)
    out = converter.convert(schema, "/s")
    Draft202012Validator.check_schema(out)
    assert diag.errors == []
    warnings = {w.pointer: w.message for w in diag.warnings}
    assert len(warnings) == len(diag.warnings)
    return out, warnings


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("minimum", "0", 0),
    ("maximum", "50", 50),
    ("maximum", " 1.5 ", 1.5),
    ("exclusiveMaximum", "1e3", 1000.0),
    ("multipleOf", "0.01", 0.01),
    ("maxLength", "10", 10),
    ("minItems", "2.0", 2),
    ("deprecated", "true", True),
    ("readOnly", "False", False),
    ("writeOnly", "true", True),
    ("uniqueItems", "true", True),
    ("title", 2024, "2024"),
    ("description", 1.5, "1.5"),
])
def test_wrong_type_is_coerced_when_the_intent_is_clear(key, value, expected):
    out, warnings = _convert({"type": "object", "properties": {"p": {key: value}}})
    fixed = out["properties"]["p"][key]
    assert fixed == expected and type(fixed) is type(expected)
    assert list(warnings) == [f"/s/properties/p/{key}"]
    assert warnings[f"/s/properties/p/{key}"].startswith(f"'{key}' is ")


@pytest.mark.parametrize(("key", "value"), [
    ("minimum", "zero"),
    ("maximum", True),
    ("maximum", [1]),
    ("maximum", "0x10"),
    ("minimum", float("inf")),  # YAML .inf: would serialise as null
    ("multipleOf", 0),
    ("multipleOf", "-2"),
    ("maxLength", -1),
    ("maxLength", 1.5),
    ("minItems", "1" * 5000),  # more digits than int() reads
    ("deprecated", "yes"),
    ("readOnly", 1),
    ("uniqueItems", None),
    ("format", ["date"]),
    ("title", True),
    ("description", {"en": "x"}),
    ("pattern", 5),
    ("pattern", "(unclosed"),
    ("pattern", r"^\p{L}+$"),  # ECMA-only: Python's re (and so jsonschema's check) refuses it
    ("required", "name"),
    ("required", ["a", 1]),
    ("enum", []),
    ("enum", "a"),
    ("dependentRequired", {"a": "b"}),
])
def test_wrong_value_is_dropped_with_a_warning(key, value):
    out, warnings = _convert({"type": "object", "properties": {"p": {"type": "string", key: value}}})
    assert out["properties"]["p"] == {"type": "string"}
    assert list(warnings) == [f"/s/properties/p/{key}"]
    assert warnings[f"/s/properties/p/{key}"].endswith("; ignored")


def test_valid_values_are_kept_without_warnings():
    schema = {"type": "integer", "minimum": 0, "maximum": 2.5, "multipleOf": 0.5, "deprecated": False,
              "pattern": "^[a-z]+$", "format": "int32", "title": "T", "description": "", "enum": [1, None],
              "maxLength": 10.0}
    out, warnings = _convert(schema)
    assert out == schema and warnings == {}
    assert _convert({"type": "object", "required": [], "properties": {}}) == ({"type": "object", "properties": {}}, {})


def test_required_names_are_made_unique():
    out, warnings = _convert({"type": "object", "required": ["a", "b", "a"]})
    assert out["required"] == ["a", "b"]
    assert warnings == {"/s/required": "'required' lists a name twice; read once"}


@pytest.mark.parametrize(("value", "expected"), [
    ("String", "string"), (["integer", "null", "integer"], ["integer", "null"]), (["number", "number"], "number")])
def test_type_is_normalised(value, expected):
    out, warnings = _convert({"type": value})
    assert out == {"type": expected} and list(warnings) == ["/s/type"]


@pytest.mark.parametrize("value", ["text", [], [{"a": 1}], ["string", 5], None])
def test_unknown_type_is_dropped(value):
    out, warnings = _convert({"type": value, "maxLength": 3})
    assert out == {"maxLength": 3}
    assert warnings == {"/s/type": f"unknown schema type {value!r}; ignored"}


def test_exclusive_bounds_strings_of_the_30_boolean_form():
    out, warnings = _convert({"type": "number", "minimum": "1", "exclusiveMinimum": "true", "maximum": 9,
                              "exclusiveMaximum": False})
    assert out == {"type": "number", "exclusiveMinimum": 1, "maximum": 9}
    assert set(warnings) == {"/s/minimum", "/s/exclusiveMinimum"}
    assert warnings["/s/exclusiveMinimum"] == "'exclusiveMinimum' is the string 'true'; read as a boolean"
    out, warnings = _convert({"type": "number", "exclusiveMinimum": "0"}, version="3.1")
    assert out == {"type": "number", "exclusiveMinimum": 0} and list(warnings) == ["/s/exclusiveMinimum"]


def test_nullable_string_is_read_as_a_boolean():
    out, warnings = _convert({"type": "string", "nullable": "true"})
    assert out == {"type": ["string", "null"]}
    assert warnings == {"/s/nullable": "'nullable' is the string 'true'; read as a boolean"}
    out, warnings = _convert({"type": "string", "x-nullable": "maybe"})
    assert out == {"type": "string"} and list(warnings) == ["/s/x-nullable"]


def test_empty_and_bad_schema_arrays_are_dropped():
    out, warnings = _convert({"anyOf": [], "allOf": [{"type": "string"}], "oneOf": {}, "items": []})
    assert out == {"allOf": [{"type": "string"}]}
    assert set(warnings) == {"/s/anyOf", "/s/oneOf", "/s/items"}


def test_uncompilable_pattern_property_is_dropped():
    out, warnings = _convert({"type": "object", "patternProperties": {"^x-": {}, "(": {"type": "string"}}})
    assert out == {"type": "object", "patternProperties": {"^x-": {}}}
    assert list(warnings) == ["/s/patternProperties/("]


def test_annotations_beside_a_ref_are_cleaned_too():
    doc = oas3({"/x": {"get": {"operationId": "op", "responses": {"200": {"description": "ok", "content": {
        "application/json": {"schema": {"type": "object", "properties": {
            "a": {"$ref": "#/components/schemas/A", "deprecated": "true", "description": 5, "readOnly": "no"}}}}}}}}}},
        components={"schemas": {"A": {"type": "integer", "maximum": "100"}}})
    result = run(doc)
    schema = tool(result, "op").output_schema
    Draft202012Validator.check_schema(schema)
    assert schema["properties"]["a"] == {"type": "integer", "maximum": 100, "deprecated": True, "description": "5"}
    where = "/paths/~1x/get/responses/200/content/application~1json/schema/properties/a"
    assert {w.pointer for w in result.warnings} == {
        "/components/schemas/A/maximum", f"{where}/deprecated", f"{where}/description", f"{where}/readOnly"}


def test_parameter_bounds_are_coerced_in_the_input_schema():
    # The Spotify shape: a query parameter with string bounds, as in its QueryLimit component.
    doc = oas3({"/x": {"get": {"operationId": "op", "parameters": [{"name": "limit", "in": "query", "schema": {
        "type": "integer", "minimum": "0", "maximum": "50", "default": 20}}], "responses": {"200": {"description": ""}}}}})
    result = run(doc)
    limit = tool(result, "op").input_schema["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"]) == (0, 50)
    assert [w.pointer for w in result.warnings] == ["/paths/~1x/get/parameters/0/schema/minimum",
                                                     "/paths/~1x/get/parameters/0/schema/maximum"]
