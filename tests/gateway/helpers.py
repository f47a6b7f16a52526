"""Raw HTTP against the MCP endpoint, for what the SDK client will not send (bad input, exact headers)."""

from __future__ import annotations

import json
from typing import Any

import httpx

ACCEPT = "application/json, text/event-stream"
MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "1"},
}


def post(url: str, body: Any, *, key: str | None, headers: dict[str, str] | None = None) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    sent = {"content-type": "application/json", "accept": ACCEPT, **(headers or {})}
    if key:
        sent["authorization"] = f"Bearer {key}"
    return httpx.post(url, content=content, headers=sent, timeout=30)


def initialize(url: str, key: str, version: str = "2025-11-25") -> httpx.Response:
    return post(
        url,
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}},
        key=key,
    )


def open_session(url: str, key: str, version: str = "2025-11-25") -> str:
    response = initialize(url, key, version)
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    ack = post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, key=key,
               headers={"mcp-session-id": session, "mcp-protocol-version": version})
    assert ack.status_code == 202
    return session


def modern(url: str, method: str, params: dict[str, Any] | None = None, *, key: str, request_id: int = 1,
           headers: dict[str, str] | None = None) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**(params or {}), "_meta": META}}
    sent = {"mcp-protocol-version": MODERN, "mcp-method": method}
    if params and "name" in params:
        sent["mcp-name"] = params["name"]
    return post(url, body, key=key, headers={**sent, **(headers or {})})


def message_of(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC response in a JSON or SSE reply."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data: ") and ('"result"' in line or '"error"' in line):
                return json.loads(line[6:])
        raise AssertionError(f"no response in stream: {response.text!r}")
    return response.json()
