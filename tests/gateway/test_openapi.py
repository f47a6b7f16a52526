"""OpenAPI backends end to end: an agent calls compiled tools through the gateway, and a real REST
service records exactly what it received."""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from channels.db import database_sync_to_async

from apps.audit.models import AuditRecord
from apps.catalog.credentials import egress_credential_set
from apps.catalog.models import Backend
from apps.catalog.services import backend_update
from apps.catalog.specs import spec_upload
from tests import factories
from tests.backends.specs import as_json, service_spec
from tests.conftest import mcp_client
from tests.gateway.helpers import message_of, modern, open_session, post

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Api:
    url: str
    key: str
    backend: Backend
    service: str

    def recorded(self) -> list[dict[str, Any]]:
        return httpx.get(f"{self.service}/__recorded").json()

    def last(self) -> dict[str, Any]:
        request = self.recorded()[-1]
        request["headers"] = {name: value for name, value in request["headers"]}
        request["body"] = base64.b64decode(request["body"])
        return request

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return message_of(modern(self.url, "tools/call", {"name": name, "arguments": arguments}, key=self.key))


def make_api(gateway_url: str, recording_service_url: str, document: bytes | None = None) -> Api:
    tenant = factories.tenant_factory()
    issued = factories.api_key_factory(tenant=tenant)
    backend = factories.openapi_backend_factory(tenant=tenant, base_url=recording_service_url)
    spec_upload(backend=backend, document=document or as_json(service_spec()), filename="service.json")
    host = factories.virtual_host_factory(tenant=tenant, mounts={"svc": backend})
    httpx.post(f"{recording_service_url}/__reset")
    return Api(f"{gateway_url}/mcp/{tenant.slug}/{host.slug}", issued.secret, backend, recording_service_url)


