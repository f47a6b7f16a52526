"""MCP Apps (`io.modelcontextprotocol/ui`) through the gateway: a tool names its UI by a `ui://`
resource in `_meta`; on a composed host that URI is shown under the host's naming, like the
resource itself, so a host that reads it gets the page through the gateway; alone on a host the
server's own URI passes through."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from channels.db import database_sync_to_async

from tests.backends.apps_server import PAGE, UI_URI
from tests.conftest import make_composed_host, make_host, mcp_client
from tests.processes import backend_argv, free_port, running

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def apps_backend() -> Iterator[str]:
    port = free_port()
    with running(backend_argv("tests.backends.apps_server", port), port, log_name="apps-backend"):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_an_apps_ui_on_a_composed_host_is_named_as_the_host_shows_it_and_reads_back(
    transactional_db: None, gateway_url: str, apps_backend: str, demo_backend_url: str, mode: str
) -> None:
    host = await database_sync_to_async(make_composed_host)(gateway_url, {"charts": apps_backend, "demo": demo_backend_url})
    shown = f"charts-{UI_URI}"
    async with mcp_client(host.url, host.key, mode) as client:
        chart = next(tool for tool in (await client.list_tools()).tools if tool.name == "charts-show_chart")
        assert chart.meta is not None
        assert chart.meta["ui"] == {"resourceUri": shown, "visibility": ["model", "app"]}
        assert chart.meta["ui/resourceUri"] == shown
        assert shown in {str(resource.uri) for resource in (await client.list_resources()).resources}
        read = await client.read_resource(shown)
        assert (str(read.contents[0].uri), read.contents[0].text) == (shown, PAGE)
        called = await client.call_tool("charts-show_chart", {"numbers": [1, 2, 3]})
        assert called.content[0].text == "3 numbers"


async def test_alone_on_a_host_the_apps_own_uri_passes_through(
    transactional_db: None, gateway_url: str, apps_backend: str
) -> None:
    host = await database_sync_to_async(make_host)(gateway_url, apps_backend)
    async with mcp_client(host.url, host.key, "legacy") as client:
        (chart,) = (await client.list_tools()).tools
        assert chart.meta is not None and chart.meta["ui"]["resourceUri"] == UI_URI
        assert (await client.read_resource(UI_URI)).contents[0].text == PAGE
