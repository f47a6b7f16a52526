"""Bad input gets a clear, specific answer, never a traceback, and changes nothing stored."""

from __future__ import annotations

import time

import httpx
import pytest

from apps.audit.models import AuditRecord
from apps.catalog.models import Backend, VirtualHost
from apps.tenants.models import ApiKey, Tenant
from tests.conftest import Host
from tests.gateway.helpers import META, MODERN, message_of, modern, open_session, post

pytestmark = pytest.mark.slow


def _stored(tenant: str) -> tuple[int, ...]:
    counts = [model.objects.count() for model in (Tenant, ApiKey, Backend, VirtualHost)]
    return (*counts, AuditRecord.objects.filter(tenant_slug=tenant).count())


@pytest.fixture
def unchanged(demo_host: Host):  # type: ignore[no-untyped-def]
    before = _stored(demo_host.tenant)
    yield
    time.sleep(0.5)  # an audit row would be written within the writer's 0.25 s flush interval
    assert _stored(demo_host.tenant) == before


@pytest.mark.parametrize("body", [b"{not json", b"", b"\xff\xfe", b'{"jsonrpc": "2.0", "id": 1, "method": "x"'])
def test_malformed_json_is_parse_error(demo_host: Host, unchanged: None, body: bytes) -> None:
    response = post(demo_host.url, body, key=demo_host.key)
    assert response.status_code == 400
    assert response.json() == {"jsonrpc": "2.0", "id": None, "error": response.json()["error"]}
    assert response.json()["error"]["code"] == -32700
    assert "Traceback" not in response.text


@pytest.mark.parametrize(
    "body",
    [
        [],
        [{"jsonrpc": "2.0", "id": 1, "method": "ping"}],
        "a string",
        42,
        {"id": 1, "method": "ping"},
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "method": 5},
        {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
        {"jsonrpc": "2.0", "id": True, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1, 2]},
        {"jsonrpc": "2.0", "id": 1},
    ],
)
def test_invalid_jsonrpc_is_invalid_request(demo_host: Host, unchanged: None, body: object) -> None:
    response = post(demo_host.url, body, key=demo_host.key)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600


def test_unknown_method_legacy(demo_host: Host, unchanged: None) -> None:
    session = open_session(demo_host.url, demo_host.key)
    response = post(demo_host.url, {"jsonrpc": "2.0", "id": 3, "method": "no/such"}, key=demo_host.key,
                    headers={"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"})
    message = message_of(response)
    assert message["id"] == 3 and message["error"]["code"] == -32601


@pytest.mark.parametrize("params", [
    {"value": 9223372036854775807, "metadata": {"nested": "null\u0000value"}},  # found by mcp-fuzzer
    {"protocolVersion": "2025-11-25", "capabilities": "all", "clientInfo": {"name": "x", "version": "1"}},
    {"protocolVersion": "2025-11-25", "capabilities": {}},
])
def test_malformed_initialize_is_invalid_params_and_opens_no_session(
    demo_host: Host, unchanged: None, params: dict[str, object]
) -> None:
    response = post(demo_host.url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params},
                    key=demo_host.key)
    assert "mcp-session-id" not in response.headers
    error = message_of(response)["error"]
    assert error["code"] == -32602 and error["message"].startswith("Invalid params: initialize needs")


def test_malformed_client_capabilities_are_invalid_params_modern(demo_host: Host, unchanged: None) -> None:
    response = post(demo_host.url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        **META, "io.modelcontextprotocol/clientCapabilities": "all"}}}, key=demo_host.key,
        headers={"mcp-protocol-version": MODERN, "mcp-method": "tools/list"})
    assert response.status_code == 400
    assert message_of(response)["error"]["code"] == -32602


def test_unknown_method_modern_is_404(demo_host: Host, unchanged: None) -> None:
    response = modern(demo_host.url, "no/such", key=demo_host.key)
    assert response.status_code == 404
    assert message_of(response)["error"]["code"] == -32601


def test_unknown_tool_is_reported(demo_host: Host) -> None:
    response = modern(demo_host.url, "tools/call", {"name": "nope", "arguments": {}}, key=demo_host.key)
    message = message_of(response)
    assert "error" in message or message["result"]["isError"]


def test_body_over_the_limit_is_413(demo_host: Host, unchanged: None) -> None:
    big = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + b"a" * (5 * 1024 * 1024) + b'"}}'
    response = post(demo_host.url, big, key=demo_host.key)
    assert response.status_code == 413


def test_foreign_origin_is_403(demo_host: Host, unchanged: None) -> None:
    response = post(
        demo_host.url,
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}},
        key=demo_host.key, headers={"origin": "http://evil.example.com"},
    )
    assert response.status_code == 403
    assert "mcp-session-id" not in response.headers


def test_foreign_host_is_refused(demo_host: Host, unchanged: None) -> None:
    response = post(demo_host.url, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, key=demo_host.key,
                    headers={"host": "evil.example.com"})
    assert response.status_code == 403


def test_loopback_origin_is_allowed(demo_host: Host) -> None:
    response = post(
        demo_host.url,
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}},
        key=demo_host.key, headers={"origin": "http://localhost:3000"},
    )
    assert response.status_code == 200


def test_unknown_session_is_404(demo_host: Host, unchanged: None) -> None:
    open_session(demo_host.url, demo_host.key)
    for session in ["made-up", "gw-test.AAAAAAAAAAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA"]:
        response = post(demo_host.url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, key=demo_host.key,
                        headers={"mcp-session-id": session})
        assert response.status_code == 404


def test_missing_session_is_400(demo_host: Host, unchanged: None) -> None:
    response = post(demo_host.url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, key=demo_host.key)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600


def test_wrong_content_type_is_415(demo_host: Host, unchanged: None) -> None:
    response = post(demo_host.url, b"{}", key=demo_host.key, headers={"content-type": "text/plain"})
    assert response.status_code == 415


def test_put_is_405(demo_host: Host) -> None:
    response = httpx.put(demo_host.url, headers={"authorization": f"Bearer {demo_host.key}"})
    assert response.status_code == 405


@pytest.mark.parametrize("session", ["x.\u00e9.y", "a" * 300])
def test_odd_session_ids_are_unknown_sessions(demo_host: Host, unchanged: None, session: str) -> None:
    response = httpx.post(demo_host.url, content=b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
                          headers={"content-type": "application/json", "authorization": f"Bearer {demo_host.key}",
                                   "mcp-session-id": session.encode("latin-1") if session.isascii() is False else session})
    assert response.status_code == 404


@pytest.mark.parametrize("method", ["tools/列表", "tools list", "tools\u0007call"])
def test_methods_must_be_printable_ascii(demo_host: Host, unchanged: None, method: str) -> None:
    response = post(demo_host.url, {"jsonrpc": "2.0", "id": 1, "method": method}, key=demo_host.key)
    assert response.status_code == 400 and response.json()["error"]["code"] == -32600
