"""Clients of either era with backends that speak only one: the gateway bridges both ways."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from channels.db import database_sync_to_async

from tests.conftest import make_host, mcp_client
from tests.gateway.helpers import message_of, modern, open_session, post
from tests.processes import backend_argv, free_port, running

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=["legacy", "modern"])
def single_era_backend(request: pytest.FixtureRequest) -> Iterator[str]:
    port = free_port()
    argv = [*backend_argv("tests.backends.era_server", port), "--era", request.param]
    with running(argv, port, log_name=f"{request.param}-only-backend"):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28", "auto"])
async def test_every_client_mode_with_a_single_era_backend(
    transactional_db: None, gateway_url: str, single_era_backend: str, mode: str
) -> None:
    host = await database_sync_to_async(make_host)(gateway_url, single_era_backend)
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with mcp_client(host.url, host.key, mode) as client:
        tools = await client.list_tools()
        assert [tool.name for tool in tools.tools] == ["add", "echo", "utc_now", "countdown"]
        assert (await client.call_tool("add", {"a": 20, "b": 22})).content[0].text == "42.0"
        result = await client.call_tool("countdown", {"start": 2}, progress_callback=on_progress)
        assert result.content[0].text == "lift-off" and progress == [0.0, 1.0]
        read = await client.read_resource("demo://readme")
        assert read.contents[0].text.startswith("# Demo")


def test_stateless_lists_from_a_legacy_backend_carry_cache_hints(
    transactional_db: None, gateway_url: str, single_era_backend: str
) -> None:
    host = make_host(gateway_url, single_era_backend)
    for method in ("tools/list", "resources/list", "prompts/list"):
        result = message_of(modern(host.url, method, key=host.key))["result"]
        assert result["ttlMs"] >= 0 and result["cacheScope"] in {"public", "private"}
        assert result["resultType"] == "complete"


def test_legacy_sessions_with_a_modern_only_backend_open_no_backend_session(
    transactional_db: None, gateway_url: str, single_era_backend: str
) -> None:
    host = make_host(gateway_url, single_era_backend)
    session = open_session(host.url, host.key)
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}}
    response = post(host.url, body, key=host.key, headers={"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"})
    assert message_of(response)["result"]["content"][0]["text"] == "hi"
