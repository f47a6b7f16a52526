"""W3C trace context and the pipeline's spans (docs/observability.md).

A `traceparent`/`tracestate` arriving in the HTTP headers or in `params._meta` is continued (the
headers win when both are valid; a malformed value is ignored, never an error). The context a
request's backend calls descend from is kept in a contextvar (`current`), so every request to a
backend carries it (`propagation.py`) and every audit row names its trace.

Spans go through the `Tracing` port. The OpenTelemetry implementation lives outside the core
(`apps/gateway/adapters/otel_tracing.py`); the default, `NoTracing`, makes none and costs one attribute read
per stage. The ids logs carry (request, session, trace) are contextvars here too."""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass, replace
from typing import Any, Protocol

from apps.gateway.protocol.jsonrpc import Message

_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[ -~]*)?")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16
#: W3C limits: tracestate is at most 512 characters worth keeping; baggage at most 8192 bytes.
_MAX_STATE = 512
_MAX_BAGGAGE = 8192
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:/+=-]{1,128}")
#: Methods whose target names the request span ("tools/call add").
_TARGET = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

Attribute = str | bool | int | float


@dataclass(frozen=True, slots=True)
class TraceContext:
    """A W3C trace context: the trace, the span that is the parent of what comes next, its flags,
    and the vendor `tracestate` and `baggage` that travel with it ("" for none)."""

    trace_id: str
    span_id: str
    flags: str = "01"
    state: str = ""
    baggage: str = ""

    @property
    def traceparent(self) -> str:
        return f"00-{self.trace_id}-{self.span_id}-{self.flags}"


def parse_traceparent(value: object, state: object = None) -> TraceContext | None:
    """The context a `traceparent` (and its `tracestate`) names; None when it is not a valid one
    (W3C Trace Context level 1: version ff, all-zero ids, upper case, or a version-00 value
    with anything after the flags are invalid)."""
    if not isinstance(value, str):
        return None
    match = _TRACEPARENT.fullmatch(value.strip(" \t"))
    if match is None:
        return None
    version, trace_id, span_id, flags, rest = match.groups()
    if version == "ff" or (version == "00" and rest) or trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return None
    return TraceContext(trace_id, span_id, flags, _sane_state(state))


def _sane_state(value: object) -> str:
    """`tracestate` as received when it is printable ASCII of a sane length; else none."""
    if not isinstance(value, str):
        return ""
    value = value.strip(" \t")
    if len(value) > _MAX_STATE or not value.isascii() or not value.isprintable():
        return ""
    return value


def incoming_context(headers: Mapping[str, str], message: Message | None) -> TraceContext | None:
    """The trace context a request continues: from its `traceparent` header, else from
    `params._meta.traceparent`, each with the `tracestate` beside it; `baggage` from the header."""
    found = None
    if "traceparent" in headers:
        found = parse_traceparent(headers["traceparent"], headers.get("tracestate"))
    if found is None and message is not None:
        meta = message.params.get("_meta")
        if isinstance(meta, dict) and "traceparent" in meta:
            found = parse_traceparent(meta["traceparent"], meta.get("tracestate"))
    baggage = headers.get("baggage")
    if found is not None and baggage and len(baggage) <= _MAX_BAGGAGE and baggage.isascii():
        found = replace(found, baggage=baggage)
    return found


# --- what the current task is serving (read by the propagation and by the log formatter) ---------------

_current: ContextVar[TraceContext | None] = ContextVar("gateway_trace_context", default=None)
request_id: ContextVar[str] = ContextVar("gateway_request_id", default="")
session_id: ContextVar[str] = ContextVar("gateway_session_id", default="")


def current() -> TraceContext | None:
    """The context that spans and backend requests made now descend from."""
    return _current.get()


def request_id_of(headers: Mapping[str, str]) -> str:
    """The request's id: the client's `X-Request-Id` when it is a sane token, else a new one."""
    given = headers.get("x-request-id")
    if given is not None and _SANE_REQUEST_ID.fullmatch(given):
        return given
    return format(random.getrandbits(64), "016x")  # unique enough to find a request by; no secret


# --- the port ----------------------------------------------------------------------------------------


class Span(Protocol):
    """One span, started by `Tracing.start`."""

    @property
    def context(self) -> TraceContext | None:
        """This span's own context (what its children and backends continue); None when the
        implementation records nothing."""

    def set(self, key: str, value: Attribute) -> None: ...

    def fail(self, description: str) -> None:
        """Give the span error status."""

    def end(self, end_ns: int | None = None) -> None: ...


class Tracing(Protocol):
    """Where spans go. `enabled` False: `start` is never called."""

    enabled: bool

    def start(
        self,
        name: str,
        parent: TraceContext | None,
        *,
        kind: str = "internal",  # internal | server | client
        attributes: Mapping[str, Attribute] | None = None,
        start_ns: int | None = None,  # time.time_ns() it started (default: now)
    ) -> Span:
        """A new span, child of `parent` (None: the root of a new trace)."""


class _NoSpan:
    __slots__ = ()
    context = None

    def set(self, key: str, value: Attribute) -> None:
        pass

    def fail(self, description: str) -> None:
        pass

    def end(self, end_ns: int | None = None) -> None:
        pass

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


NO_SPAN: Span = _NoSpan()


class NoTracing:
    """Records nothing (tracing off)."""

    enabled = False

    def start(self, name: str, parent: TraceContext | None, **options: Any) -> Span:
        return NO_SPAN


