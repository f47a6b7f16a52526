import pytest

from apps.catalog.openapi import CompileOptions, Problem, compile_spec

from .helpers import oas3, pointers, run


def _with_schema(schema, components):
    return oas3({"/x": {"post": {"operationId": "op", "requestBody": {"content": {"application/json": {
        "schema": schema}}}, "responses": {}}}}, components={"schemas": components})


def test_ref_escapes_and_percent_encoding():
    doc = _with_schema({"$ref": "#/components/schemas/a~1b~0c"}, {"a/b~c": {"type": "object", "properties": {
        "p": {"$ref": "#/paths/~1x/post/x-extra"}}}})
    doc["paths"]["/x"]["post"]["x-extra"] = {"type": "integer"}
    result = run(doc)
    assert result.errors == ()
    assert result.tools[0].input_schema["properties"]["p"] == {"type": "integer"}
    encoded = _with_schema({"$ref": "#/components/schemas/a%7Bb%7D"}, {"a{b}": {"type": "string"}})
    assert run(encoded).tools[0].input_schema["properties"]["body"] == {"type": "string"}


def test_recursive_schema_is_cut_with_warning():
    node = {"type": "object", "properties": {"value": {"type": "string"},
                                             "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}}}
    result = run(_with_schema({"$ref": "#/components/schemas/Node"}, {"Node": node}))
    assert result.errors == ()
    assert result.tools[0].input_schema["properties"]["children"]["items"] == {}
    assert result.warnings == (Problem("/components/schemas/Node/properties/children/items",
                                       "recursive schema: $ref to /components/schemas/Node replaced by {} (any value)"),)


def test_mutual_recursion_and_sharing_is_finite():
    comps = {"A": {"type": "object", "properties": {"b": {"$ref": "#/components/schemas/B"}}},
             "B": {"type": "object", "properties": {"a": {"$ref": "#/components/schemas/A"},
                                                    "b": {"$ref": "#/components/schemas/B"}}}}
    result = run(_with_schema({"$ref": "#/components/schemas/A"}, comps))
    assert result.errors == ()
    b = result.tools[0].input_schema["properties"]["b"]
    assert b["properties"]["a"] == {} and b["properties"]["b"] == {}


def test_remote_ref_refused():
    result = run(_with_schema({"$ref": "other.yaml#/Pet"}, {}))
    assert result.tools == ()
    assert str(result.errors[0]) == ("/paths/~1x/post/requestBody/content/application~1json/schema/$ref: "
                                     "remote $ref 'other.yaml#/Pet' is not supported (only local '#/...' references are)")


def test_all_errors_reported_with_pointers():
    doc = oas3({
        "/pets": {"get": {"parameters": [{"in": "query"}, {"name": "a", "in": "body"},
                                         {"$ref": "#/components/parameters/Missing"}], "responses": {}},
                  "put": "nope"},
        "/loop": {"$ref": "#/paths/~1loop"},
        "/r": {"get": {"responses": {"200": {"description": "x", "content": {"application/json": {
            "schema": {"$ref": "http://evil/x"}}}}}}},
    })
    result = run(doc)
    assert result.tools == ()
    assert pointers(result.errors) == [
        "/paths/~1pets/get/parameters/0/name",
        "/paths/~1pets/get/parameters/1/in",
        "/paths/~1pets/get/parameters/2/$ref",
        "/paths/~1pets/put",
        "/paths/~1loop/$ref",
        "/paths/~1r/get/responses/200/content/application~1json/schema/$ref",
    ]
    assert "points to nothing: /components does not exist" in result.errors[2].message


@pytest.mark.parametrize(("data", "pointer", "fragment"), [
    (b"", "", "empty"),
    (b"{not json", "", "invalid JSON"),
    (b"key: [unclosed", "", "invalid YAML"),
    (b"[1, 2]", "", "must be a JSON/YAML object"),
    (b'{"info": {}}', "", "neither"),
    (b'{"openapi": "4.0.0", "paths": {}}', "/openapi", "unsupported OpenAPI version"),
    (b'{"swagger": "1.2", "paths": {}}', "/swagger", "unsupported Swagger version"),
    (b'{"openapi": "3.0.0"}', "", "no 'paths'"),
    (b'{"openapi": "3.0.0", "paths": []}', "/paths", "must be an object"),
    (b'{"openapi": "3.0.0", "paths": {"/a": 1}}', "/paths/~1a", "path item must be an object"),
    (b'{"openapi": "3.0.0", "paths": {"/a": {"parameters": {}, "get": {}}}}', "/paths/~1a/parameters", "must be an array"),
    (b'{"openapi": "3.0.0", "paths": {"/a": {"get": {"parameters": [1]}}}}', "/paths/~1a/get/parameters/0",
     "parameter must be an object"),
    (b'{"openapi": "3.0.0", "paths": {"/a": {"get": {"requestBody": 1}}}}', "/paths/~1a/get/requestBody",
     "requestBody must be an object"),
    (b'{"openapi": "3.0.0", "paths": {"/a": {"get": {"requestBody": {"$ref": 5}}}}}',
     "/paths/~1a/get/requestBody/$ref", "must be a string"),
    (b'{"openapi": "3.0.0", "paths": {"/a": {"get": {"requestBody": {"$ref": "#foo"}}}}}',
     "/paths/~1a/get/requestBody/$ref", "not a JSON pointer"),
])
def test_error_paths(data, pointer, fragment):
    result = compile_spec(data)
    assert result.tools == ()
    assert result.errors[0].pointer == pointer
    assert fragment in result.errors[0].message


def test_size_limit():
    data = b'{"openapi": "3.0.0", "paths": {}}'
    assert compile_spec(data, options=CompileOptions(max_bytes=len(data))).errors == ()
    result = compile_spec(data + b" ", options=CompileOptions(max_bytes=len(data)))
    assert "larger than the limit" in result.errors[0].message


def test_schema_budget_and_depth():
    deep = {"type": "string"}
    for _ in range(10):
        deep = {"type": "array", "items": deep}
    result = run(_with_schema(deep, {}), max_schema_depth=5)
    assert result.errors == () and any("deeper than 5" in w.message for w in result.warnings)
    result = run(_with_schema(deep, {}), max_schema_nodes=3)
    assert "schemas too large" in result.errors[0].message


def test_yaml_alias_recursion_is_finite():
    data = b"openapi: 3.0.0\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    post:\n      requestBody:\n" \
           b"        content:\n          application/json:\n            schema: &s\n              type: array\n" \
           b"              items: *s\n      responses: {}\n"
    result = compile_spec(data)
    assert result.errors == () and any("deeper than" in w.message for w in result.warnings)


def test_tolerated_defects_are_warnings():
    doc = oas3({"/a/{id}/{other}": {"get": {"operationId": "a", "parameters": [
        {"name": "id", "in": "path"}, {"name": "q", "in": "query"}, {"name": "gone", "in": "path", "required": True},
        {"name": "Accept", "in": "header", "schema": {"type": "string"}}, {"name": "q", "in": "query"},
    ], "responses": {"200": {"description": "", "content": {"application/json": {"schema": {
        "type": "object", "additionalProperties": "true", "properties": {"r": {"type": "strin"}}}}}}},
        "cache": True}}})
    result = run(doc)
    assert result.errors == ()
    t = result.tools[0]
    assert t.input_schema["required"] == ["id", "other"]
    assert set(t.input_schema["properties"]) == {"id", "other", "q"}
    assert t.output_schema["additionalProperties"] is True
    assert len(result.warnings) == 10
