"""JSON-RPC batches (2025-03-26 sessions) cannot fan one request out into unbounded backend work: a
batch over GATEWAY_MAX_BATCH_ITEMS is refused whole with nothing forwarded, a batch's messages run
at most GATEWAY_BATCH_CONCURRENCY at once, and each message is authorized and audited on its own."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from apps.kernel.policy import RuleSpec
from apps.policies.services import access_policy_set
from tests import factories
from tests.audit.helpers import audit_rows
from tests.conftest import Host, make_host
from tests.gateway.helpers import open_session, post
from tests.processes import backend_argv, free_port, running

pytestmark = pytest.mark.slow

BATCH_VERSION = "2025-03-26"


@pytest.fixture(scope="module")
def counting_backend() -> Iterator[str]:
    port = free_port()
    with running(backend_argv("tests.backends.counting_server", port), port, log_name="batch-counting-backend"):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def slow_backend() -> Iterator[str]:
    port = free_port()
    with running(backend_argv("tests.backends.slow_server", port), port, log_name="batch-slow-backend"):
        yield f"http://127.0.0.1:{port}/mcp"


def _tools_calls(base: str) -> int:
    return int(httpx.get(f"{base}/stats").json()["methods"].get("tools/call", 0))


def _call(request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def _batch(host: Host, session: str, batch: list[dict[str, Any]]) -> httpx.Response:
    return post(host.url, batch, key=host.key, headers={"mcp-session-id": session, "mcp-protocol-version": BATCH_VERSION})


def test_a_batch_over_the_cap_is_refused_whole_and_nothing_reaches_the_backend(
    transactional_db: None, gateway_url: str, counting_backend: str
) -> None:
    host = make_host(gateway_url, f"{counting_backend}/mcp")
    session = open_session(host.url, host.key, BATCH_VERSION)
    assert _batch(host, session, [_call(0, "add", {"a": 1, "b": 1})]).status_code == 200  # the backend is warm
    before = _tools_calls(counting_backend)
    response = _batch(host, session, [_call(i, "add", {"a": i, "b": 1}) for i in range(1, 52)])
    assert response.status_code == 400
    error = response.json()
    assert error["id"] is None and error["error"]["code"] == -32600
    assert "at most 50 messages" in error["error"]["message"] and "51" in error["error"]["message"]
    assert error["error"]["data"] == {"max_batch_items": 50}
    assert _tools_calls(counting_backend) == before  # not one of the 51 was forwarded
    # At the cap, every message is answered.
    answered = _batch(host, session, [_call(i, "add", {"a": i, "b": 1}) for i in range(1, 51)])
    assert sorted(message["id"] for message in answered.json()) == list(range(1, 51))
    assert _tools_calls(counting_backend) == before + 50


def test_each_message_of_a_batch_is_authorized_and_audited_on_its_own(
    transactional_db: None, gateway_url: str, demo_backend_url: str
) -> None:
    tenant = factories.tenant_factory()
    issued = factories.api_key_factory(tenant=tenant)
    backend = factories.backend_factory(tenant=tenant, urls=[demo_backend_url])
    vhost = factories.virtual_host_factory(tenant=tenant, mounts={"demo": backend})
    rules = [RuleSpec("add-a1-only", "tenant", tenant.slug, "allow", ["add"], "arguments.a == 1"),
             RuleSpec("echo", "tenant", tenant.slug, "allow", ["echo"], "")]
    access_policy_set(virtual_host=vhost, default="deny", rules=rules)
    host = Host(f"{gateway_url}/mcp/{tenant.slug}/{vhost.slug}", issued.secret, tenant.slug, vhost.slug)
    session = open_session(host.url, host.key, BATCH_VERSION)
    response = _batch(host, session, [
        _call(1, "add", {"a": 1, "b": 2}), _call(2, "add", {"a": 2, "b": 2}), _call(3, "echo", {"text": "hi"}),
    ])
    assert response.status_code == 200
    answers = {message["id"]: message for message in response.json()}
    assert answers[1]["result"]["content"][0]["text"] == "3.0"
    assert answers[2]["error"]["code"] == -32003  # refused alone; its neighbours went on
    assert "hi" in answers[3]["result"]["content"][0]["text"]
    rows = audit_rows(tenant.slug, 3)
    outcomes = sorted((row.upstream_name, json.dumps(row.error_code), row.outcome, row.session_id) for row in rows)
    assert outcomes == [
        ("add", "-32003", "denied", session), ("add", "null", "ok", session), ("echo", "null", "ok", session),
    ]


def test_the_messages_of_a_batch_run_a_few_at_a_time(
    transactional_db: None, gateway_url: str, slow_backend: str
) -> None:
    host = make_host(gateway_url, slow_backend)
    session = open_session(host.url, host.key, BATCH_VERSION)
    _batch(host, session, [_call(0, "most_at_once", {})])  # reset the backend's count
    started = time.monotonic()
    response = _batch(host, session, [_call(i, "sleep", {"seconds": 0.3}) for i in range(1, 25)])
    elapsed = time.monotonic() - started
    assert len(response.json()) == 24
    [most] = _batch(host, session, [_call(99, "most_at_once", {})]).json()
    assert most["result"]["structuredContent"]["result"] == 8  # GATEWAY_BATCH_CONCURRENCY, not 24
    assert elapsed >= 0.85  # three rounds of 0.3 s
