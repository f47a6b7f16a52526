"""`/metrics` as Prometheus scrapes it from a real gateway under Daphne, after real calls through
the demo backend: requests and routed calls by method, tool, backend and outcome, a rate-limited
call, an upstream timeout, cache lookups, active sessions, index build durations; the cap on tool
label values and the scrape token on a gateway configured for them."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from channels.db import database_sync_to_async
from django.conf import settings
from prometheus_client.parser import text_string_to_metric_families

from apps.catalog.services import backend_update
from apps.common.redis import redis_client
from apps.common.replica_health import REPLICA_HEALTH_KEY, STALE_SECONDS, replica_down_record
from apps.policies.services import rate_limit_set
from apps.retrieval.tasks import tool_index
from tests import factories
from tests.conftest import Host, make_host
from tests.gateway.helpers import message_of, modern, open_session, post
from tests.gateway.test_http_sse import PostsElsewhere, sse_session
from tests.processes import free_port, gateway_argv, gateway_env, running

pytestmark = pytest.mark.slow

Samples = list[tuple[str, dict[str, str], float]]
TOKEN = "scrape-token-for-tests-0123456789"


def scrape(gateway_url: str, token: str | None = None) -> Samples:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    response = httpx.get(f"{gateway_url}/metrics", headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return [(s.name, s.labels, s.value) for family in text_string_to_metric_families(response.text) for s in family.samples]


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name` over the samples whose labels include `labels`."""
    return sum(v for n, found, v in samples if n == name and labels.items() <= found.items())


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def call(host: Host, tool: str, arguments: dict[str, object], request_id: int = 1) -> dict[str, object]:
    return message_of(modern(host.url, "tools/call", {"name": tool, "arguments": arguments}, key=host.key,
                             request_id=request_id))


@pytest.fixture
def limited(transactional_db: None, gateway_url: str, demo_backend_url: str) -> tuple[Host, str]:
    """A host whose key may make two calls an hour, and the name of its backend."""
    tenant = factories.tenant_factory()
    issued = factories.api_key_factory(tenant=tenant, name="agent")
    backend = factories.backend_factory(tenant=tenant, urls=[demo_backend_url])
    host = factories.virtual_host_factory(tenant=tenant, mounts={"demo": backend})
    rate_limit_set(tenant=tenant, scope="key", name="agent", limit=2, window_seconds=3600)
    return Host(f"{gateway_url}/mcp/{tenant.slug}/{host.slug}", issued.secret, tenant.slug, host.slug), backend.name


@pytest.fixture
def impatient(transactional_db: None, gateway_url: str, demo_backend_url: str) -> tuple[Host, str]:
    """A host whose backend is given 0.3 s to answer, and that backend's name."""
    tenant = factories.tenant_factory()
    issued = factories.api_key_factory(tenant=tenant)
    backend = factories.backend_factory(tenant=tenant, urls=[demo_backend_url])
    backend_update(backend=backend, kind=backend.kind, transport=backend.transport, urls=[demo_backend_url],
                   timeout_seconds=0.3)
    host = factories.virtual_host_factory(tenant=tenant, mounts={"demo": backend})
    return Host(f"{gateway_url}/mcp/{tenant.slug}/{host.slug}", issued.secret, tenant.slug, host.slug), backend.name


