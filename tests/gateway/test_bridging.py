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


def test_stateless_callers_sharing_a_key_do_not_mix_up_answers(
    transactional_db: None, gateway_url: str, single_era_backend: str
) -> None:
    """Many callers with one key and the same request id at once: each gets its own answer."""
    from concurrent.futures import ThreadPoolExecutor

    host = make_host(gateway_url, single_era_backend)

    def call(n: int) -> str:
        response = modern(host.url, "tools/call", {"name": "echo", "arguments": {"text": f"caller-{n}"}},
                          key=host.key, request_id=1)
        message = message_of(response)
        assert message["id"] == 1
        return message["result"]["content"][0]["text"]

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(call, range(24))) == [f"caller-{n}" for n in range(24)]


def test_progress_tokens_come_back_as_the_client_sent_them(
    transactional_db: None, gateway_url: str, single_era_backend: str
) -> None:
    from tests.gateway.helpers import META

    host = make_host(gateway_url, single_era_backend)
    body = {"jsonrpc": "2.0", "id": "req-7", "method": "tools/call",
            "params": {"name": "countdown", "arguments": {"start": 2}, "_meta": {**META, "progressToken": "tok-1"}}}
    response = post(host.url, body, key=host.key, headers={
        "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "countdown"})
    events = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    import json

    messages = [json.loads(e) for e in events if e]
    tokens = {m["params"]["progressToken"] for m in messages if m.get("method") == "notifications/progress"}
    assert tokens == {"tok-1"}
    assert messages[-1]["id"] == "req-7" and messages[-1]["result"]["content"][0]["text"] == "lift-off"
