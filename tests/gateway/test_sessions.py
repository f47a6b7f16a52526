"""Legacy sessions: backend sessions are opened once and reused, DELETE ends both ends, the GET
stream and server→client requests reach the client, and any gateway instance serves any session."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from django.conf import settings
from mcp_types import CreateMessageResult, TextContent

from tests.audit.helpers import audit_rows
from tests.conftest import Host, make_composed_host, make_host, mcp_client
from tests.gateway.helpers import message_of, modern, open_session, post
from tests.processes import backend_argv, free_port, gateway_argv, gateway_env, running

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def counting_backend() -> Iterator[str]:
    port = free_port()
    with running(backend_argv("tests.backends.counting_server", port), port, log_name="counting-backend"):
        yield f"http://127.0.0.1:{port}"


def _stats(base: str) -> dict[str, int]:
    return httpx.get(f"{base}/stats").json()


def _call(host: Host, session: str, request_id: int) -> dict[str, object]:
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "add", "arguments": {"a": request_id, "b": 1}}}
    response = post(host.url, body, key=host.key, headers={"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"})
    assert response.status_code == 200
    return message_of(response)


def test_backend_session_is_opened_once_and_reused(transactional_db: None, gateway_url: str, counting_backend: str) -> None:
    host = make_host(gateway_url, f"{counting_backend}/mcp")
    session = open_session(host.url, host.key)
    before = _stats(counting_backend)
    for i in range(10):
        assert _call(host, session, i)["result"]["content"][0]["text"] == f"{i + 1.0}"
    after = _stats(counting_backend)
    assert after["initialize"] - before["initialize"] == 1  # one backend session for ten calls
    assert after["methods"]["tools/call"] - before["methods"].get("tools/call", 0) == 10
    # The upstream connections are pooled too: ten calls did not open ten connections.
    assert after["connections"] - before["connections"] <= 2


def test_stateless_calls_open_no_backend_session(transactional_db: None, gateway_url: str, counting_backend: str) -> None:
    host = make_host(gateway_url, f"{counting_backend}/mcp")
    modern(host.url, "tools/list", key=host.key)  # the first request probes the backend
    before = _stats(counting_backend)
    for i in range(5):
        response = modern(host.url, "tools/call", {"name": "add", "arguments": {"a": i, "b": 1}}, key=host.key)
        assert message_of(response)["result"]["content"][0]["text"] == f"{i + 1.0}"
    after = _stats(counting_backend)
    assert after["initialize"] == before["initialize"]
    assert after["posts"] - before["posts"] == 5


def test_delete_ends_the_session_here_and_at_the_backend(transactional_db: None, gateway_url: str, counting_backend: str) -> None:
    host = make_host(gateway_url, f"{counting_backend}/mcp")
    session = open_session(host.url, host.key)
    _call(host, session, 1)
    deletes = _stats(counting_backend).get("deletes", 0)
    response = httpx.delete(host.url, headers={"authorization": f"Bearer {host.key}", "mcp-session-id": session})
    assert response.status_code == 200
    assert _stats(counting_backend)["deletes"] == deletes + 1
    again = post(host.url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, key=host.key,
                 headers={"mcp-session-id": session})
    assert again.status_code == 404


def test_another_gateway_instance_continues_the_session(transactional_db: None, gateway_url: str, counting_backend: str) -> None:
    host = make_host(gateway_url, f"{counting_backend}/mcp")
    session = open_session(host.url, host.key)
    _call(host, session, 1)
    port = free_port()
    env = gateway_env(settings.DATABASES["default"]["NAME"], settings.REDIS_URL, GATEWAY_INSTANCE_ID="gw-second")
    with running(gateway_argv(port), port, env=env, log_name="gateway-second"):
        second = Host(host.url.replace(gateway_url, f"http://127.0.0.1:{port}"), host.key, host.tenant, host.slug)
        modern(second.url, "tools/list", key=host.key)  # the new instance probes the backend once
        initializes = _stats(counting_backend)["initialize"]
        assert _call(second, session, 5)["result"]["content"][0]["text"] == "6.0"
        # Same backend session: the second instance found it in the shared session store.
        assert _stats(counting_backend)["initialize"] == initializes


async def test_sampling_request_is_relayed_to_the_client(transactional_db: None, gateway_url: str) -> None:
    """A backend asks the client to sample mid-call; the request reaches the client through the
    gateway and the client's answer goes back to the backend."""
    from channels.db import database_sync_to_async

    port = free_port()
    with running(backend_argv("tests.backends.conformance_server", port), port, log_name="sampling-backend"):
        host = await database_sync_to_async(make_host)(gateway_url, f"http://127.0.0.1:{port}/mcp")
        asked: list[str] = []

        async def sample(context: object, params: object) -> CreateMessageResult:
            asked.append(params.messages[0].content.text)  # type: ignore[attr-defined]
            return CreateMessageResult(role="assistant", content=TextContent(type="text", text="sampled!"), model="m")

        async with mcp_client(host.url, host.key, "legacy", sampling_callback=sample) as client:
            result = await client.call_tool("test_sampling", {"prompt": "What is 2+2?"})
        assert asked == ["What is 2+2?"]
        assert "sampled!" in result.content[0].text


def test_a_client_that_accepts_only_json_gets_json(demo_host: Host) -> None:
    """The backend streams progress before its response; a JSON-only client gets the response alone."""
    session = open_session(demo_host.url, demo_host.key)
    body = {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
            "params": {"name": "countdown", "arguments": {"start": 2}, "_meta": {"progressToken": "p1"}}}
    response = post(demo_host.url, body, key=demo_host.key,
                    headers={"mcp-session-id": session, "accept": "application/json"})
    assert response.headers["content-type"] == "application/json"
    assert response.json()["result"]["content"][0]["text"] == "lift-off"


