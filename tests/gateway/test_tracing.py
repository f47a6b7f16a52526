"""Tracing end to end: W3C trace context continued from the request (headers or `_meta`) and passed
on to backends in both headers and `_meta`, and the spans of each pipeline stage.

The gateway runs in this process (its MCP routes under uvicorn in a thread) with an in-memory span
exporter; the backends are real: an official-SDK MCP server that echoes the trace context it
received (`tests/backends/echo_server.py`, Streamable HTTP and HTTP+SSE) and the REST service that
records every request (an OpenAPI backend). Tracing off is the Daphne gateway of the other tests."""

from __future__ import annotations

import gc
import http.server
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn
from channels.routing import URLRouter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from apps.audit.models import AuditRecord
from apps.catalog.specs import spec_upload
from apps.gateway import wiring
from apps.gateway.adapters.otel_tracing import OtelTracing
from apps.gateway.transports.routing import mcp_http_routes
from tests import factories
from tests.backends.specs import as_json, service_spec
from tests.gateway.helpers import META, message_of, modern, open_session, post
from tests.processes import backend_argv, free_port, running

pytestmark = pytest.mark.slow

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE}-{PARENT}-01"
TRACESTATE = "vendor=abc,other=1"
META_TRACE = "0af7651916cd43dd8448eb211c80319c"
META_TRACEPARENT = f"00-{META_TRACE}-b7ad6b7169203331-01"


@pytest.fixture(scope="module")
def echo_url() -> Iterator[str]:
    port = free_port()
    with running(backend_argv("tests.backends.echo_server", port), port, log_name="echo-backend"):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def echo_sse_url() -> Iterator[str]:
    port = free_port()
    argv = [*backend_argv("tests.backends.echo_server", port), "--transport", "sse"]
    with running(argv, port, log_name="echo-sse-backend"):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def traced(transactional_db: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, InMemorySpanExporter]]:
    """A gateway in this process with tracing on, its spans kept in memory: (base URL, exporter)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(wiring, "gateway_tracing", lambda: OtelTracing(provider.get_tracer("test")))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(URLRouter(mcp_http_routes), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="off"))
    before = set(wiring._gateways)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the in-process gateway did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", exporter
    finally:
        server.should_exit = True
        thread.join(10)
        for loop_id in set(wiring._gateways) - before:
            wiring._gateways.pop(loop_id, None)
        wiring.audit_writer().flush_sync()  # while the test's database is there
        gc.collect()  # the database connections its worker threads left (the test database is dropped at the end)


@dataclass(frozen=True)
class Host:
    url: str
    key: str
    tenant: str
    echo: str  # the echo backend's base URL
    service: str  # the recording service's base URL

    def recorded(self) -> list[dict[str, Any]]:
        return httpx.get(f"{self.echo}/__recorded").json()


def _host(gateway: str, echo: str, service: str, *, transport: str = "streamable-http", up: bool = True) -> Host:
    """A host with the echo backend (`echo-*` tools; `up` False: nothing listens at `echo`) and an
    OpenAPI backend (`api-*` tools)."""
    tenant = factories.tenant_factory()
    issued = factories.api_key_factory(tenant=tenant)
    url = f"{echo}/sse" if transport == "sse" else f"{echo}/mcp"
    mcp = factories.backend_factory(tenant=tenant, urls=[url], transport=transport)
    api = factories.openapi_backend_factory(tenant=tenant, base_url=service)
    spec_upload(backend=api, document=as_json(service_spec()), filename="service.json")
    vhost = factories.virtual_host_factory(tenant=tenant, mounts={"echo": mcp, "api": api})
    if up:
        httpx.post(f"{echo}/__reset")
    httpx.post(f"{service}/__reset")
    return Host(f"{gateway}/mcp/{tenant.slug}/{vhost.slug}", issued.secret, tenant.slug, echo, service)


def _received(response: httpx.Response) -> dict[str, Any]:
    """What the echo backend's `received` tool says it got."""
    message = message_of(response)
    assert "result" in message, message
    return json.loads(message["result"]["content"][0]["text"])


def _parts(traceparent: str) -> tuple[str, str]:
    version, trace_id, parent_id, flags = traceparent.split("-")
    assert (version, len(trace_id), len(parent_id), len(flags)) == ("00", 32, 16, 2)
    return trace_id, parent_id