@pytest.fixture
def api(transactional_db: None, gateway_url: str, recording_service_url: str) -> Api:
    return make_api(gateway_url, recording_service_url)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_sdk_client_lists_and_calls_openapi_tools(
    transactional_db: None, gateway_url: str, recording_service_url: str, mode: str
) -> None:
    api = await database_sync_to_async(make_api)(gateway_url, recording_service_url)
    async with mcp_client(api.url, api.key, mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert len(tools) == 13
        assert tools["getPet"].input_schema["required"] == ["petId"]
        assert tools["getPet"].annotations.read_only_hint is True
        assert tools["deletePet"].annotations.destructive_hint is True
        result = await client.call_tool("getPet", {"petId": "a/b c", "tags": ["x", "y"], "X-Request-Tag": "t1"})
    assert result.is_error is False
    echoed = result.structured_content["received"]
    assert (echoed["method"], echoed["path"], echoed["query"]) == ("GET", "/pets/a%2Fb%20c", "tags=x&tags=y")
    assert ["x-request-tag", "t1"] in echoed["headers"]


def test_every_parameter_style_reaches_the_service_exactly(api: Api) -> None:
    message = api.call("getPet", {
        "petId": "../x", "ids": ["1", "2"], "words": ["a b", "c"], "color": {"R": 100, "G": 200},
        "flat": {"R": 1, "G": 2}, "X-Request-Tag": "tag", "session": "abc def",
    })
    assert message["result"]["isError"] is False, message
    sent = api.last()
    assert sent["path"] == "/pets/..%2Fx"
    assert sent["query"] == "ids=1%7C2&words=a%20b%20c&color%5BR%5D=100&color%5BG%5D=200&flat=R,1,G,2"
    assert sent["headers"]["x-request-tag"] == "tag"
    assert sent["headers"]["cookie"] == "session=abc%20def"
    api.call("matrixPoint", {"point": {"R": 1, "G": 2}})
    assert api.last()["path"] == "/matrix/;R=1;G=2"
    api.call("labelItems", {"items": ["a", "b"]})
    assert api.last()["path"] == "/label/.a,b"


def test_bodies_are_sent_as_json_form_and_multipart(api: Api) -> None:
    api.call("createPet", {"name": "Rex", "age": 3, "tags": ["good"]})
    sent = api.last()
    assert (sent["method"], sent["headers"]["content-type"]) == ("POST", "application/json")
    assert sent["body"] == b'{"name":"Rex","age":3,"tags":["good"]}'
    api.call("submitForm", {"name": "a b&c", "tags": ["x", "y"]})
    sent = api.last()
    assert sent["headers"]["content-type"] == "application/x-www-form-urlencoded"
    assert sent["body"] == b"name=a+b%26c&tags=x&tags=y"
    api.call("uploadFile", {"note": "hello", "meta": {"R": 1}})
    sent = api.last()
    assert sent["headers"]["content-type"].startswith("multipart/form-data; boundary=")
    assert b'name="note"\r\n\r\nhello\r\n' in sent["body"]
    assert b'Content-Type: application/json\r\n\r\n{"R":1}' in sent["body"]


@pytest.mark.parametrize(
    ("kind", "name", "username", "where", "expected"),
    [
        ("", "", "", "header", ("x-api-key", "s3cret")),  # kind and name from the spec's scheme
        ("bearer", "", "", "header", ("authorization", "Bearer s3cret")),
        ("basic", "", "user", "header", ("authorization", "Basic " + base64.b64encode(b"user:s3cret").decode())),
        ("api_key_query", "api_key", "", "query", "api_key=s3cret"),
        ("api_key_cookie", "token", "", "cookie", "token=s3cret"),
    ],
)
def test_the_egress_credential_is_applied(
    api: Api, kind: str, name: str, username: str, where: str, expected: Any
) -> None:
    egress_credential_set(backend=api.backend, kind=kind, name=name, username=username, secret="s3cret")
    message = api.call("getText", {})
    assert message["result"]["isError"] is False
    sent = api.last()
    if where == "header":
        assert sent["headers"][expected[0]] == expected[1]
    elif where == "query":
        assert sent["query"] == expected
    else:
        assert sent["headers"]["cookie"] == expected


def test_inbound_credentials_never_reach_the_service(api: Api) -> None:
    api.call("getText", {})
    headers = api.last()["headers"]
    assert api.key not in str(headers)
    assert "authorization" not in headers


def test_responses_become_tool_results(api: Api) -> None:
    text = api.call("getText", {})["result"]
    assert text["content"] == [{"type": "text", "text": "plain text ✓"}] and text["isError"] is False
    binary = api.call("getBinary", {})["result"]["content"][0]["resource"]
    assert binary["mimeType"] == "application/octet-stream"
    assert base64.b64decode(binary["blob"]) == bytes(range(256))
    missing = api.call("answerStatus", {"code": 404})["result"]
    assert missing["isError"] is True and missing["content"][0]["text"].startswith("HTTP 404 Not Found")
    assert '{"status": 404}' in missing["content"][0]["text"]
    typed = api.call("typedAnswer", {})["result"]
    assert typed["isError"] is True and "output schema" in typed["content"][0]["text"]
    assert "structuredContent" not in typed


def test_invalid_arguments_are_a_tool_error_and_send_nothing(api: Api) -> None:
    for arguments, words in [
        ({"age": 3}, "name"),
        ({"name": "Rex", "age": -1}, "minimum"),
        ({"name": 5}, "string"),
        ({"name": "Rex", "colour": "red"}, "colour"),
    ]:
        result = api.call("createPet", arguments)["result"]
        assert result["isError"] is True, (arguments, result)
        assert words in result["content"][0]["text"], (arguments, result)
    assert api.recorded() == []


def test_unknown_tools_and_bad_params_are_jsonrpc_errors(api: Api) -> None:
    assert api.call("noSuchTool", {})["error"]["code"] == -32602
    response = modern(api.url, "tools/call", {"name": "getText", "arguments": [1]}, key=api.key)
    assert message_of(response)["error"]["code"] == -32602
    assert message_of(modern(api.url, "prompts/list", key=api.key))["error"]["code"] == -32601


def test_a_slow_service_times_out_with_backend_unavailable(api: Api) -> None:
    backend_update(backend=api.backend, kind="openapi", transport=api.backend.transport, urls=[],
                   timeout_seconds=0.5, base_url=api.backend.base_url)
    started = time.perf_counter()
    message = api.call("waitFor", {"seconds": 3})
    assert time.perf_counter() - started < 2.5
    assert message["error"]["code"] == -32004 and message["error"]["data"] == {"backend": api.backend.name}
    assert "timed out after 0.5 s" in message["error"]["message"]
    # the timed-out connection was dropped, not left in the pool half-answered: the next call works
    assert api.call("getText", {})["result"]["content"] == [{"type": "text", "text": "plain text ✓"}]


def test_a_huge_response_is_refused_with_a_clear_message(api: Api) -> None:
    result = api.call("getHuge", {"size": 9 * 1024 * 1024})["result"]
    assert result["isError"] is True and "larger than 8,388,608 bytes" in result["content"][0]["text"]
    # the connection was dropped, not reused half-read: the next call works
    assert api.call("getText", {})["result"]["isError"] is False


def test_legacy_sessions_list_and_call_too(api: Api) -> None:
    session = open_session(api.url, api.key)
    headers = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    listed = post(api.url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, key=api.key, headers=headers)
    assert len(message_of(listed)["result"]["tools"]) == 13
    called = post(api.url, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                            "params": {"name": "getText", "arguments": {}}}, key=api.key, headers=headers)
    assert message_of(called)["result"]["content"][0]["text"] == "plain text ✓"
    assert post(api.url, {"jsonrpc": "2.0", "id": 4, "method": "ping"}, key=api.key,
                headers=headers).json()["result"] == {}


