"""Small OpenAPI documents for tests, aimed at `tests.backends.recording_service`."""

from __future__ import annotations

import json
from typing import Any

import yaml

_PET = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}}}


def _op(operation_id: str, **extra: Any) -> dict[str, Any]:
    return {"operationId": operation_id, "summary": operation_id, "responses": {"200": {"description": "ok"}}, **extra}


def _param(name: str, where: str, schema: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, "in": where, "schema": schema, **extra}


def service_spec(*, title: str = "Recording service", extra_paths: dict[str, Any] | None = None,
                 security: bool = True) -> dict[str, Any]:
    """An OpenAPI 3.0 document with one operation per binding style, body type and answer kind."""
    string, integer = {"type": "string"}, {"type": "integer"}
    array = {"type": "array", "items": {"type": "string"}}
    obj = {"type": "object", "properties": {"R": integer, "G": integer}}
    paths: dict[str, Any] = {
        "/pets/{petId}": {
            "get": _op(
                "getPet",
                description="Fetch one pet.",
                parameters=[
                    _param("petId", "path", string, required=True),
                    _param("tags", "query", array),
                    _param("ids", "query", array, style="pipeDelimited", explode=False),
                    _param("words", "query", array, style="spaceDelimited", explode=False),
                    _param("color", "query", obj, style="deepObject", explode=True),
                    _param("flat", "query", obj, explode=False),
                    _param("X-Request-Tag", "header", string),
                    _param("session", "cookie", string),
                ],
                responses={"200": {"description": "ok", "content": {"application/json": {"schema": _PET}}}},
            ),
            "delete": _op("deletePet", parameters=[_param("petId", "path", string, required=True)]),
        },
        "/matrix/{point}": {"get": _op("matrixPoint", parameters=[
            _param("point", "path", obj, required=True, style="matrix", explode=True)])},
        "/label/{items}": {"get": _op("labelItems", parameters=[
            _param("items", "path", array, required=True, style="label")])},
        "/pets": {
            "post": _op("createPet", requestBody={"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["name"],
                "properties": {"name": string, "age": {"type": "integer", "minimum": 0}, "tags": array},
            }}}}),
        },
        "/forms": {"post": _op("submitForm", requestBody={"content": {"application/x-www-form-urlencoded": {
            "schema": {"type": "object", "properties": {"name": string, "tags": array}}}}})},
        "/upload": {"post": _op("uploadFile", requestBody={"content": {"multipart/form-data": {
            "schema": {"type": "object", "properties": {"note": string, "meta": obj}}}}})},
        "/status/{code}": {"get": _op("answerStatus", parameters=[_param("code", "path", integer, required=True)])},
        "/text": {"get": _op("getText")},
        "/binary": {"get": _op("getBinary")},
        "/slow/{seconds}": {"get": _op("waitFor", parameters=[_param("seconds", "path", {"type": "number"},
                                                                     required=True)])},
        "/huge/{size}": {"get": _op("getHuge", parameters=[_param("size", "path", integer, required=True)])},
        "/typed": {"get": _op("typedAnswer", responses={"200": {"description": "ok", "content": {
            "application/json": {"schema": {"type": "object", "required": ["missing"],
                                            "properties": {"missing": string}}}}}})},
    }
    paths.update(extra_paths or {})
    doc: dict[str, Any] = {
        "openapi": "3.0.3",
        "info": {"title": title, "version": "1.0"},
        "servers": [{"url": "/"}],
        "paths": paths,
    }
    if security:
        doc["components"] = {"securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-API-Key"}}}
        doc["security"] = [{"key": []}]
    return doc


def as_json(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc).encode()


def as_yaml(doc: dict[str, Any]) -> bytes:
    return yaml.safe_dump(doc, sort_keys=False).encode()


def swagger_spec() -> dict[str, Any]:
    """A Swagger 2.0 document with two operations."""
    return {
        "swagger": "2.0",
        "info": {"title": "Old", "version": "2"},
        "basePath": "/v2",
        "paths": {
            "/items": {"get": {"operationId": "listItems", "parameters": [
                {"name": "ids", "in": "query", "type": "array", "items": {"type": "string"},
                 "collectionFormat": "csv"}], "responses": {"200": {"description": "ok"}}}},
            "/items/{id}": {"get": {"operationId": "getItem", "parameters": [
                {"name": "id", "in": "path", "required": True, "type": "string"}],
                "responses": {"200": {"description": "ok"}}}},
        },
        "securityDefinitions": {"basic": {"type": "basic"}},
    }


#: A cloud API's operations (summary, required parameters): enough tools, of distinct meaning, for
#: searches to have a right answer.
OPERATIONS = {
    "CreateVpc": ("Creates a virtual private cloud (VPC) with an IPv4 CIDR block.", ["CidrBlock"]),
    "DescribeVpcs": ("Describes your virtual private clouds.", []),
    "DeleteVpc": ("Deletes the specified virtual private cloud.", ["VpcId"]),
    "CreateSubnet": ("Creates a subnet in the specified VPC.", ["VpcId", "CidrBlock"]),
    "DescribeSubnets": ("Describes your subnets.", []),
    "CreateSecurityGroup": ("Creates a security group: a virtual firewall for instances.", ["GroupName", "VpcId"]),
    "AuthorizeSecurityGroupIngress": ("Adds inbound rules to a security group.", ["GroupId"]),
    "RunInstances": ("Launches the specified number of instances using an AMI.", ["ImageId"]),
    "TerminateInstances": ("Shuts down the specified instances.", ["InstanceIds"]),
    "CreateBucket": ("Creates a new storage bucket for objects.", ["Bucket"]),
    "PutObject": ("Adds an object to a bucket.", ["Bucket", "Key"]),
    "SendMessage": ("Delivers a message to the specified queue.", ["QueueUrl", "MessageBody"]),
}


def network_spec(operations: dict[str, tuple[str, list[str]]] = OPERATIONS, title: str = "Cloud API") -> bytes:
    """An OpenAPI document with one POST operation per entry of `operations`."""
    paths: dict[str, Any] = {}
    for name, (summary, required) in operations.items():
        properties = {param: {"type": "string"} for param in [*required, "DryRun"]}
        paths[f"/cloud/{name}"] = {"post": {
            "operationId": name, "summary": summary,
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": required, "properties": properties}}}},
            "responses": {"200": {"description": "ok"}},
        }}
    return json.dumps({"openapi": "3.0.3", "info": {"title": title, "version": "1"}, "servers": [{"url": "/"}],
                       "paths": paths}).encode()
