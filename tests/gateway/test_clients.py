"""The official SDK client, in every mode, through the gateway to an SDK-built backend."""

from __future__ import annotations

import httpx
import pytest
from mcp_types import TextContent

from tests.conftest import Host, mcp_client

pytestmark = pytest.mark.slow
MODES = ["legacy", "2026-07-28", "auto"]


@pytest.mark.parametrize("mode", MODES)
async def test_list_and_call_tools(demo_host: Host, mode: str) -> None:
    async with mcp_client(demo_host.url, demo_host.key, mode) as client:
        expected = "2025-11-25" if mode == "legacy" else "2026-07-28"
        assert client.protocol_version == expected
        tools = await client.list_tools()
        assert {tool.name for tool in tools.tools} == {"add", "echo", "utc_now", "countdown"}
        add = next(tool for tool in tools.tools if tool.name == "add")
        assert set(add.input_schema["properties"]) == {"a", "b"}
        result = await client.call_tool("add", {"a": 2, "b": 40})
        assert not result.is_error
        assert isinstance(result.content[0], TextContent) and result.content[0].text == "42.0"
        echoed = await client.call_tool("echo", {"text": "héllo ✓"})
        assert echoed.content[0].text == "héllo ✓"


@pytest.mark.parametrize("mode", MODES)
async def test_progress_notifications_reach_the_client(demo_host: Host, mode: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with mcp_client(demo_host.url, demo_host.key, mode) as client:
        result = await client.call_tool("countdown", {"start": 3}, progress_callback=on_progress)
    assert result.content[0].text == "lift-off"
    assert seen == [(0.0, 3.0, "3 left"), (1.0, 3.0, "2 left"), (2.0, 3.0, "1 left")]


@pytest.mark.parametrize("mode", MODES)
async def test_resources_and_prompts(demo_host: Host, mode: str) -> None:
    async with mcp_client(demo_host.url, demo_host.key, mode) as client:
        resources = await client.list_resources()
        assert [str(r.uri) for r in resources.resources] == ["demo://readme"]
        read = await client.read_resource("demo://readme")
        assert read.contents[0].text.startswith("# Demo")
        prompts = await client.list_prompts()
        assert [p.name for p in prompts.prompts] == ["greet"]
        prompt = await client.get_prompt("greet", {"name": "Ada"})
        assert prompt.messages[0].content.text == "Say hello to Ada in one short sentence."


@pytest.mark.parametrize("mode", MODES)
async def test_tool_errors_stay_in_band(demo_host: Host, mode: str) -> None:
    async with mcp_client(demo_host.url, demo_host.key, mode) as client:
        result = await client.call_tool("add", {"a": "not a number", "b": 1})
    assert result.is_error


@pytest.mark.parametrize("mode", MODES)
async def test_the_host_answers_at_its_url_spelled_with_mcp_at_the_end(demo_host: Host, mode: str) -> None:
    async with mcp_client(f"{demo_host.url}/mcp", demo_host.key, mode) as client:
        assert (await client.call_tool("add", {"a": 1, "b": 2})).content[0].text == "3.0"
    for wrong in ("/mcpx", "/mcp/mcp", "/tools"):
        answer = httpx.post(f"{demo_host.url}{wrong}", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                            headers={"Authorization": f"Bearer {demo_host.key}"})
        assert answer.status_code == 404, wrong
