"""One routed message on its way to a backend (`Call`, built once and frozen), what the stages of
the call find out about it (`Outcome`, its audit row is written from that), and what one era sends
to reach a backend (`Outbound`, made by its `Leg`). The stages themselves: `forwarder.py`."""

from __future__ import annotations

import hmac
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from apps.gateway.pipeline.ports import UpstreamReply, UpstreamUnavailable
from apps.gateway.pipeline.replies import Headers, Reply
from apps.gateway.pipeline.task_ids import EXTENSION_TASK_METHODS, TASK_METHODS
from apps.gateway.pipeline.tracing import NO_SPAN, Span, TraceContext, current, incoming_context
from apps.gateway.pipeline.values import BackendInfo, BackendSession, BackendView, HttpRequest, VirtualHostView
from apps.gateway.protocol import jsonrpc
from apps.gateway.protocol.errors import GatewayError
from apps.gateway.protocol.jsonrpc import Kind, Message, RequestId
from apps.kernel.audit_entry import Interception
from apps.kernel.costs import call_cost
from apps.kernel.identity import Principal

#: Routed operations that leave an audit row, and the params field naming their target.
AUDITED = {"tools/call": "name", "resources/read": "uri", "prompts/get": "name"}
#: Requests that follow a task: their answers may say that it ended (its audit row's outcome).
TASK_FOLLOW_UPS = TASK_METHODS | EXTENSION_TASK_METHODS


#: Shows a message from a backend in the client's terms; None leaves it out.
Translate = Callable[[dict[str, Any]], dict[str, Any] | None]


class BadReply(UpstreamUnavailable):
    """The backend answered, but not with an answer to the call (the upstream error metric counts
    these as `bad_reply`)."""


class BackendSessionGone(Exception):
    """The backend answered 404 to a request in a session: it no longer knows the session."""


@dataclass(frozen=True, slots=True)
class Call:
    """One message from a client, on its way to one backend, with everything its stages read."""

    principal: Principal
    vhost: VirtualHostView
    backend: BackendView
    #: The mount the backend is under on its host ("" for one the gateway answers itself).
    map_key: str
    message: Message
    #: The message as the backend gets it (the request as received, unless routing renamed it).
    body: bytes
    bytes_in: int
    session_id: str
    #: The client takes an SSE answer; `sse_only`: and not a JSON one.
    wants_sse: bool
    sse_only: bool
    #: The trace context the call continues (the request's).
    trace: TraceContext | None
    started: float  # perf_counter
    at: float  # unix time
    #: What every message coming back goes through before the client sees it.
    translate: Translate | None = None
    #: The id the request carries upstream, when the gateway had to change it (era bridging).
    upstream_id: RequestId | None = None
    #: The name the client used, when the backend knows the target by another (multi-backend hosts).
    exposed_name: str | None = None
    rule: str = ""  # the access rule that allowed or denied it
    #: The call's refusal, decided before it is forwarded: the access policy's (when it was
    #: routed), or a list cursor that does not fit (`list_pieces.py`).
    denied: GatewayError | None = None
    #: What the response's payload goes through last (a list cut to the page limits: `list_pieces.py`).
    reshape: Callable[[bytes], bytes] | None = None
    #: How the event ids of the backend's answer stream are shown (a composed host's session:
    #: named by the map key, so that resuming the stream reaches the backend's: `compose.stream_event_id`).
    event_id: Callable[[str], str | None] | None = None
    #: The site the client reached ("<scheme>://<host>"), for links the answer gives (where to
    #: connect an account). The host was checked before any call began (`Gateway.check_origin`).
    origin: str = ""
    #: The params the client sent, when an interceptor rewrote them (`with_params`).
    params_before: Mapping[str, Any] | None = None

    @classmethod
    def begin(
        cls,
        request: HttpRequest,
        vhost: VirtualHostView,
        principal: Principal,
        backend: BackendView,
        message: Message,
        *,
        session_id: str = "",
        map_key: str = "",
        body: bytes | None = None,
        wants_sse: bool = False,
        translate: Translate | None = None,
        exposed_name: str | None = None,
        rule: str = "",
        denied: GatewayError | None = None,
        reshape: Callable[[bytes], bytes] | None = None,
        event_id: Callable[[str], str | None] | None = None,
    ) -> Call:
        # The request's context, continued by the gateway; or, outside one (a call made directly),
        # what the request names.
        trace = current() or incoming_context(request.headers, message)
        return cls(
            principal=principal,
            vhost=vhost,
            backend=backend,
            map_key=map_key,
            message=message,
            body=request.body if body is None else body,
            bytes_in=len(request.body),
            session_id=session_id,
            wants_sse=wants_sse,
            sse_only=wants_sse and "application/json" not in request.headers.get("accept", "*/*"),
            trace=trace,
            started=time.perf_counter(),
            at=time.time(),
            translate=translate,
            exposed_name=exposed_name,
            rule=rule,
            denied=denied,
            reshape=reshape,
            event_id=event_id,
            origin=f"{'https' if request.scheme == 'https' else 'http'}://{request.headers.get('host', '').lower()}",
        )

    def bridged(self, out: Outbound) -> Call:
        """The call as its answer comes back through `out`: with the id it carries upstream, and
        `out.restore` after the call's own translation."""
        if out.upstream_id is None and out.restore is None:
            return self
        translate = self.translate
        if out.restore is not None:
            translate = out.restore if translate is None else _chained(translate, out.restore)
        return replace(self, upstream_id=out.upstream_id, translate=translate)

    def with_params(self, params: dict[str, Any]) -> Call:
        """The call with its request's params rewritten (by an interceptor): the backend gets them."""
        raw = {**self.message.raw, "params": params}
        message = Message(self.message.kind, raw, method=self.message.method, id=self.message.id)
        before = self.message.params if self.params_before is None else self.params_before
        return replace(self, message=message, body=jsonrpc.dumps(raw), params_before=before)

    @property
    def headers(self) -> Headers:
        """What every reply to the call carries (the session id)."""
        return (("mcp-session-id", self.session_id),) if self.session_id else ()

    @property
    def trace_id(self) -> str:
        return self.trace.trace_id if self.trace is not None else ""

    @property
    def audited(self) -> bool:
        return self.message.kind is Kind.REQUEST and self.message.method in AUDITED

    @property
    def read_back(self) -> bool:
        """Whether the backend's answer is read for what it says (an audited call's outcome, a
        task's end), not only relayed."""
        return self.message.kind is Kind.REQUEST and (self.message.method in AUDITED or self.message.method in TASK_FOLLOW_UPS)

    def target_name(self) -> str:
        value = self.message.params.get(AUDITED.get(self.message.method or "", ""), "")
        return value if isinstance(value, str) else ""

    def price(self) -> int:
        """What the call costs against budgets (`costs.py`)."""
        upstream = self.target_name()
        exposed = upstream if self.exposed_name is None else self.exposed_name
        return call_cost(self.vhost.costs, self.message.method or "", exposed, upstream)


