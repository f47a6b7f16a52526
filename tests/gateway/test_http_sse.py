"""Downstream HTTP+SSE (2024-11-05): the official SDK's SSE client works through the gateway, its
POSTs may land on another instance than its stream, and a broken stream is opened again on any
instance with the session going on."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from channels.db import database_sync_to_async
from mcp import Client
from mcp.client.sse import sse_client
from mcp_types import CreateMessageResult, TextContent

from tests.conftest import Host, make_host
from tests.gateway.helpers import modern
from tests.processes import backend_argv, free_port, running

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def counting_backend() -> Iterator[str]:
    port = free_port()
    with running(backend_argv("tests.backends.counting_server", port), port, log_name="sse-counting-backend"):
        yield f"http://127.0.0.1:{port}"




class PostsElsewhere(httpx2.AsyncBaseTransport):
    """Sends the client's POSTs to another gateway instance than its event stream, as a round-robin
    load balancer would; counts them."""

    def __init__(self, port: int) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._port = port
        self.posts = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "POST":
            request.url = request.url.copy_with(port=self._port)
            self.posts += 1
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@contextlib.asynccontextmanager
async def sse_session(host: Host, *, transport: httpx2.AsyncBaseTransport | None = None, **options: Any) -> AsyncIterator[Client]:
    def factory(headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(headers=headers, timeout=timeout, auth=auth, transport=transport)

    stream = sse_client(f"{host.url}/sse", headers={"Authorization": f"Bearer {host.key}"}, httpx_client_factory=factory)
    async with Client(stream, mode="legacy", **options) as client:
        yield client


async def test_the_sdk_sse_client_lists_and_calls_tools(transactional_db: None, gateway_url: str, demo_backend_url: str) -> None:
    host = await database_sync_to_async(make_host)(gateway_url, demo_backend_url)
    async with sse_session(host) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        result = await client.call_tool("add", {"a": 2, "b": 3})
    assert {"add", "countdown"} <= tools
    assert result.content[0].text == "5.0"


async def test_posts_on_another_instance_are_answered_on_the_stream(
    transactional_db: None, gateway_url: str, second_gateway_url: str, counting_backend: str
) -> None:
    """Every POST lands on instance B, the stream lives on A: B's answers are relayed to A."""
    host = await database_sync_to_async(make_host)(gateway_url, f"{counting_backend}/mcp")
    elsewhere = PostsElsewhere(int(second_gateway_url.rsplit(":", 1)[1]))
    async with sse_session(host, transport=elsewhere) as client:
        assert (await client.call_tool("add", {"a": 0, "b": 1})).content[0].text == "1.0"
        before = httpx.get(f"{counting_backend}/stats").json()
        for i in range(1, 5):
            assert (await client.call_tool("add", {"a": i, "b": 1})).content[0].text == f"{i + 1.0}"
    after = httpx.get(f"{counting_backend}/stats").json()
    assert elsewhere.posts >= 7  # initialize, initialized, five calls
    assert after["initialize"] == before["initialize"]  # the backend session is reused
    assert after["methods"]["tools/call"] - before["methods"]["tools/call"] == 4


async def test_a_sampling_request_reaches_the_client_and_its_answer_the_backend(
    transactional_db: None, gateway_url: str, second_gateway_url: str
) -> None:
    port = free_port()
    with running(backend_argv("tests.backends.conformance_server", port), port, log_name="sse-sampling-backend"):
        host = await database_sync_to_async(make_host)(gateway_url, f"http://127.0.0.1:{port}/mcp")
        asked: list[str] = []

        async def sample(context: object, params: Any) -> CreateMessageResult:
            asked.append(params.messages[0].content.text)
            return CreateMessageResult(role="assistant", content=TextContent(type="text", text="sampled!"), model="m")

        elsewhere = PostsElsewhere(int(second_gateway_url.rsplit(":", 1)[1]))
        async with sse_session(host, transport=elsewhere, sampling_callback=sample) as client:
            result = await client.call_tool("test_sampling", {"prompt": "What is 2+2?"})
    assert asked == ["What is 2+2?"]
    assert "sampled!" in result.content[0].text