def test_calls_refusals_and_timeouts_move_their_metrics(
    gateway_url: str, limited: tuple[Host, str], impatient: tuple[Host, str]
) -> None:
    (host, backend), (slow_host, slow_backend) = limited, impatient
    before = scrape(gateway_url)

    assert "result" in call(host, "add", {"a": 1, "b": 2}, 1)
    assert "result" in call(host, "echo", {"text": "hi"}, 2)
    refused = call(host, "add", {"a": 1, "b": 2}, 3)
    assert refused["error"]["code"] == -32005
    assert message_of(modern(host.url, "tools/list", key=host.key))["result"]["tools"]
    timed_out = call(slow_host, "countdown", {"start": 300})
    assert timed_out["error"]["code"] == -32004
    assert post(host.url, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, key="not-a-key").status_code == 401
    after = scrape(gateway_url)

    # Requests: by JSON-RPC method and outcome (error classes, HTTP statuses).
    requests = "mcp_gateway_request_duration_seconds_count"
    assert delta(before, after, requests, method="tools/call", outcome="ok") == 2
    assert delta(before, after, requests, method="tools/call", outcome="rate_limited") == 1
    assert delta(before, after, requests, method="tools/call", outcome="backend_unavailable") == 1
    assert delta(before, after, requests, method="tools/list", outcome="ok") == 1
    assert delta(before, after, requests, method="http:POST", outcome="http_401") == 1
    assert delta(before, after, "mcp_gateway_request_duration_seconds_bucket", method="tools/call", outcome="ok",
                 le="+Inf") == 2

    # Routed calls: by tool, backend and outcome, with their latency.
    calls = "mcp_gateway_tool_call_duration_seconds_count"
    assert delta(before, after, calls, tool="add", backend=backend, outcome="ok", method="tools/call") == 1
    assert delta(before, after, calls, tool="echo", backend=backend, outcome="ok") == 1
    assert delta(before, after, calls, tool="add", backend=backend, outcome="rate_limited") == 1
    assert delta(before, after, calls, tool="countdown", backend=slow_backend, outcome="error") == 1
    slow_seconds = delta(before, after, "mcp_gateway_tool_call_duration_seconds_sum", backend=slow_backend)
    assert 0.3 <= slow_seconds < 5  # it waited for the timeout, no more
    assert delta(before, after, "mcp_gateway_tool_call_duration_seconds_bucket", backend=slow_backend,
                 le="0.25") == 0

    assert delta(before, after, "mcp_gateway_rate_limit_refusals_total", scope="key") == 1
    assert delta(before, after, "mcp_gateway_upstream_errors_total", backend=slow_backend, kind="timeout") == 1
    assert delta(before, after, "mcp_gateway_upstream_errors_total", backend=backend) == 0
    # Every request looked its tenant's snapshot up; the first for each tenant missed.
    assert delta(before, after, "mcp_gateway_cache_lookups_total", cache="snapshot", result="hit") >= 4
    assert value(after, "mcp_gateway_redis_up") == 1
    assert value(after, "mcp_gateway_process_resident_memory_bytes") > 0


def test_merged_lists_come_from_their_caches(transactional_db: None, gateway_url: str, demo_backend_url: str) -> None:
    tenant = factories.tenant_factory()
    issued = factories.api_key_factory(tenant=tenant)
    mounts = {name: factories.backend_factory(tenant=tenant, urls=[demo_backend_url]) for name in ("one", "two")}
    vhost = factories.virtual_host_factory(tenant=tenant, mounts=mounts)
    url = f"{gateway_url}/mcp/{tenant.slug}/{vhost.slug}"
    before = scrape(gateway_url)
    for request_id in range(2):
        assert message_of(modern(url, "tools/list", key=issued.secret, request_id=request_id))["result"]["tools"]
    after = scrape(gateway_url)
    lookups = "mcp_gateway_cache_lookups_total"
    assert delta(before, after, lookups, cache="merged_list", result="miss") == 1
    assert delta(before, after, lookups, cache="merged_list", result="hit") == 1
    assert delta(before, after, lookups, cache="backend_list", result="miss") == 2  # one per backend, once


def test_sessions_and_their_cache_are_counted(demo_host: Host, gateway_url: str) -> None:
    before = scrape(gateway_url)
    session = open_session(demo_host.url, demo_host.key)
    headers = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    for request_id in range(3):
        assert post(demo_host.url, {"jsonrpc": "2.0", "id": request_id, "method": "ping"}, key=demo_host.key,
                    headers=headers).status_code == 200
    after = scrape(gateway_url)
    assert value(after, "mcp_gateway_active_sessions") >= value(before, "mcp_gateway_active_sessions") + 1
    assert delta(before, after, "mcp_gateway_cache_lookups_total", cache="session", result="hit") >= 3
    assert delta(before, after, "mcp_gateway_request_duration_seconds_count", method="initialize", outcome="ok") == 1
    assert delta(before, after, "mcp_gateway_request_duration_seconds_count", method="ping", outcome="ok") == 3
    assert delta(before, after, "mcp_gateway_request_duration_seconds_count", method="notifications/initialized") == 1