def _chained(first: Translate, then: Translate) -> Translate:
    def both(message: dict[str, Any]) -> dict[str, Any] | None:
        step = first(message)
        return None if step is None else then(step)

    return both


#: `Outcome.arguments_sent` of a call no interceptor rewrote.
AS_SENT: Any = object()


@dataclass(slots=True)
class Outcome:
    """What the stages of one call found out; the call's audit row and span are written from it
    when the call ends (a streamed answer: when its stream closes)."""

    #: ok | tool_error | error | denied | rate_limited | over_budget | cancelled; working: the call
    #: created a task, which goes on after the answer
    outcome: str = ""
    code: int | None = None  # the JSON-RPC error code of the answer
    bytes_out: int = 0
    limit_state: str = ""  # "" no limit or budget applies | ok | limited | unchecked (limiter unreachable)
    cost: int = 0  # units charged at admission (0 until admitted, and when refused)
    span: Span = NO_SPAN  # the span of forwarding the call
    task_id: str = ""  # the backend's id of the task the call created
    #: What a request following a task found: the task ended, with this outcome and error code.
    task_end: tuple[str, int | None] | None = None
    #: What the host's interceptors decided (every decision but a built-in's plain pass).
    interceptions: list[Interception] | None = None
    #: The request's arguments as forwarded, when an interceptor rewrote them (what the audit row
    #: keeps); None after a refusal (it keeps none); `AS_SENT`: the client's, as they came.
    arguments_sent: Any = AS_SENT

    def answered(self, outcome: str, code: int | None, bytes_out: int) -> None:
        self.outcome, self.code, self.bytes_out = outcome, code, bytes_out

    def answered_by(self, call: Call, response: dict[str, Any], bytes_out: int | None = None) -> None:
        """Note what the backend's `response` to `call` says: its outcome, the task it created, or
        the end of the task the call follows. `bytes_out`: what the client got (None: counted
        elsewhere, as a stream is relayed)."""
        self.outcome, self.code = outcome_of(response)
        if bytes_out is not None:
            self.bytes_out = bytes_out
        method = call.message.method
        if method == "tools/call" and (task_id := created_task(response.get("result"))) is not None:
            self.outcome, self.task_id = "working", task_id
        elif method in TASK_FOLLOW_UPS:
            self.task_end = task_ended(method, response)


class Next(Protocol):
    """The rest of a call's stages: what a stage awaits to go on, with the call as it came or as
    the stage changed it."""

    def __call__(self, call: Call | None = None) -> Awaitable[Reply]: ...


class Stage(Protocol):
    """One stage of every call (`forwarder.Forwarder.stages`): answers the call itself (a refusal),
    or awaits `then()` (`then(changed_call)`) for the stages after it and returns (or rewrites) their reply. It notes what
    it decided in `outcome`; it raises what the forwarder turns into the call's error."""

    def applies(self, call: Call) -> bool:
        """Whether the stage has anything to do with `call`; a call it does not apply to passes it
        by at no cost (most calls meet no limit, no refusal)."""
        ...

    async def __call__(self, call: Call, outcome: Outcome, then: Next) -> Reply: ...


