from apps.catalog.openapi import compile_spec

from .helpers import oas3, run, tool

PETSTORE_YAML = b"""
openapi: 3.0.3
info: {title: Pets, version: 2024-01-01}
servers:
  - url: https://{host}/v1/
    variables: {host: {default: api.example.com}}
paths:
  /pets/{petId}:
    parameters:
      - {name: petId, in: path, required: true, schema: {type: integer}}
    get:
      operationId: getPet
      summary: Get a pet
      description: Returns one pet.
      parameters:
        - {name: fields, in: query, schema: {type: array, items: {type: string}}, style: form, explode: false}
        - {name: X-Trace, in: header, schema: {type: string}}
        - {name: session, in: cookie, schema: {type: string}}
      responses:
        200:
          description: ok
          content:
            application/json:
              schema: {$ref: '#/components/schemas/Pet'}
    delete:
      operationId: deletePet
      responses: {204: {description: gone}}
components:
  schemas:
    Pet:
      type: object
      required: [id]
      properties:
        id: {type: integer}
        tag: {type: string, nullable: true}
"""


def test_openapi_30_yaml():
    result = compile_spec(PETSTORE_YAML)
    assert result.errors == ()
    assert result.spec_version == "3.0" and result.title == "Pets" and result.version == "2024-01-01"
    get = tool(result, "getPet")
    assert get.description == "Get a pet\n\nReturns one pet."
    assert get.input_schema["required"] == ["petId"]
    assert list(get.input_schema["properties"]) == ["petId", "fields", "X-Trace", "session"]
    assert get.binding.method == "GET" and get.binding.path == "/pets/{petId}"
    assert get.binding.servers == ("https://api.example.com/v1",)
    fields = get.binding.argument("fields")
    assert (fields.location, fields.style, fields.explode) == ("query", "form", False)
    assert get.binding.argument("X-Trace").location == "header"
    assert get.binding.argument("session").location == "cookie"
    assert get.binding.argument("petId").style == "simple"
    assert get.output_schema["properties"]["tag"]["type"] == ["string", "null"]
    assert get.annotations == {"title": "Get a pet", "readOnlyHint": True}
    delete = tool(result, "deletePet")
    assert delete.annotations == {"destructiveHint": True, "idempotentHint": True}
    assert delete.output_schema is None


def test_openapi_31_json_body_flattened():
    doc = oas3({"/items": {"post": {
        "operationId": "create",
        "requestBody": {"required": True, "content": {"application/json": {"schema": {
            "type": "object", "required": ["name"],
            "properties": {"name": {"type": ["string", "null"]}, "size": {"$ref": "#/$defs/Size", "description": "d"}},
        }}}},
        "responses": {"201": {"description": "x", "content": {"application/json": {"schema": {"type": "string"}}}}},
    }}}, version="3.1.0", **{"$defs": {"Size": {"type": "integer", "minimum": 1}}})
    result = run(doc)
    assert result.errors == () and result.spec_version == "3.1"
    t = tool(result, "create")
    assert t.input_schema["properties"]["size"] == {"type": "integer", "minimum": 1, "description": "d"}
    assert t.input_schema["required"] == ["name"]
    assert t.binding.body_mode == "properties" and t.binding.body_content_type == "application/json"
    assert t.binding.argument("name").location == "body"
    assert t.output_schema is None  # 2xx schema is not an object
    assert t.annotations == {}


def test_non_object_body_is_whole():
    doc = oas3({"/raw": {"put": {"requestBody": {"content": {"text/plain": {"schema": {"type": "string"}}}},
                                 "responses": {}}}})
    t = run(doc).tools[0]
    assert t.name == "put_raw"
    assert t.binding.body_mode == "whole" and t.binding.body_content_type == "text/plain"
    assert t.binding.argument("body").name is None
    assert t.input_schema["properties"]["body"] == {"type": "string"}


SWAGGER = {
    "swagger": "2.0", "info": {"title": "S", "version": "1"},
    "host": "api.example.com", "basePath": "/v2", "schemes": ["http", "https"],
    "consumes": ["application/json"],
    "paths": {
        "/pets": {
            "post": {"operationId": "addPet", "parameters": [
                {"in": "body", "name": "pet", "required": True, "schema": {"$ref": "#/definitions/Pet"}},
                {"in": "query", "name": "tags", "type": "array", "items": {"type": "string"}, "collectionFormat": "pipes"},
            ], "responses": {"200": {"description": "ok", "schema": {"$ref": "#/definitions/Pet"}}}},
        },
        "/pets/{id}/photo": {
            "post": {"operationId": "upload", "consumes": ["multipart/form-data"], "parameters": [
                {"in": "path", "name": "id", "required": True, "type": "integer"},
                {"in": "formData", "name": "file", "type": "file", "required": True},
                {"in": "formData", "name": "note", "type": "string"},
            ], "responses": {"200": {"description": "ok"}}},
        },
    },
    "definitions": {"Pet": {"type": "object", "properties": {"name": {"type": "string", "x-nullable": True}}}},
}


def test_swagger_20():
    result = run(SWAGGER)
    assert result.errors == () and result.spec_version == "2.0"
    add = tool(result, "addPet")
    assert add.binding.servers == ("https://api.example.com/v2", "http://api.example.com/v2")
    assert add.binding.body_mode == "properties"
    assert add.input_schema["properties"]["name"]["type"] == ["string", "null"]
    tags = add.binding.argument("tags")
    assert (tags.style, tags.explode) == ("pipeDelimited", False)
    assert add.output_schema["type"] == "object"
    upload = tool(result, "upload")
    assert upload.binding.body_content_type == "multipart/form-data"
    assert upload.input_schema["properties"]["file"] == {"type": "string", "format": "binary"}
    assert upload.input_schema["required"] == ["id", "file"]


def test_swagger_yaml_without_host():
    result = compile_spec(b"swagger: '2.0'\ninfo: {title: x, version: '1'}\nbasePath: /api/\npaths:\n"
                          b"  /a:\n    get:\n      responses: {200: {description: ok}}\n")
    assert result.errors == ()
    assert result.tools[0].binding.servers == ("/api",)
    assert result.tools[0].name == "get_a"
