"""One routed message on its way to a backend (`Call`): what the relay, the audit row and the
admission need to know of it."""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from apps.gateway.pipeline.costs import ToolCosts, call_cost
from apps.gateway.pipeline.tracing import NO_SPAN, Span, TraceContext, current, incoming_context
from apps.gateway.pipeline.values import BackendView, HttpRequest, Principal, VirtualHostView
from apps.gateway.protocol import jsonrpc
from apps.gateway.protocol.jsonrpc import Kind, Message, RequestId

#: Routed operations that leave an audit row, and the params field naming their target.
AUDITED = {"tools/call": "name", "resources/read": "uri", "prompts/get": "name"}


#: Shows a message from a backend in the client's terms; None leaves it out.
Translate = Callable[[dict[str, Any]], dict[str, Any] | None]


@dataclass(slots=True)
class Call:
    """One message forwarded to one backend."""

    principal: Principal
    virtual_host: str
    backend: BackendView
    message: Message
    bytes_in: int
    session_id: str
    trace_id: str
    started: float  # perf_counter
    at: float  # unix time
    #: Era bridging: the id the request carries upstream (when the gateway had to change it), and
    #: what every message coming back goes through before the client sees it.
    upstream_id: RequestId | None = None
    translate: Translate | None = None
    #: The name the client used, when the backend knows the target by another (multi-backend hosts).
    exposed_name: str | None = None
    rule: str = ""  # the access rule that allowed or denied it
    limit_state: str = ""  # "" no limit or budget applies | ok | limited | unchecked (limiter unreachable)
    audit_arguments: str = "off"  # the tenant's setting: off | hash | full
    costs: ToolCosts | None = None  # the host's tool costs
    cost: int = 0  # units charged at admission (0 until admitted, and when refused)
    #: The trace context the call continues (the request's), and its span while it is forwarded.
    trace: TraceContext | None = None
    span: Span = NO_SPAN
    #: The gateway gave up waiting for the backend's answer (its timeout).
    timed_out: bool = False

    @classmethod
    def begin(
        cls,
        request: HttpRequest,
        vhost: VirtualHostView,
        principal: Principal,
        backend: BackendView,
        message: Message,
        session_id: str = "",
    ) -> Call:
        # The request's context, continued by the gateway; or, outside one (a call made directly),
        # what the request names.
        trace = current() or incoming_context(request.headers, message)
        return cls(
            principal=principal,
            virtual_host=vhost.slug,
            audit_arguments=vhost.audit_arguments,
            costs=vhost.costs,
            backend=backend,
            message=message,
            bytes_in=len(request.body),
            session_id=session_id,
            trace_id=trace.trace_id if trace is not None else "",
            trace=trace,
            started=time.perf_counter(),
            at=time.time(),
        )

    @property
    def audited(self) -> bool:
        return self.message.kind is Kind.REQUEST and self.message.method in AUDITED

    def target_name(self) -> str:
        value = self.message.params.get(AUDITED.get(self.message.method or "", ""), "")
        return value if isinstance(value, str) else ""

    def price(self) -> int:
        """What the call costs against budgets (`costs.py`)."""
        upstream = self.target_name()
        exposed = upstream if self.exposed_name is None else self.exposed_name
        return call_cost(self.costs, self.message.method or "", exposed, upstream)


def arguments_kept(mode: str, arguments: object, key: bytes) -> Any:
    """What an audit row keeps of a call's arguments: nothing (`off`), each top-level argument as
    an HMAC-SHA256 under `key` (`hash`: equal values give equal hashes, but a guessable value such
    as `1` cannot be recovered without the key), or the arguments as sent (`full`)."""
    if mode == "full":
        return arguments
    if mode == "hash" and isinstance(arguments, dict):
        return {name: hmac.new(key, jsonrpc.dumps(value), "sha256").hexdigest() for name, value in arguments.items()}
    return None


def outcome_of(response: dict[str, Any]) -> tuple[str, int | None]:
    error = response.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        return "error", code if isinstance(code, int) else None
    result = response.get("result")
    if isinstance(result, dict) and result.get("isError") is True:
        return "tool_error", None
    return "ok", None
