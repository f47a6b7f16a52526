"""Backends that speak only HTTP+SSE (2024-11-05), behind the gateway: clients of every era and
transport reach them, and a session's requests may land on any gateway instance while the
backend's event stream stays on the one that opened it."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from channels.db import database_sync_to_async
from mcp_types import CreateMessageResult, TextContent

from tests import factories
from tests.conftest import Host, make_host, mcp_client
from tests.gateway.helpers import message_of, modern, open_session, post
from tests.gateway.test_http_sse import PostsElsewhere, sse_session
from tests.processes import backend_argv, free_port, running

pytestmark = pytest.mark.slow


@pytest.fixture
def sse_host(transactional_db: None, gateway_url: str, sse_backend_url: str) -> Host:
    tenant = factories.tenant_factory()
    issued = factories.api_key_factory(tenant=tenant)
    backend = factories.backend_factory(tenant=tenant, urls=[sse_backend_url], transport="sse")
    host = factories.virtual_host_factory(tenant=tenant, mounts={"old": backend})
    return Host(f"{gateway_url}/mcp/{tenant.slug}/{host.slug}", issued.secret, tenant.slug, host.slug)


def _text(message: dict[str, Any]) -> str:
    return message["result"]["content"][0]["text"]


async def test_a_streamable_http_session_client_reaches_an_sse_backend(sse_host: Host) -> None:
    asked: list[str] = []
    progress: list[float] = []

    async def sample(context: object, params: Any) -> CreateMessageResult:
        asked.append(params.messages[0].content.text)
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text="sampled!"), model="m")

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with mcp_client(sse_host.url, sse_host.key, "legacy", sampling_callback=sample) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "test_simple_text" in names
        assert "test" in (await client.call_tool("test_simple_text", {})).content[0].text
        sampled = await client.call_tool("test_sampling", {"prompt": "What is 2+2?"})
        with_progress = await client.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
    assert asked == ["What is 2+2?"] and "sampled!" in sampled.content[0].text
    assert not with_progress.is_error and progress == [0, 50, 100]


async def test_list_changed_of_an_sse_backend_reaches_the_get_stream(sse_host: Host) -> None:
    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            changed.set()

    async with mcp_client(sse_host.url, sse_host.key, "legacy", message_handler=on_message) as client:
        await client.list_tools()
        await anyio.sleep(0.5)  # the client opens its GET stream after the handshake
        await client.call_tool("test_trigger_tool_change", {})
        with anyio.fail_after(10):
            await changed.wait()


def test_a_stateless_client_reaches_an_sse_backend(sse_host: Host) -> None:
    for request_id in (1, 2):
        response = modern(sse_host.url, "tools/call", {"name": "test_simple_text", "arguments": {}},
                          key=sse_host.key, request_id=request_id)
        message = message_of(response)
        assert message["id"] == request_id and "test" in _text(message)


async def test_an_sse_client_reaches_an_sse_backend(sse_host: Host) -> None:
    async with sse_session(sse_host) as client:
        assert "test" in (await client.call_tool("test_simple_text", {})).content[0].text


def test_a_session_goes_on_from_any_instance_while_one_holds_the_backend_stream(
    sse_host: Host, gateway_url: str, second_gateway_url: str
) -> None:
    other = sse_host.url.replace(gateway_url, second_gateway_url)
    session = open_session(sse_host.url, sse_host.key)
    headers = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    for request_id in range(1, 7):
        url = (sse_host.url, other)[request_id % 2]
        body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                "params": {"name": "test_simple_text", "arguments": {}}}
        response = post(url, body, key=sse_host.key, headers=headers)
        assert response.status_code == 200, response.text
        message = message_of(response)
        assert message["id"] == request_id and "test" in _text(message)


async def test_an_sse_client_posting_to_other_instances_reaches_an_sse_backend(
    sse_host: Host, second_gateway_url: str
) -> None:
    """Both relays at once: the POSTs land on instance B, the client's stream is on A, and the
    backend's stream on whichever instance opened the backend session."""
    elsewhere = PostsElsewhere(int(second_gateway_url.rsplit(":", 1)[1]))
    async with sse_session(sse_host, transport=elsewhere) as client:
        for _ in range(3):
            assert "test" in (await client.call_tool("test_simple_text", {})).content[0].text
    assert elsewhere.posts >= 5


async def test_an_sse_client_reaches_a_backend_of_the_stateless_era_only(
    transactional_db: None, gateway_url: str
) -> None:
    port = free_port()
    argv = [*backend_argv("tests.backends.era_server", port), "--era", "modern"]
    with running(argv, port, log_name="modern-only-backend"):
        host = await database_sync_to_async(make_host)(gateway_url, f"http://127.0.0.1:{port}/mcp")
        async with sse_session(host) as client:
            assert (await client.call_tool("add", {"a": 2, "b": 5})).content[0].text == "7.0"


async def test_a_stateless_client_is_asked_for_input_by_an_sse_backend(sse_host: Host) -> None:
    """The backend's sampling request becomes an InputRequiredResult, answered by the SDK's retry."""

    async def sample(context: object, params: Any) -> CreateMessageResult:
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text="sampled!"), model="m")

    async with mcp_client(sse_host.url, sse_host.key, "auto", sampling_callback=sample) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("test_sampling", {"prompt": "What is 2+2?"})
    assert not result.is_error and "sampled!" in result.content[0].text