async def test_list_changed_arrives_on_the_get_stream(transactional_db: None, gateway_url: str) -> None:
    """Notifications that belong to no request reach the client on the session's GET stream."""
    import anyio
    from channels.db import database_sync_to_async

    port = free_port()
    with running(backend_argv("tests.backends.conformance_server", port), port, log_name="list-changed-backend"):
        host = await database_sync_to_async(make_host)(gateway_url, f"http://127.0.0.1:{port}/mcp")
        changed = anyio.Event()

        async def on_message(message: object) -> None:
            if getattr(message, "method", None) == "notifications/tools/list_changed":
                changed.set()

        async with mcp_client(host.url, host.key, "legacy", message_handler=on_message) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            await client.call_tool("test_trigger_tool_change", {})
            with anyio.fail_after(10):
                await changed.wait()
            after = {tool.name for tool in (await client.list_tools()).tools}
        assert names ^ after == {"test_dynamic_tool"}


def test_a_restarted_backend_gets_a_new_backend_session_transparently(transactional_db: None, gateway_url: str) -> None:
    """The backend forgets every session when it restarts; the client's session carries on."""
    port = free_port()
    host = make_host(gateway_url, f"http://127.0.0.1:{port}/mcp")
    with running(backend_argv("tests.backends.counting_server", port), port, log_name="restarting-backend"):
        session = open_session(host.url, host.key)
        assert _call(host, session, 1)["result"]["content"][0]["text"] == "2.0"
    with running(backend_argv("tests.backends.counting_server", port), port, log_name="restarting-backend"):
        time.sleep(0.2)
        assert _call(host, session, 2)["result"]["content"][0]["text"] == "3.0"
        assert _stats(f"http://127.0.0.1:{port}")["initialize"] == 1  # a new backend session, once


def test_first_calls_on_two_instances_at_once_open_one_backend_session(
    transactional_db: None, gateway_url: str, counting_backend: str
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    host = make_host(gateway_url, f"{counting_backend}/mcp")
    port = free_port()
    env = gateway_env(settings.DATABASES["default"]["NAME"], settings.REDIS_URL, GATEWAY_INSTANCE_ID="gw-race")
    with running(gateway_argv(port), port, env=env, log_name="gateway-race"):
        second = Host(host.url.replace(gateway_url, f"http://127.0.0.1:{port}"), host.key, host.tenant, host.slug)
        for instance in (host, second):
            modern(instance.url, "tools/list", key=host.key)  # each instance probes the backend once
        for attempt in range(3):
            session = open_session(host.url, host.key)
            before = _stats(counting_backend)["initialize"]
            with ThreadPoolExecutor(6) as pool:
                results = list(pool.map(lambda i, s=session: _call((host, second)[i % 2], s, i), range(6)))
            assert [r["result"]["content"][0]["text"] for r in results] == [f"{i + 1.0}" for i in range(6)]
            assert _stats(counting_backend)["initialize"] - before == 1, f"attempt {attempt}"


def test_a_session_idle_past_its_expiry_ends_here_and_at_the_backend(
    transactional_db: None, gateway_url: str, counting_backend: str
) -> None:
    port = free_port()
    env = gateway_env(settings.DATABASES["default"]["NAME"], settings.REDIS_URL, GATEWAY_INSTANCE_ID="gw-expiry",
                      GATEWAY_SESSION_TTL_SECONDS="1", GATEWAY_SESSION_SWEEP_SECONDS="0.2")
    with running(gateway_argv(port), port, env=env, log_name="gateway-expiry"):
        host = make_host(f"http://127.0.0.1:{port}", f"{counting_backend}/mcp")
        session = open_session(host.url, host.key)
        _call(host, session, 1)  # the backend session is open now
        deletes = _stats(counting_backend).get("deletes", 0)
        deadline = time.monotonic() + 10
        while _stats(counting_backend).get("deletes", 0) == deletes and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _stats(counting_backend)["deletes"] == deletes + 1  # closed by the sweep
        again = post(host.url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, key=host.key,
                     headers={"mcp-session-id": session})
        assert again.status_code == 404


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream"])
def test_a_call_whose_backend_ends_its_stream_mid_call_is_answered_whole(
    transactional_db: None, gateway_url: str, demo_backend_url: str, accept: str
) -> None:
    """SSE polling (2025-11-25): the backend closes the call's stream after its priming event; the
    gateway resumes it in the backend session (GET with Last-Event-ID), so a client that takes only
    JSON gets the answer, and one that takes SSE reads it on the same stream — on a host with one
    backend and on one with several. The audit row has the call's outcome."""
    port = free_port()
    with running(backend_argv("tests.backends.conformance_server", port), port, log_name="polling-backend"):
        url = f"http://127.0.0.1:{port}/mcp"
        for host, tool in ((make_host(gateway_url, url), "test_reconnection"),
                           (make_composed_host(gateway_url, {"fx": url, "demo": demo_backend_url}), "fx-test_reconnection")):
            session = open_session(host.url, host.key)
            body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": tool, "arguments": {}}}
            answer = post(host.url, body, key=host.key, headers={
                "mcp-session-id": session, "mcp-protocol-version": "2025-11-25", "accept": accept})
            assert answer.headers["content-type"].startswith(accept)
            assert message_of(answer)["result"]["content"][0]["text"] == "Reconnection test completed"
            assert [row.outcome for row in audit_rows(host.tenant, 1)] == ["ok"]
