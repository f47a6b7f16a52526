import pytest

from apps.catalog.openapi import CompileOptions
from apps.catalog.openapi.tool_names import NameAllocator, cap, sanitize

from .helpers import oas3, run


def _op(operation_id=None, **extra):
    op = {"responses": {}, **extra}
    if operation_id is not None:
        op["operationId"] = operation_id
    return op


def test_sanitise_and_fallback():
    assert sanitize("get pets/{id}!") == "get_pets_id"
    result = run(oas3({"/a": {"get": _op("list pets (v2)")}, "/pets/{id}": {"get": _op(
        parameters=[{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}])},
        "/c": {"get": _op("???")}}))
    assert [t.name for t in result.tools] == ["list_pets_v2", "get_pets_id", "get_c"]
    assert result.tools[0].operation_id == "list pets (v2)"


def test_cap_with_hash_and_configurable_limit():
    long_a, long_b = "a" * 70 + "x", "a" * 70 + "y"
    result = run(oas3({"/a": {"get": _op(long_a)}, "/b": {"get": _op(long_b)}}))
    names = [t.name for t in result.tools]
    assert all(len(n) == 64 for n in names) and names[0] != names[1]
    assert names[0] == cap(long_a, 64) and names[0].startswith("a" * 55 + "_")
    result = run(oas3({"/a": {"get": _op("b" * 200)}}), max_name_length=128)
    assert len(result.tools[0].name) == 128
    with pytest.raises(ValueError):
        CompileOptions(max_name_length=129)


def test_collisions_in_document_order():
    result = run(oas3({"/a": {"get": _op("x"), "post": _op("x")}, "/b": {"get": _op("x_2"), "put": _op("x")}}))
    assert [t.name for t in result.tools] == ["x", "x_2", "x_2_2", "x_3"]
    assert [w.pointer for w in result.warnings] == ["/paths/~1a/post/operationId", "/paths/~1b/put/operationId"]
    allocator = NameAllocator(12)
    names = [allocator.allocate("abcdefghijkl") for _ in range(3)]
    assert names[0] == "abcdefghijkl" and names[1].endswith("_2") and names[2].endswith("_3")
    assert all(len(n) <= 12 for n in names) and len(set(names)) == 3


def test_parameter_name_clashes_across_locations():
    doc = oas3({"/items/{id}": {"post": _op("upd", parameters=[
        {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
        {"name": "id", "in": "query", "schema": {"type": "integer"}},
        {"name": "id", "in": "header", "schema": {"type": "integer"}},
        {"name": "query_id", "in": "cookie", "schema": {"type": "integer"}},
        {"name": "filter[name]", "in": "query", "schema": {"type": "string"}},
    ], requestBody={"required": True, "content": {"application/json": {"schema": {
        "type": "object", "required": ["id"], "properties": {"id": {"type": "string"}, "body": {"type": "string"}}}}}})}})
    t = run(doc).tools[0]
    mapping = {b.argument: (b.location, b.name) for b in t.binding.arguments}
    assert mapping == {
        "id": ("path", "id"), "query_id": ("query", "id"), "filter_name": ("query", "filter[name]"),
        "header_id": ("header", "id"), "cookie_query_id": ("cookie", "query_id"),
        "body_id": ("body", "id"), "body": ("body", "body"),
    }
    assert t.input_schema["required"] == ["id", "body_id"]


def test_deprecated_excluded_by_default():
    doc = oas3({"/a": {"get": _op("old", deprecated=True), "post": _op("new")}})
    assert [t.name for t in run(doc).tools] == ["new"]
    tools = run(doc, include_deprecated=True).tools
    assert [(t.name, t.deprecated) for t in tools] == [("old", True), ("new", False)]


def test_annotations_per_method_and_description_cap():
    ops = {m: _op(m + "Op") for m in ("get", "head", "post", "put", "patch", "delete")}
    ops["get"]["summary"] = "Read it"
    ops["post"]["description"] = "x" * 100
    result = run(oas3({"/a": ops}), max_description_length=20)
    by = {t.binding.method: t for t in result.tools}
    assert by["GET"].annotations == {"title": "Read it", "readOnlyHint": True}
    assert by["HEAD"].annotations == {"readOnlyHint": True}
    assert by["POST"].annotations == {} and by["PATCH"].annotations == {}
    assert by["PUT"].annotations == {"idempotentHint": True}
    assert by["DELETE"].annotations == {"destructiveHint": True, "idempotentHint": True}
    assert by["POST"].description == "x" * 19 + "…"
    assert by["PUT"].description == "PUT /a"


def test_output_schema_rules():
    def responses(**r):
        return oas3({"/a": {"get": _op("a", responses=r)}}).copy()

    obj = {"description": "", "content": {"application/json": {"schema": {"properties": {"a": {"type": "string"}}}}}}
    assert run(responses(**{"201": obj})).tools[0].output_schema == {
        "properties": {"a": {"type": "string"}}, "type": "object"}
    text = {"description": "", "content": {"text/plain": {"schema": {"type": "object"}}}}
    assert run(responses(**{"200": text, "202": obj})).tools[0].output_schema is not None
    assert run(responses(**{"404": obj})).tools[0].output_schema is None
    ref = {"$ref": "#/components/responses/R"}
    doc = responses(**{"2XX": ref})
    doc["components"] = {"responses": {"R": obj}}
    assert run(doc).tools[0].output_schema["type"] == "object"