def _hex(value: int, width: int) -> str:
    return format(value, f"0{width}x")


def _by_name(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    found = [span for span in spans if span.name == name]
    assert len(found) == 1, [span.name for span in spans]
    return found[0]


def _parent_of(span: ReadableSpan) -> str | None:
    return _hex(span.parent.span_id, 16) if span.parent is not None else None


def _audited_trace(tenant: str) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        row = AuditRecord.objects.filter(tenant_slug=tenant).order_by("-created_at").first()
        if row is not None:
            return row.trace_id
        time.sleep(0.05)
    raise AssertionError("no audit row")


def test_a_stateless_call_continues_the_header_context_with_a_span_per_stage(
    traced: tuple[str, InMemorySpanExporter], echo_url: str, recording_service_url: str
) -> None:
    gateway, exporter = traced
    host = _host(gateway, echo_url, recording_service_url)
    response = modern(host.url, "tools/call", {"name": "echo-received", "arguments": {}}, key=host.key,
                      headers={"traceparent": TRACEPARENT, "tracestate": TRACESTATE})
    received = _received(response)

    spans = exporter.get_finished_spans()
    request = _by_name(spans, "tools/call echo-received")
    assert request.kind is SpanKind.SERVER
    assert (_hex(request.context.trace_id, 32), _parent_of(request)) == (TRACE, PARENT)
    assert request.attributes["gateway.tenant"] == host.tenant
    assert request.attributes["http.response.status_code"] == 200
    own = _hex(request.context.span_id, 16)
    stages = {name: _by_name(spans, name) for name in
              ("gateway.authenticate", "gateway.parse", "gateway.route", "gateway.authorize", "gateway.forward")}
    assert {name: _parent_of(span) for name, span in stages.items()} == dict.fromkeys(stages, own)
    assert all(_hex(span.context.trace_id, 32) == TRACE for span in spans)
    forward = stages["gateway.forward"]
    assert forward.attributes["gateway.outcome"] == "ok"
    assert forward.attributes["gateway.tool.exposed_name"] == "echo-received"
    assert forward.attributes["gateway.tool.upstream_name"] == "received"
    upstream = _by_name(spans, f"tools/call {forward.attributes['gateway.backend']}")
    assert upstream.kind is SpanKind.CLIENT and _parent_of(upstream) == _hex(forward.context.span_id, 16)
    assert upstream.attributes["gateway.replica"] == f"{echo_url}/mcp"
    assert upstream.attributes["http.response.status_code"] == 200

    # The backend got the trace, with the gateway's upstream call as the parent, in headers and _meta.
    sent = f"00-{TRACE}-{_hex(upstream.context.span_id, 16)}-01"
    assert received["headers"] == {"traceparent": sent, "tracestate": TRACESTATE}
    assert {key: received["meta"].get(key) for key in ("traceparent", "tracestate")} == {
        "traceparent": sent, "tracestate": TRACESTATE}
    assert _audited_trace(host.tenant) == TRACE


def test_the_context_in_meta_is_continued_and_the_headers_win_over_it(
    traced: tuple[str, InMemorySpanExporter], echo_url: str, recording_service_url: str
) -> None:
    gateway, exporter = traced
    host = _host(gateway, echo_url, recording_service_url)
    meta = {**META, "traceparent": META_TRACEPARENT, "tracestate": "meta=1"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "echo-received", "arguments": {}, "_meta": meta}}
    routing = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "echo-received"}
    received = _received(post(host.url, body, key=host.key, headers=routing))
    trace_id, parent_id = _parts(received["headers"]["traceparent"])
    assert trace_id == META_TRACE and received["headers"]["tracestate"] == "meta=1"
    assert received["meta"]["traceparent"] == received["headers"]["traceparent"]
    request = _by_name(exporter.get_finished_spans(), "tools/call echo-received")
    assert _parent_of(request) == "b7ad6b7169203331"

    exporter.clear()
    received = _received(post(host.url, body, key=host.key, headers={**routing, "traceparent": TRACEPARENT}))
    assert _parts(received["headers"]["traceparent"])[0] == TRACE
    assert _parts(received["meta"]["traceparent"])[0] == TRACE
    assert "tracestate" not in received["headers"] and "tracestate" not in received["meta"]  # the header had none
    assert _parent_of(_by_name(exporter.get_finished_spans(), "tools/call echo-received")) == PARENT