def test_openapi_calls_are_audited_with_their_label(api: Api) -> None:
    api.call("getText", {})
    api.call("answerStatus", {"code": 500})
    deadline = time.monotonic() + 5
    rows: list[AuditRecord] = []
    while len(rows) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
        rows = list(AuditRecord.objects.filter(tenant_slug=api.backend.tenant.slug).order_by("created_at"))
    assert [(r.backend_kind, r.backend, r.exposed_name, r.outcome) for r in rows] == [
        ("openapi", api.backend.name, "getText", "ok"),
        ("openapi", api.backend.name, "answerStatus", "tool_error"),
    ]


async def test_the_make_run_demo_serves_the_pet_store_as_tools(
    transactional_db: None, indexing_on: None, gateway_url: str, demo_backend_url: str, tmp_path: Path
) -> None:
    from apps.configuration.services import demo_seed

    await database_sync_to_async(demo_seed)(
        backend_url=demo_backend_url, key_file=tmp_path / "key", admin_password_file=tmp_path / "password"
    )
    key = (tmp_path / "key").read_text().strip()
    async with mcp_client(f"{gateway_url}/mcp/demo/rest", key, "2026-07-28") as client:
        names = sorted(tool.name for tool in (await client.list_tools()).tools)
        found = await client.call_tool("showPetById", {"petId": "1"})
        missing = await client.call_tool("showPetById", {"petId": "99"})
        created = await client.call_tool("createPet", {"id": 7, "name": "Nemo"})
        listed = await client.call_tool("listPets", {"limit": 5})
        searched = await client.call_tool("tool_search", {"query": "look up one pet by its id", "k": 2})
    assert names == ["createPet", "listPets", "showPetById", "tool_search"]
    assert searched.structured_content["tools"][0]["name"] == "showPetById"
    assert found.structured_content == {"id": 1, "name": "Rex", "tag": "dog"}
    assert missing.is_error and "HTTP 404 Not Found" in missing.content[0].text
    assert created.is_error is False
    assert {"id": 7, "name": "Nemo"} in listed.structured_content["result"]


def test_batch_items_are_answered_as_json_whatever_the_accept_header(api: Api) -> None:
    # A 2025-03-26 batch; `Accept: */*` lets the server pick SSE for a single request, but the
    # items of a batch come back inside one JSON array.
    session = open_session(api.url, api.key, "2025-03-26")
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "getText", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "answerStatus", "arguments": {"code": 418}}},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},
    ]
    response = post(api.url, batch, key=api.key, headers={
        "mcp-session-id": session, "mcp-protocol-version": "2025-03-26", "accept": "*/*"})
    by_id = {item["id"]: item for item in response.json()}
    assert by_id[1]["result"]["content"][0]["text"] == "plain text ✓"
    assert by_id[2]["result"]["isError"] is True and "HTTP 418" in by_id[2]["result"]["content"][0]["text"]
    assert by_id[3]["result"] == {}
