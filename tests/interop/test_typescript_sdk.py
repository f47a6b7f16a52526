"""Clients on the official TypeScript SDK (v1 `@modelcontextprotocol/sdk` and v2
`@modelcontextprotocol/client`), over Streamable HTTP and HTTP+SSE and in each era they speak,
through the gateway to a Python SDK backend: they list, call (with progress), read and get what
they would get from the backend directly."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.db import database_sync_to_async

from tests.conftest import make_host
from tests.interop.node import typescript_client

pytestmark = pytest.mark.slow

#: (sdk, transport, negotiation, the protocol revision it must end up speaking)
CLIENTS = [
    ("v1", "http", "legacy", "2025-11-25"),
    ("v1", "sse", "legacy", "2025-11-25"),
    ("v2", "http", "legacy", "2025-11-25"),
    ("v2", "http", "auto", "2026-07-28"),
    ("v2", "sse", "legacy", "2025-11-25"),
]
PLAN: dict[str, Any] = {
    "calls": [{"name": "echo", "arguments": {"text": "héllo ✓"}}, {"name": "add", "arguments": {"a": 2, "b": 40}},
              {"name": "countdown", "arguments": {"start": 3}, "progress": True}],
    "reads": ["demo://readme"],
    "prompts": [{"name": "greet", "arguments": {"name": "Ada"}}],
}


def _comparable(seen: dict[str, Any]) -> dict[str, Any]:
    """What must be the same through the gateway as directly: everything but the revision."""
    return {field: value for field, value in seen.items() if field != "protocolVersion"}


@pytest.mark.parametrize(("sdk", "transport", "negotiation", "revision"), CLIENTS,
                         ids=[f"{s}-{t}-{n}" for s, t, n, _ in CLIENTS])
async def test_typescript_clients_get_through_the_gateway_what_the_backend_gives(
    transactional_db: None, gateway_url: str, demo_backend_url: str, sdk: str, transport: str, negotiation: str,
    revision: str,
) -> None:
    host = await database_sync_to_async(make_host)(gateway_url, demo_backend_url)
    suffix = "/sse" if transport == "sse" else "/mcp"
    plan = {**PLAN, "sdk": sdk, "transport": transport, "negotiation": negotiation, "key": host.key}
    through = await asyncio.to_thread(typescript_client, {**plan, "url": host.url + suffix})
    assert through["protocolVersion"] == revision
    assert [tool["name"] for tool in through["tools"]] == ["add", "echo", "utc_now", "countdown"]
    echo, add, countdown = through["calls"]
    assert echo["result"]["content"][0]["text"] == "héllo ✓"
    assert add["result"]["content"][0]["text"] == "42.0"
    assert [p["progress"] for p in countdown["progress"]] == [0, 1, 2]
    assert through["reads"][0]["result"]["contents"][0]["text"].startswith("# Demo")
    assert through["gets"][0]["result"]["messages"][0]["content"]["text"] == "Say hello to Ada in one short sentence."
    if transport == "http":  # the demo backend speaks Streamable HTTP only
        direct = await asyncio.to_thread(typescript_client, {**plan, "url": demo_backend_url})
        assert _comparable(through) == _comparable(direct)
