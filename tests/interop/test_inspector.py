"""The official MCP Inspector's CLI through the gateway. It picks its transport from the URL's last
segment (`/mcp`: Streamable HTTP, `/sse`: HTTP+SSE, anything else: it refuses the URL), so every
virtual host answers at `/mcp/<tenant>/<host>/mcp` and `/mcp/<tenant>/<host>/sse` as well as at
`/mcp/<tenant>/<host>`."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async

from tests.conftest import make_host
from tests.interop.node import inspector, inspector_run

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("suffix", ["/mcp", "/sse"])
async def test_the_inspector_lists_and_calls_tools_at_the_urls_it_expects(
    transactional_db: None, gateway_url: str, demo_backend_url: str, suffix: str
) -> None:
    host = await database_sync_to_async(make_host)(gateway_url, demo_backend_url)
    url = host.url + suffix
    listed = await asyncio.to_thread(inspector, url, host.key, "tools/list")
    assert {"add", "echo", "utc_now", "countdown"} <= {tool["name"] for tool in listed["tools"]}
    called = await asyncio.to_thread(inspector, url, host.key, "tools/call", "--tool-name", "echo",
                                     "--tool-arg", "text=héllo")
    assert called["content"][0]["text"] == "héllo"
    prompts = await asyncio.to_thread(inspector, url, host.key, "prompts/list")
    assert [prompt["name"] for prompt in prompts["prompts"]] == ["greet"]


async def test_the_bare_host_url_works_when_the_transport_is_named(
    transactional_db: None, gateway_url: str, demo_backend_url: str
) -> None:
    """Without a suffix the CLI cannot tell the transport; told it, it reaches the host too."""
    host = await database_sync_to_async(make_host)(gateway_url, demo_backend_url)
    guessed = await asyncio.to_thread(inspector_run, host.url, host.key, "tools/list")
    assert guessed.returncode != 0 and "could not be determined" in guessed.stderr + guessed.stdout
    listed = await asyncio.to_thread(inspector, host.url, host.key, "tools/list", transport="http")
    assert "add" in {tool["name"] for tool in listed["tools"]}
