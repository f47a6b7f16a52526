"""`OpenApiServer` against a scripted HTTP service on loopback, and the process-wide tool set cache:
no Daphne, no database."""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

import orjson
import pytest

from apps.catalog.openapi import Credential, compile_spec
from apps.catalog.openapi.invoke import has_builder
from apps.gateway.adapters import openapi_tool_server as openapi
from apps.gateway.adapters.egress_credentials import EgressPlan
from apps.gateway.adapters.openapi_tool_server import OpenApiHttp, OpenApiServer, ToolSet, ToolSetCache
from tests.gateway.adapters.test_http_pool import ScriptedServer

_HEADERS = ["Accept", "Content-Type", "Cookie", "Host", "Content-Length", "Transfer-Encoding", "Connection", "X-Tag"]
SPEC = {
    "swagger": "2.0",
    "info": {"title": "Scripted", "version": "1"},
    "paths": {
        "/echo": {"post": {
            "operationId": "echo", "consumes": ["application/json"],
            # Swagger 2.0 allows header parameters named like the headers the gateway writes itself.
            "parameters": [*({"in": "header", "name": name, "type": "string"} for name in _HEADERS),
                           {"in": "body", "name": "body", "schema": {"type": "object",
                                                                     "properties": {"x": {"type": "integer"}}}}],
            "responses": {"200": {"description": "ok"}},
        }},
        "/typed": {"get": {
            "operationId": "typed",
            "responses": {"200": {"description": "ok", "schema": {
                "type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}}},
        }},
        "/slow": {"get": {"operationId": "slow", "responses": {"200": {"description": "ok"}}}},
    },
}
TOOLS = ToolSet.of(compile_spec(orjson.dumps(SPEC)).tools)


class Service(ScriptedServer):
    """Answers by path (`/slow` not at all) and keeps what it received."""

    def __init__(self) -> None:
        super().__init__(self._answer)
        self.received: list[tuple[str, list[tuple[str, str]], bytes]] = []

    def _answer(self, request: bytes) -> list[bytes]:
        head, _, body = request.partition(b"\r\n\r\n")
        request_line, *lines = head.decode("latin-1").split("\r\n")
        headers = [(name.strip(), value.strip()) for name, _, value in (line.partition(":") for line in lines)]
        path = request_line.split(" ")[1]
        self.received.append((path, headers, body))
        if path == "/slow":
            return []
        answer = b'{"id":"not a number"}' if path == "/typed" else b'{"ok":true}'
        return [b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                % (len(answer), answer)]

    @property
    def base_url(self) -> str:
        return self.url.removesuffix("/mcp")


def _server(base_url: str, *, timeout: float = 5.0, credential: Credential | None = None) -> OpenApiServer:
    egress = None
    if credential is not None:
        placement = (credential.kind, credential.name, credential.username)
        egress = EgressPlan(backend="svc", placement=placement, fixed=credential.value)
    return OpenApiServer(backend_id=1, name="svc", toolset=TOOLS, base_url=base_url, egress=egress,
                         timeout=timeout, max_response_bytes=1000, http=OpenApiHttp(), allow_private=True)


def _names(headers: list[tuple[str, str]]) -> list[str]:
    return sorted(name.lower() for name, _ in headers)


async def test_reserved_headers_are_dropped_and_every_name_is_sent_once() -> None:
    arguments = {name: "from-argument" for name in _HEADERS} | {"x": 1}
    async with Service() as service:
        server = _server(service.base_url, credential=Credential("api_key_cookie", "s3cret", name="sid"))
        result = await server.call_tool("echo", arguments, headers=[("traceparent", "00-1-2-01")])
        assert result["isError"] is False, result
        [(path, headers, body)] = service.received
    assert (path, body) == ("/echo", b'{"x":1}')
    assert _names(headers) == ["accept", "content-length", "content-type", "cookie", "host", "traceparent", "x-tag"]
    sent = {name.lower(): value for name, value in headers}
    assert sent["accept"] == "from-argument"  # the gateway's Accept only when the request has none
    assert sent["content-type"] == "application/json"  # the body's, not the argument's
    assert sent["cookie"] == "sid=s3cret"  # the cookie parameters' (here the credential), not the argument's
    assert sent["host"].startswith("127.0.0.1:") and sent["content-length"] == "7"
    assert sent["x-tag"] == "from-argument"


async def test_the_gateway_adds_accept_when_the_arguments_do_not() -> None:
    async with Service() as service:
        assert (await _server(service.base_url).call_tool("echo", {"Cookie": "a=b"}))["isError"] is False
        [(_, headers, _)] = service.received
    assert ("Accept", "application/json, */*;q=0.8") in headers and ("Cookie", "a=b") in headers


async def test_a_header_outside_latin_1_is_a_tool_error_and_nothing_is_sent() -> None:
    async with Service() as service:
        result = await _server(service.base_url).call_tool("echo", {"X-Tag": "日本"})
        assert service.received == [] and service.connections == 0
    assert result["isError"] is True and "'X-Tag'" in result["content"][0]["text"]
    assert "ISO-8859-1" in result["content"][0]["text"]


async def test_latin_1_header_values_are_sent() -> None:
    async with Service() as service:
        assert (await _server(service.base_url).call_tool("echo", {"X-Tag": "café"}))["isError"] is False
        [(_, headers, _)] = service.received
    assert ("X-Tag", "café") in headers


@pytest.mark.parametrize("base_url", ["http://127.0.0.1:99999", "http://127.0.0.1:port", "http://[::1", "http://日本.example"])
async def test_an_unusable_service_url_is_a_tool_error(base_url: str) -> None:
    result = await _server(base_url).call_tool("typed", {})
    assert result["isError"] is True and "service URL of this tool is not usable" in result["content"][0]["text"]
    assert "127.0.0.1" not in result["content"][0]["text"]


async def test_an_output_schema_mismatch_is_a_tool_error_with_the_body() -> None:
    async with Service() as service:
        result = await _server(service.base_url).call_tool("typed", {})
    assert result["isError"] is True and "structuredContent" not in result
    assert "does not match the tool's output schema" in result["content"][0]["text"]
    assert any('{"id":"not a number"}' in block["text"] for block in result["content"][1:])


async def test_a_timeout_is_raised_and_the_next_call_works() -> None:
    async with Service() as service:
        server = _server(service.base_url, timeout=0.3)
        with pytest.raises(TimeoutError):
            await server.call_tool("slow", {})
        assert (await server.call_tool("typed", {}))["content"][0]["text"].startswith("The service answered")
        assert [path for path, _, _ in service.received] == ["/slow", "/typed"]
        assert service.connections == 2  # the timed-out connection was dropped, not reused


async def test_a_failed_builder_generation_is_logged_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from apps.catalog.openapi import invoke

    def broken(*_: Any) -> Any:
        raise RuntimeError("codegen bug")

    monkeypatch.setattr(invoke, "generate", broken)
    tools = ToolSet.of(compile_spec(orjson.dumps(SPEC)).tools)  # fresh tools: no plan cached yet
    server = OpenApiServer(backend_id=1, name="svc", toolset=tools, base_url="http://127.0.0.1:99999",
                           egress=None, timeout=1,
                           max_response_bytes=1000, http=OpenApiHttp(), allow_private=True)
    caplog.set_level(logging.WARNING, logger="apps.gateway.adapters.openapi_tool_server")
    for _ in range(3):
        await server.call_tool("typed", {})  # an unusable URL, but the builder is prepared first
        await asyncio.get_running_loop().run_in_executor(openapi._codegen_executor(), lambda: None)
        for _ in range(5):
            await asyncio.sleep(0)  # the done callback runs on the loop
    assert has_builder(tools.tools["typed"])
    [record] = [r for r in caplog.records if "generating its request builder failed" in r.getMessage()]
    assert "codegen bug" in record.getMessage()


def _toolset() -> ToolSet:
    return ToolSet({}, b"[]")


def test_tool_sets_in_use_are_kept_beyond_the_recent_ones() -> None:
    cache = ToolSetCache(size=2)
    held = {version: _toolset() for version in range(10)}  # as snapshots hold them
    for version, toolset in held.items():
        cache.put(version, toolset)
    assert all(cache.get(version) is toolset for version, toolset in held.items())


def test_tool_sets_no_longer_used_are_dropped_but_recent_ones_kept() -> None:
    cache = ToolSetCache(size=2)
    for version in range(5):
        cache.put(version, _toolset())
    gc.collect()
    assert [cache.get(version) is not None for version in range(5)] == [False, False, False, True, True]
    cache.get(3)  # 3 is now the most recent: a new version pushes 4 out
    cache.put(5, _toolset())
    gc.collect()
    assert [cache.get(version) is not None for version in (3, 4, 5)] == [True, False, True]
