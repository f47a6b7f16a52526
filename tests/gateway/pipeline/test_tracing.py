"""W3C trace context in the pipeline core (`tracing.py`, `propagation.py`): what is continued, what
is ignored, what backends get, and the request id; with tracing off (the core's default)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apps.gateway.pipeline import tracing
from apps.gateway.pipeline.propagation import TracedUpstream, message_of, with_context
from apps.gateway.pipeline.tracing import (
    NO_SPAN,
    TraceContext,
    Tracer,
    incoming_context,
    parse_traceparent,
    request_id_of,
)
from apps.gateway.pipeline.values import BackendView, HttpRequest
from apps.gateway.protocol.jsonrpc import classify
from tests.gateway.pipeline.test_gateway import standalone_gateway

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE}-00f067aa0ba902b7-01"
OTHER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
BACKEND = BackendView(id=1, name="demo", transport="streamable-http", urls=("http://127.0.0.1:1/mcp",), timeout=1)


@pytest.mark.parametrize("value", [
    TRACEPARENT,
    f" {TRACEPARENT}\t",  # optional whitespace around a header value
    f"01-{TRACE}-00f067aa0ba902b7-01-future",  # a later version may carry more
])
def test_valid_traceparents(value: str) -> None:
    found = parse_traceparent(value, "a=1")
    assert found is not None and (found.trace_id, found.span_id, found.state) == (TRACE, "00f067aa0ba902b7", "a=1")


@pytest.mark.parametrize("value", [
    None, 5, "", "garbage", TRACEPARENT.upper(), f"ff-{TRACE}-00f067aa0ba902b7-01", f"00-{'0' * 32}-00f067aa0ba902b7-01",
    f"00-{TRACE}-{'0' * 16}-01", f"00-{TRACE}-00f067aa0ba902b7-01-more", f"00-{TRACE}-00f067aa0ba902b7",
    f"{TRACEPARENT}, {OTHER}",  # two traceparent headers, joined
])
def test_malformed_traceparents_are_none(value: Any) -> None:
    assert parse_traceparent(value) is None


def test_a_tracestate_that_is_not_sane_is_dropped_with_the_traceparent_kept() -> None:
    assert parse_traceparent(TRACEPARENT, "x" * 600).state == ""
    assert parse_traceparent(TRACEPARENT, "a=\x00").state == ""
    assert parse_traceparent(TRACEPARENT, "caf\u00e9=1").state == ""


def _message(meta: dict[str, Any] | None = None) -> Any:
    params: dict[str, Any] = {"name": "add"}
    if meta is not None:
        params["_meta"] = meta
    return classify({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})


def test_headers_win_over_meta_and_meta_serves_when_they_are_missing_or_malformed() -> None:
    meta = {"traceparent": OTHER, "tracestate": "meta=1"}
    both = incoming_context({"traceparent": TRACEPARENT, "tracestate": "h=1", "baggage": "k=v"}, _message(meta))
    assert both == TraceContext(TRACE, "00f067aa0ba902b7", "01", "h=1", "k=v")
    only_meta = incoming_context({"traceparent": "nonsense", "tracestate": "h=1"}, _message(meta))
    assert only_meta == TraceContext("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "00", "meta=1")
    assert incoming_context({}, _message({"traceparent": 7})) is None
    assert incoming_context({}, _message()) is None and incoming_context({}, None) is None


def test_the_context_goes_in_headers_and_meta_replacing_any_there() -> None:
    context = TraceContext(TRACE, "1111111111111111", "01", "a=1")
    body = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                       "params": {"name": "x", "_meta": {"traceparent": OTHER, "progressToken": 5}}}).encode()
    headers, sent = with_context(context, [("traceparent", OTHER), ("x-keep", "1")], body, message_of(body))
    assert headers == [("x-keep", "1"), ("traceparent", context.traceparent), ("tracestate", "a=1")]
    assert json.loads(sent)["params"] == {"name": "x", "_meta": {"traceparent": context.traceparent,
                                                                  "tracestate": "a=1", "progressToken": 5}}
    notification = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    _, sent = with_context(context, [], notification, message_of(notification))
    assert json.loads(sent)["params"] == {"_meta": {"traceparent": context.traceparent, "tracestate": "a=1"}}


def test_what_carries_the_context_already_or_is_no_request_goes_as_it_came() -> None:
    context = TraceContext(TRACE, "1111111111111111")
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": {
        "traceparent": context.traceparent}}}, separators=(" ,", ":  ")).encode()
    assert with_context(context, [], body, message_of(body))[1] is body
    for other in (b'{"jsonrpc":"2.0","id":1,"result":{}}', b"[1]", b"", b"{not json"):
        assert message_of(other) is None
        assert with_context(context, [], other, None) == ([("traceparent", context.traceparent)], other)


class Recording:
    def __init__(self) -> None:
        self.sent: list[tuple[list[tuple[str, str]], bytes]] = []

    async def send(self, backend: Any, replica: str, method: str, headers: list[tuple[str, str]], body: bytes = b"",
                   *, timeout: float, long_lived: bool | None = None) -> Any:
        self.sent.append((headers, body))
        return None


async def test_with_tracing_off_the_incoming_context_passes_unchanged_and_none_adds_nothing() -> None:
    recording = Recording()
    upstream = TracedUpstream(recording, Tracer())
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
    await upstream.send(BACKEND, "http://r", "POST", [("accept", "*/*")], body, timeout=1)
    assert recording.sent[-1] == ([("accept", "*/*")], body)
    trace = tracing.RequestTrace(Tracer(), {"traceparent": TRACEPARENT, "tracestate": "a=1"})
    trace.begin(None)
    await upstream.send(BACKEND, "http://r", "POST", [], body, timeout=1)
    headers, sent = recording.sent[-1]
    assert headers == [("traceparent", TRACEPARENT), ("tracestate", "a=1")]
    assert json.loads(sent)["params"]["_meta"] == {"traceparent": TRACEPARENT, "tracestate": "a=1"}
    assert tracing.current() == TraceContext(TRACE, "00f067aa0ba902b7", "01", "a=1")


def test_the_no_op_tracer_makes_nothing() -> None:
    tracer = Tracer()
    assert not tracer.enabled and tracer.span("gateway.parse") is NO_SPAN
    with tracer.span("gateway.route") as span:
        span.set("k", 1)
        span.fail("nothing records it")
    assert span.context is None


@pytest.mark.parametrize(("given", "kept"), [
    ("req-42.a:b/c", True), ("x" * 128, True), ("", False), ("x" * 129, False), ("a b", False), ("é", False),
    ("a\nb", False),
])
def test_a_sane_request_id_is_kept_and_any_other_replaced(given: str, kept: bool) -> None:
    found = request_id_of({"x-request-id": given})
    assert (found == given) is kept and len(found) >= 1
    if not kept:
        assert len(found) == 16 and int(found, 16) >= 0


async def test_the_gateway_sets_the_ids_a_log_line_names() -> None:
    gateway = standalone_gateway(upstream=Recording())
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping",
                       "params": {"_meta": {"traceparent": TRACEPARENT}}}).encode()
    request = HttpRequest("POST", "acme", "main", {
        "content-type": "application/json", "accept": "application/json", "x-request-id": "req-1",
        "authorization": "Bearer good-key-0123456789", "mcp-session-id": "gw.x.y"}, body)
    reply = await gateway.handle(request)
    assert reply.status == 503  # the session store is down
    assert (tracing.request_id.get(), tracing.session_id.get()) == ("req-1", "gw.x.y")
    assert tracing.current() is not None and tracing.current().trace_id == TRACE
    await gateway.handle(HttpRequest("POST", "acme", "main", {}, b""))  # the next request starts afresh
    assert tracing.request_id.get() != "req-1" and tracing.session_id.get() == "" and tracing.current() is None