@pytest.mark.parametrize("malformed", [
    "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # upper case
    f"00-{'0' * 32}-00f067aa0ba902b7-01",  # all-zero trace id
    f"ff-{TRACE}-{PARENT}-01",  # version ff
    f"00-{TRACE}-{PARENT}-01-extra",  # version 00 with more after the flags
    "garbage",
])
def test_a_malformed_context_is_ignored_and_a_new_trace_begins(
    traced: tuple[str, InMemorySpanExporter], echo_url: str, recording_service_url: str, malformed: str
) -> None:
    gateway, exporter = traced
    host = _host(gateway, echo_url, recording_service_url)
    meta = {**META, "traceparent": malformed}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "echo-received", "arguments": {}, "_meta": meta}}
    headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "echo-received",
               "traceparent": malformed, "tracestate": TRACESTATE}
    received = _received(post(host.url, body, key=host.key, headers=headers))
    request = _by_name(exporter.get_finished_spans(), "tools/call echo-received")
    started = _hex(request.context.trace_id, 32)
    assert request.parent is None and started not in malformed
    assert _parts(received["headers"]["traceparent"])[0] == started
    assert received["meta"]["traceparent"] == received["headers"]["traceparent"]
    assert "tracestate" not in received["headers"]  # it belonged to the malformed traceparent
    assert _audited_trace(host.tenant) == started


def test_a_legacy_session_propagates_to_every_backend_request(
    traced: tuple[str, InMemorySpanExporter], echo_url: str, recording_service_url: str
) -> None:
    gateway, exporter = traced
    host = _host(gateway, echo_url, recording_service_url)
    session = open_session(host.url, host.key)
    headers = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25", "traceparent": TRACEPARENT}
    listed = post(host.url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, key=host.key, headers=headers)
    assert "echo-received" in {tool["name"] for tool in message_of(listed)["result"]["tools"]}
    called = post(host.url, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                             "params": {"name": "echo-received", "arguments": {}}}, key=host.key, headers=headers)
    received = _received(called)
    assert _parts(received["headers"]["traceparent"])[0] == TRACE
    assert received["meta"]["traceparent"] == received["headers"]["traceparent"]

    # Every request made of the backend carried a context in both places (the client's own
    # initialize, which named none, started a trace of the gateway's); those made for the list and
    # the call (the session's initialize, the list, the call) are in the client's trace.
    posted = [r for r in host.recorded() if r["http"] == "POST"]
    assert all(r["headers"].get("traceparent") and r["meta"].get("traceparent") == r["headers"]["traceparent"]
               for r in posted), posted
    methods = {r["method"] for r in posted if _parts(r["headers"]["traceparent"])[0] == TRACE}
    assert {"initialize", "notifications/initialized", "tools/list", "tools/call"} <= methods
    spans = exporter.get_finished_spans()
    call = _by_name(spans, "tools/call echo-received")
    assert call.attributes["mcp.session.id"] == session and _parent_of(call) == PARENT
    assert _audited_trace(host.tenant) == TRACE


def test_an_openapi_backend_gets_the_traceparent_header(
    traced: tuple[str, InMemorySpanExporter], echo_url: str, recording_service_url: str
) -> None:
    gateway, exporter = traced
    host = _host(gateway, echo_url, recording_service_url)
    response = modern(host.url, "tools/call", {"name": "api-getText", "arguments": {}}, key=host.key,
                      headers={"traceparent": TRACEPARENT, "tracestate": TRACESTATE})
    assert message_of(response)["result"]["isError"] is False
    [request] = httpx.get(f"{recording_service_url}/__recorded").json()
    sent = dict(request["headers"])
    spans = exporter.get_finished_spans()
    upstream = _by_name(spans, next(s.name for s in spans if s.kind is SpanKind.CLIENT))
    assert upstream.attributes["gateway.backend.kind"] == "openapi"
    assert _parent_of(upstream) == _hex(_by_name(spans, "gateway.forward").context.span_id, 16)
    assert sent["traceparent"] == f"00-{TRACE}-{_hex(upstream.context.span_id, 16)}-01"
    assert sent["tracestate"] == TRACESTATE


