"""The tool tester's form: a tool's input schema as fields (strings, numbers, integers, booleans,
enums as selects, arrays and objects as JSON; required marked; defaults filled in), or as one JSON
object where fields cannot say it; and the arguments a filled-in form sends."""

from __future__ import annotations

from typing import Any

import pytest
from django import forms

from apps.console.tool_try_form import MAX_FIELDS, ArgumentField, ToolTryForm, argument_fields

SCHEMA = {
    "type": "object",
    "required": ["city", "days"],
    "properties": {
        "units": {"type": "string", "enum": ["metric", "imperial"], "default": "metric"},
        "city": {"type": "string", "description": "Where."},
        "days": {"type": "integer", "minimum": 1, "default": 3},
        "ratio": {"type": ["number", "null"]},
        "verbose": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "where": {"type": "object", "properties": {"lat": {"type": "number"}}},
        "anything": {},
        "never": False,
    },
}
HOSTS = [("main:svc", "main (as svc_weather)")]
CALLERS = [("me", "me"), ("7", "key agent")]


def _kinds(schema: Any) -> dict[str, tuple[str, bool]]:
    return {f.name: (f.kind, f.required) for f in argument_fields(schema) or ()}


def test_each_property_becomes_the_field_its_type_asks_for_required_first() -> None:
    fields = argument_fields(SCHEMA)
    assert fields is not None
    assert [f.name for f in fields] == ["city", "days", "units", "ratio", "verbose", "tags", "where", "anything"]
    assert _kinds(SCHEMA) == {
        "city": ("string", True), "days": ("integer", True), "units": ("choice", False), "ratio": ("number", False),
        "verbose": ("boolean", False), "tags": ("json", False), "where": ("json", False), "anything": ("json", False),
    }
    by_name = {f.name: f for f in fields}
    assert by_name["units"].choices == ("metric", "imperial") and by_name["units"].default == "metric"
    assert (by_name["tags"].json_type, by_name["where"].json_type, by_name["anything"].json_type) == ("array", "object", "")
    assert by_name["city"].description == "Where." and by_name["tags"].type_words == "array of string"


@pytest.mark.parametrize("schema", [
    {"anyOf": [{"type": "object"}, {"type": "object"}]},
    {"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
    {"$ref": "#/$defs/args", "$defs": {"args": {"type": "object"}}},
    {"type": "object", "patternProperties": {"^x-": {"type": "string"}}},
    {"type": "array"},
    {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(MAX_FIELDS + 1)}},
    "not a schema",
])
def test_a_schema_fields_cannot_express_is_written_as_json(schema: Any) -> None:
    assert argument_fields(schema) is None
    form = ToolTryForm(schema=schema, hosts=HOSTS, callers=CALLERS)
    assert form.json_only and form.argument_boxes() == []


def test_a_tool_without_parameters_has_no_fields_but_a_form() -> None:
    assert argument_fields({"type": "object"}) == []
    assert argument_fields({"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}]}}}) == [
        ArgumentField("x", "json", False, type_words="string")]


def test_the_unfilled_form_marks_required_fields_and_fills_in_defaults() -> None:
    form = ToolTryForm(schema=SCHEMA, hosts=HOSTS, callers=CALLERS)
    boxes = {box.label: box for box in form.argument_boxes()}
    assert boxes["city"].field.required and boxes["days"].field.required
    assert not boxes["units"].field.required and not boxes["verbose"].field.required
    assert boxes["days"].value() == 3
    assert boxes["units"].value() == '"metric"'
    assert isinstance(boxes["units"].field.widget, forms.Select)
    assert isinstance(boxes["tags"].field.widget, forms.Textarea)
    assert form["arguments_json"].value() == '{\n  "days": 3,\n  "units": "metric"\n}'  # the fields' order
    assert isinstance(form.fields["host"].widget, forms.HiddenInput)  # one host: nothing to choose


def _posted(**values: str) -> dict[str, str]:
    names = {f.name: f"arg_{i}" for i, f in enumerate(argument_fields(SCHEMA) or ())}
    return {"host": "main:svc", "caller": "me", "mode": "form", **{names.get(k, k): v for k, v in values.items()}}


def test_filled_fields_become_typed_arguments_and_empty_optional_ones_are_not_sent() -> None:
    form = ToolTryForm(_posted(city="Oslo", days="2", units='"imperial"', ratio="0.5", verbose="false",
                               tags='["a", "b"]', anything="null"), schema=SCHEMA, hosts=HOSTS, callers=CALLERS)
    assert form.is_valid(), form.errors
    assert form.call() == {"host": "main:svc", "caller": "me", "arguments": {
        "city": "Oslo", "days": 2, "units": "imperial", "ratio": 0.5, "verbose": False, "tags": ["a", "b"],
        "anything": None,
    }}
    form = ToolTryForm(_posted(city=" Oslo ", days="2", ratio="4"), schema=SCHEMA, hosts=HOSTS, callers=CALLERS)
    assert form.is_valid(), form.errors
    assert form.call()["arguments"] == {"city": " Oslo ", "days": 2, "ratio": 4}  # as typed; 4 stays an integer


@pytest.mark.parametrize(("values", "field", "words"), [
    ({"days": "2"}, "city", "required"),
    ({"city": "Oslo", "days": "two"}, "days", "whole number"),
    ({"city": "Oslo", "days": "2", "ratio": "inf"}, "ratio", "finite"),
    ({"city": "Oslo", "days": "2", "tags": "[1,"}, "tags", "not JSON"),
    ({"city": "Oslo", "days": "2", "tags": '{"a": 1}'}, "tags", "JSON array"),
    ({"city": "Oslo", "days": "2", "tags": "[" * 100_000 + "]" * 100_000}, "tags", "nested too deeply"),
    ({"city": "Oslo", "days": "2", "units": '"kelvin"'}, "units", "valid choice"),
])
def test_a_value_of_the_wrong_type_is_refused_with_its_field_named(values: dict[str, str], field: str, words: str) -> None:
    form = ToolTryForm(_posted(**values), schema=SCHEMA, hosts=HOSTS, callers=CALLERS)
    assert not form.is_valid()
    index = [f.name for f in argument_fields(SCHEMA) or ()].index(field)
    assert words in " ".join(form.errors[f"arg_{index}"])


def test_json_mode_sends_the_object_as_written_and_ignores_the_fields() -> None:
    data = {**_posted(days="not read"), "mode": "json", "arguments_json": '{"city": "Oslo", "extra": [1]}'}
    form = ToolTryForm(data, schema=SCHEMA, hosts=HOSTS, callers=CALLERS)
    assert form.is_valid(), form.errors
    assert form.call()["arguments"] == {"city": "Oslo", "extra": [1]}
    for text, words in (("[1]", "JSON object"), ("", "JSON object"), ("{", "not JSON")):
        form = ToolTryForm({**data, "arguments_json": text}, schema=SCHEMA, hosts=HOSTS, callers=CALLERS)
        assert not form.is_valid() and words in " ".join(form.errors["arguments_json"])


def test_a_host_or_caller_not_offered_is_refused() -> None:
    form = ToolTryForm({**_posted(city="Oslo", days="1"), "host": "other:svc", "caller": "8"}, schema=SCHEMA,
                       hosts=HOSTS, callers=CALLERS)
    assert not form.is_valid() and set(form.errors) == {"host", "caller"}
