"""Tasks of the 2026-07-28 extension (`io.modelcontextprotocol/tasks`) through a composed host, end
to end (docs/virtual-hosts.md, "Tasks"): the fixture backend runs them, the host shows their ids
signed for the caller and routes what follows them back, and the call that created each has one
audit row that ends with the task's outcome (docs/policies.md, "Audit"). The conformance suite's
tasks scenarios cover the protocol itself (tests/conformance)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from apps.audit.models import AuditRecord
from apps.gateway.pipeline.task_ids import TASKS_EXTENSION
from apps.tenants.models import Tenant
from tests import factories
from tests.audit.helpers import audit_rows
from tests.conftest import Host, make_composed_host
from tests.gateway.helpers import META, MODERN, message_of, post
from tests.processes import backend_argv, free_port, running

pytestmark = pytest.mark.slow

#: A request's envelope from a client that declares the tasks extension.
WITH_TASKS = {**META, "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}


@pytest.fixture(scope="module")
def fixture_backend() -> Iterator[str]:
    port = free_port()
    with running(backend_argv("tests.backends.conformance_server", port), port, log_name="tasks-fixture"):
        yield f"http://127.0.0.1:{port}/mcp"


def _request(host: Host, method: str, params: dict[str, Any], *, key: str | None = None,
             name: str | None = None, meta: dict[str, Any] = WITH_TASKS) -> Any:
    """A stateless request declaring the extension (as `meta` says); `Mcp-Name` mirrors the tool
    or task it names, unless `name` says otherwise."""
    named = name if name is not None else params.get("name") or params.get("taskId")
    headers = {"mcp-protocol-version": MODERN, "mcp-method": method, **({"mcp-name": named} if named else {})}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    return post(host.url, body, key=key or host.key, headers=headers)


def _ended(host: Host, task_id: str) -> dict[str, Any]:
    for _ in range(100):
        task = message_of(_request(host, "tasks/get", {"taskId": task_id}))["result"]
        if task["status"] in {"completed", "failed", "cancelled"}:
            return task
        time.sleep(0.1)
    raise AssertionError(f"task {task_id} did not end")


def _created(host: Host, tool: str, arguments: dict[str, Any]) -> str:
    created = message_of(_request(host, "tools/call", {"name": tool, "arguments": arguments}))["result"]
    assert created["resultType"] == "task" and created["taskId"].startswith("gwt."), created
    return created["taskId"]


def test_tasks_end_to_end_through_a_composed_host_with_one_row_each_that_ends_with_them(
    transactional_db: None, gateway_url: str, fixture_backend: str, demo_backend_url: str
) -> None:
    host = make_composed_host(gateway_url, {"fx": fixture_backend, "demo": demo_backend_url})
    done = _created(host, "fx-slow_compute", {"seconds": 0.2, "label": "a"})
    broken = _created(host, "fx-failing_job", {})
    crashed = _created(host, "fx-protocol_error_job", {})
    finished = _ended(host, done)
    assert finished["taskId"] == done and finished["result"]["content"]
    assert _ended(host, broken)["result"]["isError"] is True
    failed = _ended(host, crashed)
    assert failed["status"] == "failed" and isinstance(failed["error"]["code"], int)
    rows = {row.exposed_name: row for row in audit_rows(host.tenant, 3, method="tools/call")}
    assert set(rows) == {"fx-slow_compute", "fx-failing_job", "fx-protocol_error_job"}
    deadline = time.monotonic() + 5
    while AuditRecord.objects.filter(tenant_slug=host.tenant, outcome="working").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    ended = {row.exposed_name: (row.outcome, row.error_code, row.task_ended_at is not None)
             for row in AuditRecord.objects.filter(tenant_slug=host.tenant)}
    assert ended == {"fx-slow_compute": ("ok", None, True), "fx-failing_job": ("tool_error", None, True),
                     "fx-protocol_error_job": ("error", failed["error"]["code"], True)}
    assert all(rows[name].task_id and rows[name].task_id not in done for name in rows)  # the backend's ids


def test_a_task_is_followed_by_its_caller_only_and_named_in_mcp_name(
    transactional_db: None, gateway_url: str, fixture_backend: str, demo_backend_url: str
) -> None:
    host = make_composed_host(gateway_url, {"fx": fixture_backend, "demo": demo_backend_url})
    task_id = _created(host, "fx-slow_compute", {"seconds": 30, "label": "b"})
    stranger = factories.api_key_factory(tenant=Tenant.objects.get(slug=host.tenant)).secret
    for method in ("tasks/get", "tasks/cancel"):
        refused = _request(host, method, {"taskId": task_id}, key=stranger)
        assert message_of(refused)["error"]["code"] == -32602, method
    mismatched = _request(host, "tasks/get", {"taskId": task_id}, name="gwt.other.id")
    assert (mismatched.status_code, message_of(mismatched)["error"]["code"]) == (400, -32020)
    without = _request(host, "tasks/get", {"taskId": task_id}, meta=META)
    assert (without.status_code, message_of(without)["error"]["code"]) == (400, -32021)
    assert message_of(without)["error"]["data"] == {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}
    assert message_of(_request(host, "tasks/cancel", {"taskId": task_id}))["result"]["resultType"] == "complete"
    assert _ended(host, task_id)["status"] == "cancelled"
    assert audit_rows(host.tenant, 1, method="tools/call", outcome="cancelled")


def test_a_host_whose_backends_run_no_tasks_knows_no_task_methods(
    transactional_db: None, gateway_url: str, demo_backend_url: str
) -> None:
    host = make_composed_host(gateway_url, {"a": demo_backend_url, "b": demo_backend_url})
    for method in ("tasks/get", "tasks/update", "tasks/cancel", "tasks/list", "tasks/result"):
        answer = _request(host, method, {"taskId": "gwt.x.y"})
        assert (answer.status_code, message_of(answer)["error"]["code"]) == (404, -32601), method