def test_an_http_sse_backend_gets_the_context_in_headers_and_meta(
    traced: tuple[str, InMemorySpanExporter], echo_sse_url: str, recording_service_url: str
) -> None:
    gateway, exporter = traced
    host = _host(gateway, echo_sse_url, recording_service_url, transport="sse")
    response = modern(host.url, "tools/call", {"name": "echo-received", "arguments": {}}, key=host.key,
                      headers={"traceparent": TRACEPARENT})
    assert "result" in message_of(response), message_of(response)
    [posted] = [r for r in host.recorded() if r["http"] == "POST" and r["method"] == "tools/call"]
    spans = exporter.get_finished_spans()
    backend = _by_name(spans, "gateway.forward").attributes["gateway.backend"]
    upstream = _by_name(spans, f"tools/call {backend}")
    sent = f"00-{TRACE}-{_hex(upstream.context.span_id, 16)}-01"
    assert (posted["headers"]["traceparent"], posted["meta"]["traceparent"]) == (sent, sent)


def test_failures_give_their_spans_error_status(
    traced: tuple[str, InMemorySpanExporter], recording_service_url: str
) -> None:
    gateway, exporter = traced
    host = _host(gateway, f"http://127.0.0.1:{free_port()}", recording_service_url, up=False)
    response = modern(host.url, "tools/call", {"name": "echo-received", "arguments": {}}, key=host.key)
    assert message_of(response)["error"]["code"] == -32004
    spans = exporter.get_finished_spans()
    forward = _by_name(spans, "gateway.forward")
    assert forward.status.status_code is StatusCode.ERROR
    assert (forward.attributes["gateway.outcome"], forward.attributes["rpc.jsonrpc.error_code"]) == ("error", -32004)
    refused = [span for span in spans if span.kind is SpanKind.CLIENT]
    assert refused and all(span.status.status_code is StatusCode.ERROR for span in refused)

    exporter.clear()
    unknown = modern(host.url, "tools/call", {"name": "nope-tool", "arguments": {}}, key=host.key)
    assert message_of(unknown)["error"]["code"] == -32602
    route = _by_name(exporter.get_finished_spans(), "gateway.route")
    assert route.status.status_code is StatusCode.ERROR and "Unknown tool" in route.status.description


def test_tracing_off_passes_the_incoming_context_on_unchanged(
    transactional_db: None, gateway_url: str, echo_url: str, recording_service_url: str
) -> None:
    host = _host(gateway_url, echo_url, recording_service_url)
    received = _received(modern(host.url, "tools/call", {"name": "echo-received", "arguments": {}}, key=host.key,
                                headers={"traceparent": TRACEPARENT, "tracestate": TRACESTATE}))
    assert received["headers"] == {"traceparent": TRACEPARENT, "tracestate": TRACESTATE}
    assert {key: received["meta"].get(key) for key in ("traceparent", "tracestate")} == {
        "traceparent": TRACEPARENT, "tracestate": TRACESTATE}
    assert _audited_trace(host.tenant) == TRACE
    received = _received(modern(host.url, "tools/call", {"name": "echo-received", "arguments": {}}, key=host.key))
    assert received["headers"] == {} and "traceparent" not in received["meta"]


def test_spans_are_exported_by_otlp_http_as_the_standard_variables_say(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from apps.gateway.adapters.otel_tracing import tracer_provider
    from apps.gateway.pipeline.tracing import TraceContext

    received: list[tuple[str, bytes]] = []

    class Collector(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the handler's protocol
            received.append((self.path, self.rfile.read(int(self.headers["content-length"]))))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    collector = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{collector.server_port}")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "edge-gateway")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0")
    provider = tracer_provider()
    try:
        tracing = OtelTracing(provider.get_tracer("test"))
        span = tracing.start("tools/call add", TraceContext(TRACE, PARENT, "01"), kind="server",
                             attributes={"gateway.tenant": "acme"})
        span.end()
        tracing.start("unsampled", None).end()  # ratio 0: a new trace is not recorded, a sampled parent's is
        assert provider.force_flush(10_000)
    finally:
        provider.shutdown()
        collector.shutdown()
    [(path, body)] = received
    assert path == "/v1/traces"
    export = ExportTraceServiceRequest.FromString(body)
    [resource_spans] = export.resource_spans
    resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
    assert resource["service.name"] == "edge-gateway" and resource["service.instance.id"]
    [exported] = [s for scope in resource_spans.scope_spans for s in scope.spans]
    assert (exported.name, exported.trace_id.hex(), exported.parent_span_id.hex()) == ("tools/call add", TRACE, PARENT)
