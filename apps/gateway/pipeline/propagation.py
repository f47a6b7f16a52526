"""Trace context on its way to backends: every request to a backend carries the current context in
its HTTP headers (`traceparent`, `tracestate`, `baggage`) and, for a JSON-RPC request or
notification, in `params._meta` (`traceparent`, `tracestate`), since some MCP servers and
gateways read only one of the two. With tracing on, each exchange is a client span, and the
context sent names that span as the parent; with it off, the incoming context goes on unchanged."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from apps.gateway.pipeline.ports import Upstream, UpstreamReply
from apps.gateway.pipeline.tracing import Attribute, TraceContext, Tracer, current, describe
from apps.gateway.pipeline.values import BackendView
from apps.gateway.protocol import jsonrpc

_TRACE_HEADERS = frozenset({"traceparent", "tracestate", "baggage"})


def trace_headers(context: TraceContext | None) -> list[tuple[str, str]]:
    """The W3C headers that carry `context` (none for None)."""
    if context is None:
        return []
    headers = [("traceparent", context.traceparent)]
    if context.state:
        headers.append(("tracestate", context.state))
    if context.baggage:
        headers.append(("baggage", context.baggage))
    return headers


def with_context(
    context: TraceContext, headers: list[tuple[str, str]], body: bytes, message: dict[str, Any] | None
) -> tuple[list[tuple[str, str]], bytes]:
    """`headers` and `body` (whose JSON-RPC message is `message`, see `message_of`) carrying
    `context` in place of any trace context they had."""
    headers = [h for h in headers if h[0] not in _TRACE_HEADERS]
    headers.extend(trace_headers(context))
    if message is None:
        return headers, body
    params = message.get("params")
    params = dict(params) if isinstance(params, dict) else {}
    meta = params.get("_meta")
    meta = dict(meta) if isinstance(meta, dict) else {}
    if meta.get("traceparent") == context.traceparent and meta.get("tracestate", "") == context.state:
        return headers, body  # already there (a client's `_meta`, passed on): the bytes go as they came
    meta["traceparent"] = context.traceparent
    if context.state:
        meta["tracestate"] = context.state
    else:
        meta.pop("tracestate", None)
    params["_meta"] = meta
    return headers, jsonrpc.dumps({**message, "params": params})


def message_of(body: bytes) -> dict[str, Any] | None:
    """The JSON-RPC request or notification `body` holds; None for anything else (a response, a
    batch, no body)."""
    if body[:1] != b"{":
        return None
    try:
        message = jsonrpc.loads(body)
    except ValueError:
        return None
    return message if isinstance(message, dict) and isinstance(message.get("method"), str) else None


class TracedUpstream:
    """The `Upstream` every backend exchange goes through: adds the trace context and, with
    tracing on, makes the exchange a span."""

    def __init__(self, upstream: Upstream, tracer: Tracer) -> None:
        self._upstream = upstream
        self._tracer = tracer

    async def send(
        self,
        backend: BackendView,
        replica: str,
        method: str,
        headers: list[tuple[str, str]],
        body: bytes = b"",
        *,
        timeout: float,
        long_lived: bool | None = None,
    ) -> UpstreamReply:
        parent = current()
        if not self._tracer.enabled:
            if parent is not None:
                headers, body = with_context(parent, headers, body, message_of(body))
            return await self._upstream.send(backend, replica, method, headers, body, timeout=timeout, long_lived=long_lived)
        message = message_of(body)
        attributes: dict[str, Attribute] = {
            "gateway.backend": backend.name, "gateway.replica": replica, "http.request.method": method,
        }
        name = method
        if message is not None:
            name = attributes["mcp.method.name"] = message["method"]
        span = self._tracer.tracing.start(f"{name} {backend.name}", parent, kind="client", attributes=attributes)
        context = span.context or parent
        if context is not None:
            if parent is not None and parent.baggage and not context.baggage:
                context = replace(context, baggage=parent.baggage)
            headers, body = with_context(context, headers, body, message)
        try:
            reply = await self._upstream.send(backend, replica, method, headers, body, timeout=timeout,
                                              long_lived=long_lived)
        except BaseException as error:
            span.fail(describe(error))
            span.end()
            raise
        span.set("http.response.status_code", reply.status)
        if reply.status >= 500:
            span.fail(f"HTTP {reply.status}")
        span.end()
        return reply