class _Scope:
    """A started span made current for what runs inside it; ended on the way out, with error
    status when an exception leaves it."""

    __slots__ = ("_span", "_token")

    def __init__(self, span: Span) -> None:
        self._span = span
        self._token: Token[TraceContext | None] | None = None

    def __enter__(self) -> Span:
        context = self._span.context
        if context is not None:
            self._token = _current.set(_with_baggage(context, _current.get()))
        return self._span

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: object) -> None:
        if self._token is not None:
            _current.reset(self._token)
        if error is not None:
            if isinstance(error, asyncio.CancelledError):
                self._span.set("gateway.outcome", "cancelled")
            else:
                self._span.fail(describe(error))
        self._span.end()


def _with_baggage(context: TraceContext, parent: TraceContext | None) -> TraceContext:
    if parent is not None and parent.baggage and not context.baggage:
        return replace(context, baggage=parent.baggage)
    return context


def describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class Tracer:
    """The pipeline's side of tracing: `with tracer.span("gateway.route") as span:` opens a child
    of the current span (nothing at all when tracing is off)."""

    __slots__ = ("tracing", "enabled")

    def __init__(self, tracing: Tracing | None = None) -> None:
        self.tracing: Tracing = tracing or NoTracing()
        self.enabled = self.tracing.enabled

    def span(self, name: str, *, kind: str = "internal", **attributes: Attribute) -> Any:
        """A context manager giving the started `Span` (NO_SPAN when off)."""
        if not self.enabled:
            return NO_SPAN
        return _Scope(self.tracing.start(name, _current.get(), kind=kind, attributes=attributes))


class RequestTrace:
    """The spans of one downstream request. Its parent may be named in the body's `_meta`, which
    is read after the caller is authenticated: so the stages before that are timed, and the
    request span and theirs are made once the message is known (`begin`), with their own times.

    It sets the task's contextvars (request, session, trace) afresh and leaves them set: each
    request is served in a task of its own, and what logs its outcome after the pipeline returns
    (the transport) still names the request."""

    __slots__ = ("_tracer", "_request_headers", "_attributes", "_started", "_stages", "span", "begun")

    def __init__(self, tracer: Tracer, headers: Mapping[str, str], **attributes: Attribute) -> None:
        self._tracer = tracer
        self._request_headers = headers
        self._attributes = attributes
        self._started = time.time_ns() if tracer.enabled else 0
        self._stages: list[tuple[str, int, int, str]] = []
        _request_trace.set(self)
        request_id.set(request_id_of(headers))
        session_id.set("")
        _current.set(None)
        self.span: Span = NO_SPAN
        self.begun = False

    def clock(self) -> int:
        """Now, for a stage timed before `begin` (0 when tracing is off)."""
        return time.time_ns() if self._tracer.enabled else 0

    def stage(self, name: str, started: int, error: BaseException | None = None) -> None:
        """A stage that ran from `started` (`clock()`) until now, before `begin`."""
        if self._tracer.enabled:
            self._stages.append((name, started, time.time_ns(), "" if error is None else describe(error)))

    def begin(self, message: Message | None) -> None:
        """Continue the incoming trace context (headers, else `message`'s `_meta`): it becomes the
        current context, and with tracing on the request span's (once per request)."""
        if self.begun:
            return
        self.begun = True
        incoming = incoming_context(self._request_headers, message)
        if not self._tracer.enabled:
            _current.set(incoming)
            return
        method = message.method if message is not None else None
        name = method or str(self._attributes.get("http.request.method") or "mcp")  # a GET stream, a batch
        target = message.params.get(_TARGET.get(method or "", "")) if message is not None else None
        if isinstance(target, str):
            name = f"{name} {target}"
        attributes = dict(self._attributes)
        if method:
            attributes["mcp.method.name"] = method
        if message is not None and message.id is not None:
            attributes["jsonrpc.request.id"] = str(message.id)
        attributes["gateway.request_id"] = request_id.get()
        span = self._tracer.tracing.start(name, incoming, kind="server", attributes=attributes, start_ns=self._started)
        self.span = span
        context = span.context
        _current.set(incoming if context is None else _with_baggage(context, incoming))
        for stage, started, ended, error in self._stages:
            child = self._tracer.tracing.start(stage, context, start_ns=started)
            if error:
                child.fail(error)
            child.end(ended)
        self._stages.clear()

    def note_session(self, value: str) -> None:
        """The downstream session the request belongs to (for logs and the request span)."""
        if value and session_id.get() != value:
            session_id.set(value)
            self._attributes["mcp.session.id"] = value
            self.span.set("mcp.session.id", value)

    def finish(self, status: int | None, error: BaseException | None = None) -> None:
        """End the request span with the HTTP status answered (or the exception that escaped)."""
        self.begin(None)
        span = self.span
        if status is not None:
            span.set("http.response.status_code", status)
            if status >= 500:
                span.fail(f"HTTP {status}")
        if isinstance(error, asyncio.CancelledError):
            span.set("gateway.outcome", "cancelled")
        elif error is not None:
            span.fail(describe(error))
        span.end()


_request_trace: ContextVar[RequestTrace | None] = ContextVar("gateway_request_trace", default=None)


def continue_trace(message: Message | None) -> None:
    """Continue the trace context of the request being served, `message` read (see `RequestTrace.begin`)."""
    trace = _request_trace.get()
    if trace is not None:
        trace.begin(message)


def note_session(value: str) -> None:
    """The downstream session the request being served belongs to (for logs and its span)."""
    trace = _request_trace.get()
    if trace is not None:
        trace.note_session(value)