@pytest.mark.parametrize("posts", ["to the stream's instance", "elsewhere"])
async def test_list_changed_reaches_the_sse_client(transactional_db: None, gateway_url: str, second_gateway_url: str,
                                                   posts: str) -> None:
    """Notifications outside any request come from the backend's own stream, relayed by the
    instance that holds the client's event stream, also when the handshake was POSTed to another
    instance (the stream's instance then holds a copy of the session made before it)."""
    transport = PostsElsewhere(int(second_gateway_url.rsplit(":", 1)[1])) if posts == "elsewhere" else None
    port = free_port()
    with running(backend_argv("tests.backends.conformance_server", port), port, log_name="sse-list-changed"):
        host = await database_sync_to_async(make_host)(gateway_url, f"http://127.0.0.1:{port}/mcp")
        changed = anyio.Event()

        async def on_message(message: object) -> None:
            if getattr(message, "method", None) == "notifications/tools/list_changed":
                changed.set()

        async with sse_session(host, transport=transport, message_handler=on_message) as client:
            await client.list_tools()
            await anyio.sleep(0.5)  # the backend stream opens once the client is initialized
            await client.call_tool("test_trigger_tool_change", {})
            with anyio.fail_after(10):
                await changed.wait()


class _Stream:
    """A raw HTTP+SSE event stream read event by event."""

    def __init__(self, response: httpx.Response) -> None:
        self._lines = response.iter_lines()

    def next_event(self) -> tuple[str, str]:
        event, data = "message", []
        for line in self._lines:
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
            elif not line and data:
                return event, "\n".join(data)
        raise AssertionError("the stream ended")


def _post(base: str, endpoint: str, key: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{base}{endpoint}", json=body, headers={"authorization": f"Bearer {key}"})


def test_a_broken_stream_reopens_on_another_instance_and_the_session_goes_on(
    transactional_db: None, gateway_url: str, second_gateway_url: str, counting_backend: str
) -> None:
    host = make_host(gateway_url, f"{counting_backend}/mcp")
    auth = {"authorization": f"Bearer {host.key}"}
    path = host.url.removeprefix(gateway_url)
    with httpx.stream("GET", f"{host.url}/sse", headers=auth, timeout=10) as response:
        assert response.status_code == 200
        stream = _Stream(response)
        kind, endpoint = stream.next_event()
        assert kind == "endpoint" and endpoint.startswith(f"{path}/messages?session_id=")
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}
        assert _post(gateway_url, endpoint, host.key, initialize).status_code == 202
        assert json.loads(stream.next_event()[1])["result"]["protocolVersion"] == "2024-11-05"
        _post(gateway_url, endpoint, host.key, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 1}}}
        assert _post(gateway_url, endpoint, host.key, call).status_code == 202
        assert json.loads(stream.next_event()[1])["result"]["content"][0]["text"] == "2.0"
    modern(f"{second_gateway_url}{path}", "tools/list", key=host.key)  # instance B probes the backend once
    initializes = httpx.get(f"{counting_backend}/stats").json()["initialize"]
    session_id = endpoint.rsplit("=", 1)[1]
    # The stream's instance is gone as far as the client knows: it opens the stream elsewhere.
    with httpx.stream("GET", f"{second_gateway_url}{path}/sse?session_id={session_id}", headers=auth, timeout=10) as response:
        assert response.status_code == 200
        stream = _Stream(response)
        assert stream.next_event() == ("endpoint", endpoint)
        call["id"] = 3
        assert _post(gateway_url, endpoint, host.key, call).status_code == 202
        answer = json.loads(stream.next_event()[1])
        assert answer["id"] == 3 and answer["result"]["content"][0]["text"] == "2.0"
    assert httpx.get(f"{counting_backend}/stats").json()["initialize"] == initializes  # same backend session


