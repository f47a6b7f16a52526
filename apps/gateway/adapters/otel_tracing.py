"""OpenTelemetry behind the pipeline's `Tracing` port (`apps/gateway/pipeline/tracing.py`).

Spans are exported by OTLP/HTTP through a BatchSpanProcessor, so exporting never waits on the
request path. The standard variables configure it: `OTEL_EXPORTER_OTLP_ENDPOINT` (or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) and its headers, `OTEL_SERVICE_NAME` and
`OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG`, `OTEL_BSP_*`.
`GATEWAY_TRACING` (settings) turns it on or off."""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping

from django.conf import settings
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from apps.gateway.pipeline.tracing import Attribute, NoTracing, TraceContext, Tracing

log = logging.getLogger(__name__)

INSTRUMENTATION_NAME = "mcp-gateway"
_KINDS = {"internal": SpanKind.INTERNAL, "server": SpanKind.SERVER, "client": SpanKind.CLIENT}


class OtelSpan:
    """One OpenTelemetry span as the pipeline sees it."""

    __slots__ = ("_span", "context")

    def __init__(self, span: trace.Span) -> None:
        self._span = span
        found = span.get_span_context()
        self.context: TraceContext | None = TraceContext(
            format(found.trace_id, "032x"), format(found.span_id, "016x"), format(found.trace_flags, "02x"),
            found.trace_state.to_header() if found.trace_state else "",
        ) if found.is_valid else None

    def set(self, key: str, value: Attribute) -> None:
        if self._span.is_recording():  # an ended span (a stream's audit row comes later) keeps what it had
            self._span.set_attribute(key, value)

    def fail(self, description: str) -> None:
        if self._span.is_recording():
            self._span.set_status(Status(StatusCode.ERROR, description))

    def end(self, end_ns: int | None = None) -> None:
        self._span.end(end_time=end_ns)


def _parent(context: TraceContext | None) -> Context:
    if context is None:
        return Context()  # the root of a new trace, whatever OpenTelemetry's own context holds
    state = TraceState.from_header([context.state]) if context.state else None
    span_context = SpanContext(
        int(context.trace_id, 16), int(context.span_id, 16), is_remote=True,
        trace_flags=TraceFlags(int(context.flags, 16)), trace_state=state,
    )
    return trace.set_span_in_context(NonRecordingSpan(span_context), Context())


class OtelTracing:
    """The `Tracing` port over an OpenTelemetry tracer."""

    enabled = True

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer

    def start(
        self,
        name: str,
        parent: TraceContext | None,
        *,
        kind: str = "internal",
        attributes: Mapping[str, Attribute] | None = None,
        start_ns: int | None = None,
    ) -> OtelSpan:
        span = self._tracer.start_span(
            name, context=_parent(parent), kind=_KINDS.get(kind, SpanKind.INTERNAL), attributes=attributes,
            start_time=start_ns,
        )
        return OtelSpan(span)


def tracer_provider() -> TracerProvider:
    """A provider configured by the standard OTEL_* variables (resource, sampler), service name
    `mcp-gateway` unless they name one, exporting by OTLP/HTTP in batches."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    resource = Resource.create({SERVICE_INSTANCE_ID: settings.GATEWAY_INSTANCE_ID})
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: INSTRUMENTATION_NAME}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


@functools.cache
def gateway_tracing() -> Tracing:
    """This process's tracing, as the settings say (`GATEWAY_TRACING`): OpenTelemetry, or none."""
    if not settings.GATEWAY_TRACING:
        return NoTracing()
    provider = tracer_provider()
    log.info("tracing on: spans are exported by OTLP/HTTP (service %s)",
             provider.resource.attributes.get(SERVICE_NAME))
    return OtelTracing(provider.get_tracer(INSTRUMENTATION_NAME))
