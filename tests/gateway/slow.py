"""A virtual host in front of the slow fixture backend (tests/backends/slow_server.py), and calls to it."""

from __future__ import annotations

from typing import Any

from apps.catalog.services import backend_create
from tests import factories
from tests.conftest import Host
from tests.gateway.helpers import message_of, modern


def slow_host(gateway_url: str, backend_url: str, *, timeout: float = 30.0, max_concurrency: int | None = None) -> Host:
    tenant = factories.tenant_factory()
    issued = factories.api_key_factory(tenant=tenant)
    backend = backend_create(tenant=tenant, name="slow", urls=[backend_url], timeout_seconds=timeout,
                             max_concurrency=max_concurrency)
    host = factories.virtual_host_factory(tenant=tenant, mounts={"slow": backend})
    return Host(f"{gateway_url}/mcp/{tenant.slug}/{host.slug}", issued.secret, tenant.slug, host.slug)


def call(host: Host, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A stateless `tools/call`; its JSON-RPC response."""
    return message_of(modern(host.url, "tools/call", {"name": tool, "arguments": arguments}, key=host.key))


def text_of(message: dict[str, Any]) -> str:
    assert "result" in message, message
    return message["result"]["content"][0]["text"]
