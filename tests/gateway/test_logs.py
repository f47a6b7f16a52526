"""Structured JSON logs (`GATEWAY_LOG_FORMAT=json`): a gateway under Daphne logs one JSON object per
line, and what it logs while serving an MCP request names the request, its session and its trace."""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from apps.gateway.logs import JsonFormatter
from apps.gateway.pipeline import tracing
from tests import factories
from tests.gateway.helpers import message_of, open_session, post
from tests.processes import ROOT, free_port, gateway_argv, gateway_env, running

pytestmark = pytest.mark.slow

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_request_logs_its_request_session_and_trace_ids(transactional_db: None) -> None:
    tenant = factories.tenant_factory()
    issued = factories.api_key_factory(tenant=tenant)
    down = factories.backend_factory(tenant=tenant, name="down-backend", urls=[f"http://127.0.0.1:{free_port()}/mcp"])
    host = factories.virtual_host_factory(tenant=tenant, mounts={"down": down})
    port = free_port()
    env = gateway_env(settings.DATABASES["default"]["NAME"], settings.REDIS_URL, GATEWAY_INSTANCE_ID="gw-json",
                      GATEWAY_LOG_FORMAT="json", GATEWAY_LOG_LEVEL="INFO")
    log_file = ROOT / "var" / "test-logs" / f"gateway-json-{port}.log"
    # `-v 0`: Daphne's access log is a plain line of its own, outside logging (docs/observability.md).
    with running([*gateway_argv(port), "-v", "0"], port, env=env, log_name="gateway-json"):
        url = f"http://127.0.0.1:{port}/mcp/{tenant.slug}/{host.slug}"
        session = open_session(url, issued.secret)
        headers = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25", "x-request-id": "req-json-1",
                   "traceparent": f"00-{TRACE}-00f067aa0ba902b7-01"}
        response = post(url, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add"}},
                        key=issued.secret, headers=headers)
        assert message_of(response)["error"]["code"] == -32004
        deadline = time.monotonic() + 10
        while not any(line.get("request_id") == "req-json-1" for line in _lines(log_file)):
            assert time.monotonic() < deadline, log_file.read_text()
            time.sleep(0.05)
    lines = _lines(log_file)  # every line is one JSON object
    assert all({"timestamp", "level", "logger", "message"} <= line.keys() for line in lines)
    [failed] = [line for line in lines if line.get("request_id") == "req-json-1" and line["level"] == "WARNING"]
    assert failed["logger"] == "apps.gateway.pipeline.forwarder"
    assert "down-backend" in str(failed["message"])
    assert (failed["session_id"], failed["trace_id"]) == (session, TRACE)
    assert str(failed["timestamp"]).endswith("+00:00")
    # What the gateway logs outside any request names none.
    assert any("request_id" not in line for line in lines)


def test_exceptions_and_extra_fields_are_structured() -> None:
    formatter = JsonFormatter()
    try:
        raise ValueError("bad value")
    except ValueError:
        record = logging.LogRecord("apps.x", logging.ERROR, __file__, 1, "failed %s", ("twice",), sys.exc_info())
    record.backend = "demo"

    def in_a_request() -> str:
        tracing.RequestTrace(tracing.Tracer(), {"x-request-id": "r-1"})
        return formatter.format(record)

    line = json.loads(contextvars.copy_context().run(in_a_request))  # as in the task serving a request
    assert (line["level"], line["logger"], line["message"], line["backend"]) == ("ERROR", "apps.x", "failed twice", "demo")
    assert line["request_id"] == "r-1" and "session_id" not in line and "trace_id" not in line
    assert line["exception"]["type"] == "ValueError" and line["exception"]["message"] == "bad value"
    assert "Traceback" in line["exception"]["traceback"] and "\n" not in formatter.format(record)
