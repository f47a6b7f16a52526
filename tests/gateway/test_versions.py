"""Version negotiation for every revision, and the 2026-07-28 envelope rules."""

from __future__ import annotations

import pytest

from apps.gateway.protocol.versions import LATEST_LEGACY, LEGACY_VERSIONS
from tests.conftest import Host
from tests.gateway.helpers import META, initialize, message_of, modern, post

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_initialize_answers_the_clients_version(demo_host: Host, version: str) -> None:
    response = initialize(demo_host.url, demo_host.key, version)
    assert response.status_code == 200
    result = message_of(response)["result"]
    assert result["protocolVersion"] == version
    assert result["serverInfo"]["name"] == "mcp-gateway"
    assert "tools" in result["capabilities"]
    assert response.headers["mcp-session-id"]


@pytest.mark.parametrize("requested", ["1999-01-01", "2026-07-28", 20251125])
def test_initialize_with_an_unknown_version_gets_the_latest_legacy_one(demo_host: Host, requested: object) -> None:
    response = initialize(demo_host.url, demo_host.key, requested)  # type: ignore[arg-type]
    assert message_of(response)["result"]["protocolVersion"] == LATEST_LEGACY


def test_server_discover(demo_host: Host) -> None:
    response = modern(demo_host.url, "server/discover", key=demo_host.key)
    assert response.status_code == 200
    result = message_of(response)["result"]
    assert result["supportedVersions"] == ["2026-07-28"]
    assert result["resultType"] == "complete"
    assert result["ttlMs"] >= 0 and result["cacheScope"] in {"public", "private"}
    assert "tools" in result["capabilities"]
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-gateway"


def test_unsupported_modern_version_is_32022_with_supported_list(demo_host: Host) -> None:
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": meta}}
    response = post(demo_host.url, body, key=demo_host.key,
                     headers={"mcp-protocol-version": "2099-01-01", "mcp-method": "tools/list"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32022
    assert error["data"] == {"supported": ["2026-07-28"], "requested": "2099-01-01"}
    assert response.json()["id"] == 7


@pytest.mark.parametrize(
    ("headers", "params"),
    [
        ({"mcp-method": "tools/list"}, {}),  # method header says something else
        ({"mcp-protocol-version": "2025-11-25"}, {}),  # version header disagrees with _meta
        ({"mcp-name": "echo"}, {"name": "add", "arguments": {"a": 1, "b": 2}}),  # name header disagrees
    ],
)
def test_header_body_mismatch_is_32020(demo_host: Host, headers: dict[str, str], params: dict[str, object]) -> None:
    response = modern(demo_host.url, "tools/call", params or {"name": "add", "arguments": {"a": 1, "b": 2}},
                      key=demo_host.key, headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32020


def test_base64_encoded_name_header_matches(demo_host: Host) -> None:
    response = modern(demo_host.url, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}},
                      key=demo_host.key, headers={"mcp-name": "=?base64?YWRk?="})
    assert message_of(response)["result"]["content"][0]["text"] == "3.0"


def test_missing_meta_is_32602_with_400(demo_host: Host) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    response = post(demo_host.url, body, key=demo_host.key,
                    headers={"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32602


def test_lists_carry_cache_hints_in_2026(demo_host: Host) -> None:
    result = message_of(modern(demo_host.url, "tools/list", key=demo_host.key))["result"]
    assert result["ttlMs"] >= 0 and result["cacheScope"] in {"public", "private"}
    assert [tool["name"] for tool in result["tools"]]


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_stateless_get_and_delete_are_405(demo_host: Host, method: str) -> None:
    import httpx

    response = httpx.request(method, demo_host.url, headers={
        "authorization": f"Bearer {demo_host.key}", "mcp-protocol-version": "2026-07-28",
        "accept": "text/event-stream"})
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


def test_batches_work_in_2025_03_26_sessions_only(demo_host: Host) -> None:
    from tests.gateway.helpers import open_session

    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 1}}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        {"not": "json-rpc"},
    ]
    session = open_session(demo_host.url, demo_host.key, "2025-03-26")
    response = post(demo_host.url, batch, key=demo_host.key,
                    headers={"mcp-session-id": session, "mcp-protocol-version": "2025-03-26"})
    assert response.status_code == 200
    by_id = {item["id"]: item for item in response.json()}
    assert by_id[1]["result"]["content"][0]["text"] == "2.0"
    assert by_id[2]["result"] == {}
    assert by_id[None]["error"]["code"] == -32600
    later = open_session(demo_host.url, demo_host.key, "2025-06-18")
    refused = post(demo_host.url, batch, key=demo_host.key,
                   headers={"mcp-session-id": later, "mcp-protocol-version": "2025-06-18"})
    assert refused.status_code == 400 and refused.json()["error"]["code"] == -32600
