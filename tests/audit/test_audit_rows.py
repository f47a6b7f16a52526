"""One audit row per routed call, written off the request path and never lost on a graceful stop."""

from __future__ import annotations

import signal
import time

import httpx
import pytest
from django.conf import settings

from apps.audit.models import AuditRecord
from apps.catalog.models import Backend
from apps.common.config_version import config_version_bump
from apps.tenants.models import ApiKey, Tenant
from tests.audit.helpers import audit_rows
from tests.conftest import Host, make_host
from tests.gateway.helpers import META, message_of, modern, open_session, post
from tests.processes import free_port, gateway_argv, gateway_env, running, stop

pytestmark = pytest.mark.slow
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"





def test_a_legacy_tool_call_leaves_one_complete_row(demo_host: Host) -> None:
    session = open_session(demo_host.url, demo_host.key)
    body = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}
    response = post(demo_host.url, body, key=demo_host.key,
                    headers={"mcp-session-id": session, "traceparent": TRACEPARENT})
    assert message_of(response)["result"]["content"][0]["text"] == "3.0"
    post(demo_host.url, {"jsonrpc": "2.0", "id": 10, "method": "tools/list"}, key=demo_host.key,
         headers={"mcp-session-id": session})
    [row] = audit_rows(demo_host.tenant, 1)
    time.sleep(0.4)
    assert AuditRecord.objects.filter(tenant_slug=demo_host.tenant).count() == 1  # tools/list is not audited
    key = ApiKey.objects.get(prefix=demo_host.key[:12])
    assert row.principal == f"key:{key.name}" and row.api_key_id == key.pk
    backend = Backend.objects.get(tenant=key.tenant)
    assert (row.tenant_id, row.virtual_host, row.backend) == (key.tenant_id, demo_host.slug, backend.name)
    assert (row.method, row.exposed_name, row.upstream_name) == ("tools/call", "add", "add")
    assert (row.outcome, row.error_code) == ("ok", None)
    assert row.latency_ms > 0 and row.bytes_in == len(response.request.content) and row.bytes_out > 0
    assert row.session_id == session
    assert row.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"


def test_outcomes_of_stateless_calls(demo_host: Host) -> None:
    modern(demo_host.url, "tools/call", {"name": "add", "arguments": {"a": "x", "b": 1}}, key=demo_host.key)
    modern(demo_host.url, "resources/read", {"uri": "demo://readme"}, key=demo_host.key,
           headers={"mcp-name": "demo://readme"})
    modern(demo_host.url, "prompts/get", {"name": "greet", "arguments": {"name": "x"}}, key=demo_host.key)
    rows = audit_rows(demo_host.tenant, 3)
    assert sorted((r.method, r.exposed_name, r.outcome, r.session_id) for r in rows) == [
        ("prompts/get", "greet", "ok", ""),
        ("resources/read", "demo://readme", "ok", ""),
        ("tools/call", "add", "tool_error", ""),
    ]


def test_an_unreachable_backend_is_recorded_as_32004(transactional_db: None, gateway_url: str) -> None:
    host = make_host(gateway_url, f"http://127.0.0.1:{free_port()}/mcp")
    response = modern(host.url, "tools/call", {"name": "add", "arguments": {}}, key=host.key)
    error = message_of(response)["error"]
    assert error["code"] == -32004 and error["data"]["backend"]
    [row] = audit_rows(host.tenant, 1)
    assert (row.outcome, row.error_code) == ("error", -32004)


def test_rows_queued_at_sigterm_are_written(transactional_db: None, demo_backend_url: str) -> None:
    port = free_port()
    env = gateway_env(settings.DATABASES["default"]["NAME"], settings.REDIS_URL,
                      GATEWAY_AUDIT_FLUSH_SECONDS="3600", GATEWAY_INSTANCE_ID="gw-sigterm")
    with running(gateway_argv(port), port, env=env, log_name="gateway-sigterm") as process:
        host = make_host(f"http://127.0.0.1:{port}", demo_backend_url)
        for i in range(20):
            response = modern(host.url, "tools/call", {"name": "add", "arguments": {"a": i, "b": 0}}, key=host.key)
            assert message_of(response)["result"]["content"][0]["text"] == f"{float(i)}"
        time.sleep(0.3)
        assert AuditRecord.objects.filter(tenant_slug=host.tenant).count() == 0  # still queued
        assert stop(process, signal.SIGTERM) == 0
    assert AuditRecord.objects.filter(tenant_slug=host.tenant).count() == 20


