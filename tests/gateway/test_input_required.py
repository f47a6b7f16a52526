"""A backend of the handshake era asks for input mid-call (sampling, elicitation); a client of the
stateless era gets an `InputRequiredResult`, answers by retrying (the official SDK does it by
itself), and the backend's call goes on — whichever gateway instance the retry lands on."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from channels.db import database_sync_to_async
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CreateMessageResult, ElicitResult, TextContent

from tests.conftest import Host, make_host
from tests.gateway.helpers import message_of, modern
from tests.processes import backend_argv, free_port, running

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def legacy_backend() -> Iterator[str]:
    """The conformance fixture, refusing the stateless era as servers before 2026 do."""
    port = free_port()
    argv = [*backend_argv("tests.backends.era_server", port), "--era", "legacy", "--server", "conformance"]
    with running(argv, port, log_name="legacy-conformance-backend"):
        yield f"http://127.0.0.1:{port}/mcp"




class _RetriesElsewhere(httpx2.AsyncBaseTransport):
    """Sends the retries (requests that carry a requestState) to another gateway instance."""

    def __init__(self, port: int) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._port = port
        self.moved = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = request.read() if request.method == "POST" else b""
        if b'"requestState"' in body:
            request.url = request.url.copy_with(port=self._port)
            self.moved += 1
        return await self._inner.handle_async_request(request)


async def _sample(context: object, params: Any) -> CreateMessageResult:
    return CreateMessageResult(role="assistant", content=TextContent(type="text", text=f"sampled: {params.messages[0].content.text}"), model="m")


@pytest.mark.parametrize("retry_elsewhere", [False, True])
async def test_sampling_of_a_legacy_backend_reaches_a_stateless_client(
    transactional_db: None, gateway_url: str, second_gateway_url: str, legacy_backend: str, retry_elsewhere: bool
) -> None:
    host = await database_sync_to_async(make_host)(gateway_url, legacy_backend)
    transport = _RetriesElsewhere(int(second_gateway_url.rsplit(":", 1)[1])) if retry_elsewhere else None
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {host.key}"}, timeout=30, transport=transport) as http:
        async with Client(streamable_http_client(host.url, http_client=http), mode="auto", sampling_callback=_sample) as client:
            assert client.protocol_version == "2026-07-28"
            result = await client.call_tool("test_sampling", {"prompt": "What is 2+2?"})
    assert not result.is_error and "sampled: What is 2+2?" in result.content[0].text
    assert transport is None or transport.moved == 1


async def test_elicitation_too(transactional_db: None, gateway_url: str, legacy_backend: str) -> None:
    host = await database_sync_to_async(make_host)(gateway_url, legacy_backend)

    async def elicit(context: object, params: Any) -> ElicitResult:
        return ElicitResult(action="accept", content={"username": "ada", "email": "ada@example.com"})

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {host.key}"}, timeout=30) as http:
        async with Client(streamable_http_client(host.url, http_client=http), mode="auto", elicitation_callback=elicit) as client:
            result = await client.call_tool("test_elicitation", {"message": "Who are you?"})
    assert not result.is_error and "ada" in result.content[0].text


def test_a_request_state_nobody_holds_is_a_clear_error(transactional_db: None, gateway_url: str, legacy_backend: str) -> None:
    host: Host = make_host(gateway_url, legacy_backend)
    params = {"name": "test_sampling", "arguments": {"prompt": "x"}, "requestState": "gw-input.nothing-waits-here",
              "inputResponses": {"nothing-waits-here": {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"}}}
    message = message_of(modern(host.url, "tools/call", params, key=host.key))
    assert message["error"]["code"] == -32602 and "requestState" in message["error"]["message"]
