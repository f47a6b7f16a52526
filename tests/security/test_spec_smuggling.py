"""Request smuggling through spec-authored strings: a path key, a parameter or header name, a server
URL that holds CR, LF, NUL, spaces or other controls is refused when the spec is compiled (with its
JSON pointer, and the previous version keeps serving); the gateway's HTTP client refuses to write
such a request line or header (tools stored before the check existed); and a keep-alive connection
whose response framing went wrong never carries the next caller's request."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from channels.db import database_sync_to_async
from django.core.exceptions import ValidationError

from apps.catalog.credentials import egress_credential_set
from apps.catalog.models import SpecVersion, Tool
from apps.catalog.openapi import compile_spec
from apps.catalog.specs import spec_upload
from apps.common.guarded_http import guarded_async_client
from apps.gateway.adapters.http_pool import HttpPool, RequestRefused, Target, UpstreamHttpError
from tests import factories
from tests.gateway.adapters.test_http_pool import ScriptedServer, _get, _json
from tests.gateway.helpers import message_of, modern

_OK = {"200": {"description": "ok"}}


def _oas3(paths: dict[str, Any] | None = None, **extra: Any) -> bytes:
    document = {"openapi": "3.0.3", "info": {"title": "t", "version": "1"},
                "paths": paths if paths is not None else {"/pets": {"get": {"operationId": "list", "responses": _OK}}}}
    return json.dumps({**document, **extra}).encode()


def _with_header(name: str) -> bytes:
    return _oas3({"/pets": {"get": {"operationId": "list", "responses": _OK,
                                    "parameters": [{"name": name, "in": "header", "schema": {"type": "string"}}]}}})


# Each document, and the pointer of the string the compiler must refuse.
REFUSED = {
    "path key": (_oas3({"/pets\r\nX-Injected: 1": {"get": {"responses": _OK}}}), "/paths/~1pets\r\nX-Injected: 1"),
    "header parameter": (_with_header("X-A\r\nHost: evil"), "/paths/~1pets/get/parameters/0/name"),
    "relative server URL": (_oas3(servers=[{"url": "/v1\r\nHost: evil"}]), "/servers/0/url"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_strings_that_would_break_the_request_are_compile_errors(case: str) -> None:
    document, pointer = REFUSED[case]
    result = compile_spec(document)
    assert result.tools == ()
    assert [e.pointer for e in result.errors] == [pointer]
    assert "carriage return (CR)" in result.errors[0].message


@pytest.mark.parametrize(("document", "pointer", "says"), [
    (_with_header("X A"), "/paths/~1pets/get/parameters/0/name", "holds a space"),
    (_with_header("X-A:"), "/paths/~1pets/get/parameters/0/name", "is not an HTTP token"),
    (_oas3({"/pets": {"get": {"responses": _OK, "parameters": [
        {"name": "q\x00", "in": "query", "schema": {"type": "string"}}]}}}),
     "/paths/~1pets/get/parameters/0/name", "NUL"),
    (_oas3({"/pets": {"get": {"responses": _OK, "parameters": [
        {"name": "c\n", "in": "cookie", "schema": {"type": "string"}}]}}}),
     "/paths/~1pets/get/parameters/0/name", "line feed"),
    (_oas3({"/pets/{id\r}": {"get": {"responses": _OK, "parameters": [
        {"name": "id\r", "in": "path", "required": True, "schema": {"type": "string"}}]}}}),
     "/paths/~1pets~1{id\r}", "carriage return"),
    (_oas3({"/a b": {"get": {"responses": _OK}}}), "/paths/~1a b", "holds a space"),
    (_oas3(servers=[{"url": "https://{host}/v1", "variables": {"host": {"default": "api.example\r\n"}}}]),
     "/servers/0/variables/host/default", "carriage return"),
    (_oas3(servers=[{"url": "https://{host}/v1", "variables": {
        "host": {"default": "api.example", "enum": ["api.example", "evil\n"]}}}]),
     "/servers/0/variables/host/enum/1", "line feed"),
    (_oas3({"/pets": {"get": {"responses": _OK, "servers": [{"url": "/v2\t"}]}}}), "/paths/~1pets/get/servers/0/url",
     "a tab"),
    (_oas3(components={"securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Key\r\nA: b"}}}),
     "/components/securitySchemes/key/name", "carriage return"),
    (_oas3(components={"securitySchemes": {"key": {"type": "apiKey", "in": "query", "name": "k\n"}}}),
     "/components/securitySchemes/key/name", "line feed"),
    (_oas3({"/pets": {"post": {"responses": _OK, "requestBody": {"content": {"application/json\r\nX: 1": {}}}}}}),
     "/paths/~1pets/post/requestBody/content/application~1json\r\nX: 1", "carriage return"),
    (json.dumps({"swagger": "2.0", "info": {"title": "t", "version": "1"}, "host": "api.example\r\nX: 1",
                 "paths": {"/p": {"get": {"responses": _OK}}}}).encode(), "/host", "carriage return"),
    (json.dumps({"swagger": "2.0", "info": {"title": "t", "version": "1"}, "consumes": ["a/b\n"],
                 "paths": {"/p": {"get": {"responses": _OK}}}}).encode(), "/consumes/0", "line feed"),
    (json.dumps({"swagger": "2.0", "info": {"title": "t", "version": "1"},
                 "securityDefinitions": {"key": {"type": "apiKey", "in": "header", "name": "X\x00"}},
                 "paths": {"/p": {"get": {"responses": _OK}}}}).encode(), "/securityDefinitions/key/name", "NUL"),
])
def test_every_string_that_becomes_request_syntax_is_checked(document: bytes, pointer: str, says: str) -> None:
    result = compile_spec(document)
    assert result.tools == ()
    assert [e.pointer for e in result.errors] == [pointer], result.errors
    assert says in result.errors[0].message


def test_ordinary_strings_still_compile() -> None:
    document = _oas3(
        {"/pets/{id}": {"get": {"operationId": "get", "responses": _OK, "parameters": [
            {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
            {"name": "X-Request-ID", "in": "header", "schema": {"type": "string"}},
            {"name": "filter[name]", "in": "query", "schema": {"type": "string"}},
            {"name": "session id", "in": "cookie", "schema": {"type": "string"}}]}}},
        servers=[{"url": "https://{region}.api.example/v1", "variables": {"region": {"default": "eu", "enum": ["eu"]}}}],
        components={"securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-API-Key"}}},
    )
    result = compile_spec(document)
    assert result.errors == () and [t.name for t in result.tools] == ["get"]


@pytest.mark.django_db(transaction=True)  # the compile runs once the upload commits
@pytest.mark.parametrize("case", REFUSED)
def test_an_upload_with_such_a_string_fails_and_the_previous_version_keeps_serving(case: str) -> None:
    document, pointer = REFUSED[case]
    backend = factories.openapi_backend_factory(base_url="http://127.0.0.1:9/")
    good = spec_upload(backend=backend, document=_oas3())
    backend.refresh_from_db()
    assert backend.active_spec_id == good.pk
    bad = spec_upload(backend=backend, document=document)
    bad.refresh_from_db()
    backend.refresh_from_db()
    assert bad.status == SpecVersion.Status.FAILED
    assert [e["pointer"] for e in bad.errors] == [pointer]
    assert backend.active_spec_id == good.pk
    assert list(Tool.objects.filter(backend=backend).values_list("name", "spec_version_id")) == [("list", good.pk)]


# --------------------------------------------------------------------------- the HTTP client


@pytest.mark.parametrize(("method", "path", "headers", "says"), [
    ("GET", "/pets\r\nX-Injected: 1", [], "carriage return"),
    ("GET", "/pets HTTP/1.1\r\n\r\nGET /admin", [], "a space"),
    ("GET", "/pets\x00", [], "NUL"),
    ("GET", "pets", [], "start with '/'"),
    ("GET /admin HTTP/1.1\r\n\r\nGET", "/", [], "method"),
    ("GET", "/", [("X-A\r\nHost", "evil")], "header name"),
    ("GET", "/", [("X-A: 1\nX-B", "v")], "header name"),
    ("GET", "/", [("X-A\x00", "v")], "header name"),
    ("GET", "/", [("X-A", "v\r\nHost: evil")], "line break"),
    ("GET", "/", [("X-A", "v\nHost: evil")], "line break"),
    ("GET", "/", [("X-A", "v\x00w")], "NUL"),
])
async def test_the_client_refuses_to_write_a_broken_request(
    method: str, path: str, headers: list[tuple[str, str]], says: str
) -> None:
    async with ScriptedServer(lambda request: _json(b"{}")) as server:
        pool = HttpPool(Target.from_url(server.url), allow_private=True)
        with pytest.raises(RequestRefused, match=says):
            await pool.request(method, path, headers, timeout=5)
        assert server.connections == 0  # refused before connecting: nothing was sent
        assert await _get(pool) == (200, b"{}")  # and ordinary requests still go
        pool.close()


async def test_the_httpx_clients_refuse_line_breaks_too() -> None:
    """Token endpoints, JWKS documents and probes go through httpx, whose h11 refuses them."""
    async with ScriptedServer(lambda request: _json(b"{}")) as server, \
            guarded_async_client(allow_private=True, timeout=2) as client:
        for headers in ({"X-A": "v\r\nHost: evil"}, {"X-A\r\nHost": "evil"}, {"X-A": "v\x00"}):
            with pytest.raises(httpx.LocalProtocolError):
                await client.get(server.url, headers=headers)
        with pytest.raises(httpx.InvalidURL):
            await client.get(server.url + "\r\nX-Injected: 1")
        assert (await client.get(server.url)).status_code == 200


def _then_json(first: list[bytes]) -> Any:
    served: list[bytes] = []

    def script(request: bytes) -> list[bytes]:
        served.append(request)
        return first if len(served) == 1 else _json(b'{"for":"you"}')
    return script


SMUGGLED = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n{"for":"other"}'


@pytest.mark.parametrize("first", [
    # Bytes after the end of the response: the answer to a smuggled second request.
    [_json(b"{}")[0] + SMUGGLED],
    [*_json(b"{}"), SMUGGLED],
    # Both framings: the body read as chunked, but which one the server meant is unknown.
    [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 7\r\n\r\n2\r\n{}\r\n0\r\n\r\n"],
    # A coding after chunked: the body ends with the connection.
    [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n{}", b"CLOSE"],
    # HTTP/1.0 without keep-alive closes after the response.
    [b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}"],
])
async def test_a_connection_with_confused_framing_is_not_reused(first: list[bytes]) -> None:
    async with ScriptedServer(_then_json(first)) as server:
        pool = HttpPool(Target.from_url(server.url), allow_private=True)
        assert await _get(pool) == (200, b"{}")
        await asyncio.sleep(0.05)  # the smuggled answer has arrived by the next call
        assert await _get(pool) == (200, b'{"for":"you"}')
        assert server.connections == 2
        pool.close()


async def test_a_chunk_without_its_crlf_is_an_error() -> None:
    broken = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n"]
    async with ScriptedServer(_then_json(broken)) as server:
        pool = HttpPool(Target.from_url(server.url), allow_private=True)
        with pytest.raises(UpstreamHttpError, match="broke the response body"):
            await _get(pool)
        assert await _get(pool) == (200, b'{"for":"you"}')
        assert server.connections == 2
        pool.close()


# --------------------------------------------------------------------------- end to end


def _stored_smuggler(gateway_url: str, service: str, *, path: str, header: str) -> dict[str, str]:
    """A tenant whose OpenAPI backend holds a tool `smuggle` with `path` and a header parameter named
    `header`, as a tool compiled before the compiler refused such strings is stored, and a clean
    tool `echo`; two keys."""
    tenant = factories.tenant_factory()
    first, second = factories.api_key_factory(tenant=tenant), factories.api_key_factory(tenant=tenant)
    backend = factories.openapi_backend_factory(tenant=tenant, base_url=service)
    tag = {"name": "X-Tag", "in": "header", "schema": {"type": "string"}}
    spec_upload(backend=backend, document=_oas3({
        "/smuggle": {"get": {"operationId": "smuggle", "responses": _OK, "parameters": [tag]}},
        "/echo": {"get": {"operationId": "echo", "responses": _OK}},
    }))
    tool = Tool.objects.get(backend=backend, name="smuggle")
    tool.binding = {**tool.binding, "path": path,
                    "arguments": [{**tool.binding["arguments"][0], "name": header}]}
    tool.save(update_fields=["binding"])
    host = factories.virtual_host_factory(tenant=tenant, mounts={"svc": backend})
    return {"url": f"{gateway_url}/mcp/{tenant.slug}/{host.slug}", "first": first.secret, "second": second.secret}


@pytest.mark.slow
@pytest.mark.parametrize(("path", "header"), [
    ("/first HTTP/1.1\r\nHost: x\r\n\r\nGET /smuggled", "X-Tag"),
    ("/smuggle", "X-Tag: 1\r\nX-Injected"),
])
async def test_a_stored_tool_cannot_smuggle_a_request_to_the_service(
    transactional_db: None, gateway_url: str, recording_service_url: str, path: str, header: str
) -> None:
    api = await database_sync_to_async(_stored_smuggler)(gateway_url, recording_service_url, path=path, header=header)
    async with httpx.AsyncClient() as client:
        await client.post(f"{recording_service_url}/__reset")

    def call(key: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return message_of(modern(api["url"], "tools/call", {"name": name, "arguments": arguments}, key=key))

    smuggled = await asyncio.to_thread(call, api["first"], "smuggle", {"X-Tag": "t"})
    assert smuggled["result"]["isError"] is True
    assert "cannot be sent" in smuggled["result"]["content"][0]["text"]
    # The next caller, with another key, gets the answer to its own request.
    echoed = await asyncio.to_thread(call, api["second"], "echo", {})
    assert echoed["result"]["structuredContent"]["received"]["path"] == "/echo"
    async with httpx.AsyncClient() as client:
        recorded = (await client.get(f"{recording_service_url}/__recorded")).json()
    assert [r["path"] for r in recorded] == ["/echo"]  # nothing but the clean call reached the service
    assert not any(name == "x-injected" for r in recorded for name, _ in r["headers"])


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["X Key", "X-Key:", "X-Key\r\nHost"])
def test_a_configured_credential_header_name_must_be_a_token(name: str) -> None:
    backend = factories.openapi_backend_factory()
    with pytest.raises(ValidationError, match="header name"):
        egress_credential_set(backend=backend, kind="api_key_header", name=name, secret="s3cret")
