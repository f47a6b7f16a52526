"""Resource limits end to end, through a gateway under Daphne to a real MCP backend
(tests/backends/slow_server.py): the response cap, per-backend concurrency limits with their
queue timeout, and the backend timeout on the answer's head and on a stream gone silent."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.conf import settings

from tests.audit.helpers import audit_rows
from tests.gateway.helpers import ACCEPT, message_of, open_session, post
from tests.gateway.slow import call, slow_host, text_of
from tests.processes import free_port, gateway_argv, gateway_env, running

pytestmark = pytest.mark.slow

CAP = 64 * 1024
QUEUE_SECONDS = 1.0


@pytest.fixture(scope="module")
def limits_gateway_url(django_db_setup: None, django_db_blocker: object) -> Iterator[str]:
    """A gateway with small body and response caps and a short queue timeout."""
    port = free_port()
    env = gateway_env(
        settings.DATABASES["default"]["NAME"], settings.REDIS_URL, GATEWAY_INSTANCE_ID="gw-limits",
        GATEWAY_UPSTREAM_MAX_RESPONSE_BYTES=str(CAP), GATEWAY_BACKEND_QUEUE_SECONDS=str(QUEUE_SECONDS),
        GATEWAY_MAX_BODY_BYTES=str(CAP),
    )
    with running(gateway_argv(port), port, env=env, log_name="gateway-limits"):
        yield f"http://127.0.0.1:{port}"


def test_a_response_over_the_cap_is_a_backend_error_naming_the_cap_and_nothing_else_breaks(
    transactional_db: None, limits_gateway_url: str, slow_backend_url: str
) -> None:
    host = slow_host(limits_gateway_url, slow_backend_url)
    refused = call(host, "big", {"size": 2 * CAP})
    assert refused["error"]["code"] == -32004 and refused["error"]["data"] == {"backend": "slow"}
    assert f"over {CAP:,} bytes, the gateway's limit" in refused["error"]["message"]
    assert len(text_of(call(host, "big", {"size": CAP // 4}))) == CAP // 4
    rows = audit_rows(host.tenant, 2)
    assert [(row.outcome, row.error_code) for row in rows] == [("error", -32004), ("ok", None)]


def test_calls_over_the_concurrency_limit_wait_for_a_slot_then_fail_as_busy(
    transactional_db: None, limits_gateway_url: str, slow_backend_url: str
) -> None:
    host = slow_host(limits_gateway_url, slow_backend_url, max_concurrency=2)
    call(host, "most_at_once", {})  # reset the backend's count
    with ThreadPoolExecutor(3) as pool:
        # Each call runs longer than the queue timeout: the third gets no slot in time.
        started = time.monotonic()
        answers = list(pool.map(lambda _: call(host, "sleep", {"seconds": 2.5}), range(3)))
    ok = [a for a in answers if "result" in a]
    busy = [a for a in answers if "error" in a]
    assert len(ok) == 2 and len(busy) == 1, answers
    error = busy[0]["error"]
    assert error["code"] == -32004 and error["data"] == {"backend": "slow"}
    assert "backend busy: 2 calls to it are running on this gateway instance" in error["message"]
    assert f"within {QUEUE_SECONDS:g} s" in error["message"]
    assert time.monotonic() - started >= 2.5
    assert json.loads(text_of(call(host, "most_at_once", {}))) == 2
    with ThreadPoolExecutor(3) as pool:
        # Shorter than the queue timeout: the third waits for a slot and then runs.
        answers = list(pool.map(lambda _: call(host, "sleep", {"seconds": 0.3}), range(3)))
    assert [text_of(a) for a in answers] == ["slept 0.3 s"] * 3
    assert json.loads(text_of(call(host, "most_at_once", {}))) == 2  # never more than the limit at once


def test_a_backend_that_does_not_answer_within_its_timeout_is_a_clear_error(
    transactional_db: None, limits_gateway_url: str, slow_backend_url: str
) -> None:
    host = slow_host(limits_gateway_url, slow_backend_url, timeout=1.0)
    started = time.monotonic()
    message = call(host, "sleep", {"seconds": 4})
    assert time.monotonic() - started < 3.5
    assert message["error"]["code"] == -32004 and "timed out after 1 s" in message["error"]["message"]
    assert text_of(call(host, "sleep", {"seconds": 0.1})) == "slept 0.1 s"  # the next call is served


def test_a_request_that_timed_out_in_a_session_is_cancelled_at_the_backend(
    transactional_db: None, limits_gateway_url: str, slow_backend_url: str
) -> None:
    """MCP: a sender whose request timed out SHOULD cancel it. In a backend session, closing the
    connection cancels nothing (the backend would sleep on), so the gateway sends
    `notifications/cancelled` for the request."""
    host = slow_host(limits_gateway_url, slow_backend_url, timeout=1.0)
    session = open_session(host.url, host.key)
    body = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "sleep", "arguments": {"seconds": 30}}}
    answer = message_of(post(host.url, body, key=host.key,
                             headers={"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}))
    assert answer["error"]["code"] == -32004 and "timed out after 1 s" in answer["error"]["message"]
    deadline = time.monotonic() + 8  # a stateless sleep of an earlier test may still be running
    while (now := json.loads(text_of(call(host, "running_now", {})))) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert now == 0  # the 30 s sleep was cancelled, not left running


def test_a_stream_that_goes_silent_for_the_timeout_ends_with_an_error_response(
    transactional_db: None, limits_gateway_url: str, slow_backend_url: str
) -> None:
    host = slow_host(limits_gateway_url, slow_backend_url, timeout=1.0)
    session = open_session(host.url, host.key)  # in a session the backend answers with a stream
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "stall", "arguments": {"seconds": 4}, "_meta": {"progressToken": "p-1"}}}
    started = time.monotonic()
    response = post(host.url, body, key=host.key, headers={
        "accept": "text/event-stream", "mcp-session-id": session, "mcp-protocol-version": "2025-11-25",
    })
    assert time.monotonic() - started < 3.5
    assert response.headers["content-type"].startswith("text/event-stream")
    messages = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    assert messages[0]["method"] == "notifications/progress"  # relayed as it came
    assert messages[-1]["id"] == 7 and messages[-1]["error"]["code"] == -32004
    assert "timed out after 1 s" in messages[-1]["error"]["message"]
    rows = audit_rows(host.tenant, 1)
    assert [(row.outcome, row.error_code) for row in rows] == [("error", -32004)]


def test_request_bodies_over_the_limit_are_413_on_every_endpoint_with_or_without_a_length(
    transactional_db: None, limits_gateway_url: str, slow_backend_url: str
) -> None:
    host = slow_host(limits_gateway_url, slow_backend_url)
    big = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + b"a" * CAP + b'"}}'
    headers = {"authorization": f"Bearer {host.key}", "content-type": "application/json", "accept": ACCEPT}

    def chunked() -> Iterator[bytes]:  # no Content-Length: the gateway counts as it reads
        for start in range(0, len(big), 4096):
            yield big[start:start + 4096]

    for url in (host.url, f"{host.url}/messages?session_id=x"):
        for content in (big, chunked()):
            response = httpx.post(url, content=content, headers=headers, timeout=30)
            assert response.status_code == 413, (url, response.text)
            assert response.text == f"Payload Too Large: the limit is {CAP} bytes"