@pytest.mark.parametrize(("grace", "slow_outcome"), [("25", "ok"), ("0.5", "cancelled")])
def test_sigterm_with_calls_in_flight_loses_no_row(
    transactional_db: None, demo_backend_url: str, grace: str, slow_outcome: str
) -> None:
    """Under load: calls finished and calls still running when SIGTERM arrives each leave one row.
    Within the shutdown grace the running calls are answered; past it they are cut (`cancelled`)."""
    from concurrent.futures import ThreadPoolExecutor

    port = free_port()
    env = gateway_env(settings.DATABASES["default"]["NAME"], settings.REDIS_URL, GATEWAY_INSTANCE_ID="gw-sigterm-2",
                      GATEWAY_SHUTDOWN_GRACE_SECONDS=grace)
    with running(gateway_argv(port), port, env=env, log_name="gateway-sigterm-2") as process:
        host = make_host(f"http://127.0.0.1:{port}", demo_backend_url)

        def call(i: int, slow: bool) -> str:
            # A slow call counts down for about 3 s; a quick one adds.
            params = {"name": "countdown", "arguments": {"start": 300}} if slow else {
                "name": "add", "arguments": {"a": i, "b": 0}}
            try:
                response = modern(host.url, "tools/call", params, key=host.key, request_id=i)
            except httpx.HTTPError:
                return "cut"
            if response.status_code == 503:
                return "cut"
            return "answered" if "result" in message_of(response) else "error"

        assert call(0, slow=False) == "answered"  # the backend is probed, the snapshot loaded
        with ThreadPoolExecutor(24) as pool:
            slow = [pool.submit(call, i, True) for i in range(1, 13)]
            time.sleep(0.5)  # the slow ones are running
            quick = list(pool.map(lambda i: call(i, False), range(13, 25)))
            assert stop(process, signal.SIGTERM, timeout=40) == 0
            slow_results = [future.result() for future in slow]
    assert quick == ["answered"] * 12
    assert slow_results == (["answered"] if slow_outcome == "ok" else ["cut"]) * 12
    rows = audit_rows(host.tenant, 25)
    assert sorted(row.outcome for row in rows) == sorted([slow_outcome] * 12 + ["ok"] * 13)


def test_a_client_that_goes_away_cancels_its_call(demo_host: Host) -> None:
    """Closing the connection is how a stateless client cancels: the gateway closes its upstream
    exchange at once and records the call as cancelled."""
    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            demo_host.url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                  "params": {"name": "countdown", "arguments": {"start": 500}, "_meta": META}},
            headers={"authorization": f"Bearer {demo_host.key}", "accept": "application/json, text/event-stream",
                     "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "countdown"},
            timeout=0.5,
        )
    [row] = audit_rows(demo_host.tenant, 1)
    assert (row.exposed_name, row.outcome) == ("countdown", "cancelled")
    assert time.monotonic() - started < 3  # recorded at the disconnect, not when the 5 s countdown ends


@pytest.mark.parametrize(("mode", "expected"), [("off", None), ("full", {"a": 1, "b": 2}), ("hash", "hashed")])
def test_arguments_are_kept_as_the_tenant_says(demo_host: Host, mode: str, expected: object) -> None:
    Tenant.objects.filter(slug=demo_host.tenant).update(audit_arguments=mode)
    config_version_bump(tenant_id=Tenant.objects.get(slug=demo_host.tenant).pk)
    response = modern(demo_host.url, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}, key=demo_host.key)
    assert "result" in message_of(response)
    [row] = audit_rows(demo_host.tenant, 1)
    if expected == "hashed":
        assert set(row.arguments) == {"a", "b"} and all(len(v) == 64 for v in row.arguments.values())
        assert row.arguments["a"] != row.arguments["b"]
    else:
        assert row.arguments == expected
