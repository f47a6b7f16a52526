"""Lists too big for one SSE event reach the official SDK's clients in pages that fit: a
single-backend host whose backend never pages (3 MB of tools, 3 MB of resources) and an EC2 host
compiled from its OpenAPI spec (765 tools, 5 MB), over Streamable HTTP in both eras and over
HTTP+SSE, whose readers refuse an event over 1 MiB."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.conf import settings
from mcp import Client

from apps.catalog.specs import spec_upload
from tests import factories
from tests.backends.big_list_server import tool_names
from tests.conftest import Host, make_host, mcp_client
from tests.gateway.test_http_sse import sse_session
from tests.processes import backend_argv, free_port, running

pytestmark = pytest.mark.slow

EC2 = Path(settings.BASE_DIR).parent / "shared" / "data" / "catalog" / "openapi" / "aws" / "ec2.json"
TOOLS = 1500


@pytest.fixture(scope="module")
def big_backend() -> Iterator[str]:
    port = free_port()
    argv = [*backend_argv("tests.backends.big_list_server", port), "--tools", str(TOOLS), "--description-bytes", "2000"]
    with running(argv, port, log_name="big-list-backend"):
        yield f"http://127.0.0.1:{port}/mcp"


def _ec2_host(gateway_url: str) -> Host:
    tenant = factories.tenant_factory()
    issued = factories.api_key_factory(tenant=tenant)
    backend = factories.openapi_backend_factory(tenant=tenant, name="ec2")
    spec_upload(backend=backend, document=EC2.read_bytes(), filename="ec2.json")
    host = factories.virtual_host_factory(tenant=tenant, mounts={"ec2": backend})
    return Host(f"{gateway_url}/mcp/{tenant.slug}/{host.slug}", issued.secret, tenant.slug, host.slug)


async def _read_all(fetch: Callable[[str | None], Awaitable[Any]], field: str) -> tuple[list[Any], int]:
    """Every entry of a list, following `nextCursor`; and how many pages it took."""
    entries: list[Any] = []
    cursor, pages = None, 0
    while True:
        page = await fetch(cursor)
        pages += 1
        entries.extend(getattr(page, field))
        cursor = page.next_cursor
        if cursor is None:
            return entries, pages


def _session(host: Host, transport: str) -> Any:
    if transport == "http+sse":
        return sse_session(host)
    return mcp_client(host.url, host.key, transport)


TRANSPORTS = ["legacy", "2026-07-28", "http+sse"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_backend_that_never_pages_is_read_in_pages(
    transactional_db: None, gateway_url: str, big_backend: str, transport: str
) -> None:
    host = await database_sync_to_async(make_host)(gateway_url, big_backend)
    async with _session(host, transport) as client:
        client: Client
        tools, pages = await _read_all(lambda cursor: client.list_tools(cursor=cursor, cache_mode="bypass"), "tools")
        resources, _ = await _read_all(lambda cursor: client.list_resources(cursor=cursor), "resources")
        called = await client.call_tool(tools[-1].name, {})
    names = tool_names(TOOLS)
    assert [tool.name for tool in tools] == names and pages >= 3
    assert [str(resource.uri) for resource in resources] == [f"big://{name}" for name in names]
    assert called.content[0].text == names[-1]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_ec2_host_lists_every_tool_in_pages_under_a_mebibyte(
    transactional_db: None, gateway_url: str, transport: str
) -> None:
    host = await database_sync_to_async(_ec2_host)(gateway_url)
    async with _session(host, transport) as client:
        client: Client
        tools, pages = await _read_all(lambda cursor: client.list_tools(cursor=cursor, cache_mode="bypass"), "tools")
    names = [tool.name for tool in tools]
    assert len(names) == len(set(names)) == 765 and pages >= 5
    assert "DescribeInstances" in names
    whole = len(json.dumps([tool.model_dump(by_alias=True, exclude_none=True) for tool in tools]))
    assert whole > 4 * 1024 * 1024  # what one page used to be