async def test_messages_relayed_between_instances_are_counted(
    transactional_db: None, gateway_url: str, second_gateway_url: str, demo_backend_url: str
) -> None:
    """The HTTP+SSE stream lives on instance A, every POST lands on B: B relays each answer to A."""
    host = await database_sync_to_async(make_host)(gateway_url, demo_backend_url)
    elsewhere = PostsElsewhere(int(second_gateway_url.rsplit(":", 1)[1]))
    before = scrape(second_gateway_url)
    async with sse_session(host, transport=elsewhere) as client:
        for i in range(3):
            assert (await client.call_tool("add", {"a": i, "b": 1})).content[0].text == f"{i + 1.0}"
    after = scrape(second_gateway_url)
    assert delta(before, after, "mcp_gateway_session_messages_total", route="relayed") >= 4  # initialize, 3 calls
    assert delta(before, after, "mcp_gateway_tool_call_duration_seconds_count", tool="add", outcome="ok") == 3


def test_index_builds_recorded_by_the_task_are_exported(transactional_db: None, gateway_url: str) -> None:
    before = scrape(gateway_url)
    tool_index.apply(args=[2**40])  # as a worker runs it; a backend that is gone is a quick, successful build
    after = scrape(gateway_url)
    builds = "mcp_gateway_index_build_duration_seconds_count"
    assert delta(before, after, builds, task="tool_index", outcome="ok") == 1
    assert value(after, "mcp_gateway_index_build_last_success_timestamp_seconds", task="tool_index") > value(
        before, "mcp_gateway_index_build_last_success_timestamp_seconds", task="tool_index")


def test_replicas_the_gateways_marked_down_are_counted(gateway_url: str) -> None:
    urls = [f"http://10.78.0.{i}/mcp" for i in (1, 2)]
    now = time.time()
    before = scrape(gateway_url)
    redis_client().hset(REPLICA_HEALTH_KEY, mapping={
        urls[0]: replica_down_record(since=now - 30, instance="gw-a", checked=now),
        urls[1]: replica_down_record(since=now - 999, instance="gw-gone", checked=now - STALE_SECONDS - 1),  # stale
    })
    try:
        after = scrape(gateway_url)
    finally:
        redis_client().hdel(REPLICA_HEALTH_KEY, *urls)
    assert delta(before, after, "mcp_gateway_replicas_down") == 1


@pytest.fixture(scope="module")
def guarded_gateway_url(django_db_setup: None, django_db_blocker: object) -> Iterator[str]:
    """A gateway that wants a token for /metrics and keeps two tool label values."""
    port = free_port()
    env = gateway_env(settings.DATABASES["default"]["NAME"], settings.REDIS_URL, GATEWAY_INSTANCE_ID="gw-metrics",
                      GATEWAY_METRICS_TOKEN=TOKEN, GATEWAY_METRICS_MAX_TOOLS="2")
    with running(gateway_argv(port), port, env=env, log_name="gateway-metrics"):
        yield f"http://127.0.0.1:{port}"


def test_metrics_need_the_token_when_one_is_set(guarded_gateway_url: str) -> None:
    for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": TOKEN}):
        refused = httpx.get(f"{guarded_gateway_url}/metrics", headers=headers)
        assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
        assert "mcp_gateway" not in refused.text
    assert value(scrape(guarded_gateway_url, TOKEN), "mcp_gateway_redis_up") == 1


def test_tool_labels_past_the_cap_are_counted_as_other(
    transactional_db: None, guarded_gateway_url: str, demo_backend_url: str
) -> None:
    tenant = factories.tenant_factory()
    issued = factories.api_key_factory(tenant=tenant)
    backend = factories.backend_factory(tenant=tenant, urls=[demo_backend_url])
    vhost = factories.virtual_host_factory(tenant=tenant, mounts={"demo": backend})
    host = Host(f"{guarded_gateway_url}/mcp/{tenant.slug}/{vhost.slug}", issued.secret, tenant.slug, vhost.slug)
    for request_id, (tool, arguments) in enumerate(
        [("add", {"a": 1, "b": 1}), ("echo", {"text": "x"}), ("utc_now", {}), ("countdown", {"start": 1}),
         ("add", {"a": 2, "b": 2})]
    ):
        assert "result" in call(host, tool, arguments, request_id)
    samples = scrape(guarded_gateway_url, TOKEN)
    calls = "mcp_gateway_tool_call_duration_seconds_count"
    assert value(samples, calls, tool="add") == 2 and value(samples, calls, tool="echo") == 1
    assert value(samples, calls, tool="other") == 2  # utc_now and countdown
    assert value(samples, calls, tool="utc_now") == value(samples, calls, tool="countdown") == 0
    assert value(samples, "mcp_gateway_metric_label_values", label="tool") == 2