@dataclass(frozen=True, slots=True)
class Outbound:
    """The call's message as one backend gets it, and how its answer comes back."""

    headers: list[tuple[str, str]]
    body: bytes
    #: The replica to send to: a backend session's own, or any that is up.
    pick: Callable[[], str]
    #: The backend session it goes in (None: none); a 404 there means the session is gone.
    session: BackendSession | None = None
    #: Era bridging: the id the request carries upstream, and what the answer goes through after
    #: the call's own translation.
    upstream_id: RequestId | None = None
    restore: Translate | None = None
    #: Sees the backend's reply first (and may stand in for it).
    intercept: Callable[[UpstreamReply], UpstreamReply] | None = None
    #: The backend's answer, already had: a call continued with the client's input sends nothing.
    resumed: UpstreamReply | None = None

    @property
    def in_session(self) -> bool:
        return self.session is not None and self.session.session_id is not None


class Leg(Protocol):
    """What differs between the eras in reaching a backend the gateway does not answer itself."""

    #: The downstream session the calls belong to ("" for a stateless client).
    session_id: str
    #: Answers the gateway makes itself are shaped as the stateless era's.
    modern: bool
    #: The client can be sent to a URL (URL-mode elicitation: 2025-11-25 and later).
    url_elicitation: bool

    async def outbound(self, call: Call, info: BackendInfo, lost: Outbound | None) -> Outbound | Reply:
        """What to send `call.backend` (or the era's own answer, when nothing is sent); `lost`: the
        outbound tried last, whose backend session is gone or whose replica is down."""
        ...


def arguments_kept(mode: str, arguments: object, key: bytes) -> Any:
    """What an audit row keeps of a call's arguments: nothing (`off`), each top-level argument as
    an HMAC-SHA256 under `key` (`hash`: equal values give equal hashes, but a guessable value such
    as `1` cannot be recovered without the key), or the arguments as sent (`full`)."""
    if mode == "full":
        return arguments
    if mode == "hash" and isinstance(arguments, dict):
        return {name: hmac.new(key, jsonrpc.dumps(value), "sha256").hexdigest() for name, value in arguments.items()}
    return None


def error_code(error: dict[str, Any]) -> int | None:
    """A JSON-RPC error's code as the audit keeps it: an integer a 32-bit column holds (a backend's
    other value is no code: stored, it would refuse the whole batch of rows it came with)."""
    code = error.get("code")
    return code if isinstance(code, int) and not isinstance(code, bool) and -(2**31) <= code < 2**31 else None


def outcome_of(response: dict[str, Any]) -> tuple[str, int | None]:
    error = response.get("error")
    if isinstance(error, dict):
        return "error", error_code(error)
    result = response.get("result")
    if isinstance(result, dict) and result.get("isError") is True:
        return "tool_error", None
    return "ok", None


#: A task's terminal status, and the outcome its call's audit row gets (a 2025-11-25 `failed`
#: says nothing of why: an error with no code, which what `tasks/result` says later refines).
_ENDED = {"completed": "ok", "failed": "error", "cancelled": "cancelled"}
#: Errors to a task request that say the request failed, not the task (an unknown id, say).
_REQUEST_ERRORS = frozenset({-32600, -32601, -32602, -32021})


def created_task(result: object) -> str | None:
    """The backend's id of the task a `tools/call` result created: 2025-11-25's CreateTaskResult
    (`{"task": {"taskId": …}}`) or the 2026-07-28 extension's (`{"resultType": "task", "taskId": …}`)."""
    if not isinstance(result, dict):
        return None
    task = result.get("task")
    if isinstance(task, dict) and isinstance(task.get("taskId"), str):
        return task["taskId"]
    if result.get("resultType") == "task" and isinstance(result.get("taskId"), str):
        return result["taskId"]
    return None


def task_ended(method: str | None, response: dict[str, Any]) -> tuple[str, int | None] | None:
    """(outcome, error code) when the answer to a request following a task shows the task ended:
    a terminal status (`tasks/get`, `tasks/cancel` of 2025-11-25), the 2026-07-28 `tasks/get`
    with its result or error inlined, or 2025-11-25's `tasks/result` (the task's own result or
    error). None while it runs, and for an answer that refuses the request itself."""
    result = response.get("result")
    error = response.get("error")
    if method == "tasks/result":
        if isinstance(error, dict):
            code = error_code(error)
            return None if code in _REQUEST_ERRORS else ("error", code)
        return outcome_of(response) if isinstance(result, dict) else None
    if not isinstance(result, dict) or (ended := _ENDED.get(result.get("status"))) is None:  # type: ignore[arg-type]
        return None
    inlined_error, inlined_result = result.get("error"), result.get("result")
    if isinstance(inlined_error, dict):
        return "error", error_code(inlined_error)
    if isinstance(inlined_result, dict) and inlined_result.get("isError") is True:
        return "tool_error", None
    return ended, None