def test_bad_requests_get_clear_errors(transactional_db: None, gateway_url: str, demo_backend_url: str) -> None:
    host = make_host(gateway_url, demo_backend_url)
    other = make_host(gateway_url, demo_backend_url)
    auth = {"authorization": f"Bearer {host.key}"}
    with httpx.stream("GET", f"{host.url}/sse", headers=auth, timeout=10) as response:
        stream = _Stream(response)
        endpoint = stream.next_event()[1]
        messages = f"{host.url}/messages"
        listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        assert httpx.post(messages, json=listing, headers=auth).status_code == 400  # no session_id
        unknown = httpx.post(f"{messages}?session_id=nope", json=listing, headers=auth)
        assert unknown.status_code == 404
        # Before initialize, nothing but initialize: a request is told so on the stream, like every
        # answer of this transport; a 2026-07-28 client's probe learns there is no server/discover.
        assert _post(gateway_url, endpoint, host.key, listing).status_code == 202
        early = json.loads(stream.next_event()[1])
        assert early["id"] == 1 and early["error"]["code"] == -32600 and "initialize" in early["error"]["message"]
        probe = {"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": {}}
        assert _post(gateway_url, endpoint, host.key, probe).status_code == 202
        assert json.loads(stream.next_event()[1])["error"] == {"code": -32601, "message": "Method not found: server/discover"}
        notice = {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}
        assert _post(gateway_url, endpoint, host.key, notice).status_code == 400  # nothing to answer it on
        # Another tenant's key cannot use the session, even on its own host's path.
        assert _post(gateway_url, endpoint, other.key, listing).status_code in {401, 404}
        broken = httpx.post(f"{gateway_url}{endpoint}", content=b"{not json", headers={**auth, "content-type": "application/json"})
        assert broken.status_code == 400 and broken.json()["error"]["code"] == -32700
        batch = httpx.post(f"{gateway_url}{endpoint}", json=[listing], headers=auth)
        assert batch.status_code == 400
        assert httpx.delete(f"{host.url}/sse", headers=auth).status_code == 405
        assert httpx.get(messages, headers=auth).status_code == 405
    assert httpx.get(f"{host.url}/sse").status_code == 401


async def test_an_sdk_client_reopening_its_session_on_another_instance_keeps_the_backend_state(
    transactional_db: None, gateway_url: str, second_gateway_url: str
) -> None:
    """What a client does when the instance holding its stream dies: it opens the stream again with
    its session id, anywhere, and starts over with `initialize`; the backend session, and the
    state the backend keeps in it, carry on."""
    port = free_port()
    argv = [*backend_argv("tests.backends.replica_server", port), "--replica", "only"]
    with running(argv, port, log_name="sse-stateful-backend"):
        host = await database_sync_to_async(make_host)(gateway_url, f"http://127.0.0.1:{port}/mcp")
        created: list[str] = []
        auth = {"Authorization": f"Bearer {host.key}"}
        async with Client(sse_client(f"{host.url}/sse", headers=auth, on_session_created=created.append), mode="legacy") as client:
            counts = [json.loads((await client.call_tool("increment", {})).content[0].text)["count"] for _ in range(2)]
        elsewhere = host.url.replace(gateway_url, second_gateway_url)
        async with Client(sse_client(f"{elsewhere}/sse?session_id={created[0]}", headers=auth), mode="legacy") as client:
            counts += [json.loads((await client.call_tool("increment", {})).content[0].text)["count"] for _ in range(2)]
    assert counts == [1, 2, 3, 4]


async def test_a_call_whose_backend_ends_its_stream_mid_call_is_answered_on_the_sse_stream(
    transactional_db: None, gateway_url: str
) -> None:
    """SSE polling (2025-11-25): the backend closes the call's stream after its priming event and
    answers on the stream resumed with Last-Event-ID. An HTTP+SSE client cannot resume anything: the
    gateway does, and the answer reaches the client's one event stream."""
    port = free_port()
    with running(backend_argv("tests.backends.conformance_server", port), port, log_name="sse-polling-backend"):
        host = await database_sync_to_async(make_host)(gateway_url, f"http://127.0.0.1:{port}/mcp")
        async with sse_session(host) as client:
            result = await client.call_tool("test_reconnection", {})
    assert result.content[0].text == "Reconnection test completed" and not result.is_error
