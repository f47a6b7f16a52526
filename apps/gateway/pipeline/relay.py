"""Forwarding one message to a backend and relaying the answer downstream, JSON or SSE, while
noting what the audit row needs (outcome, error code, bytes, latency)."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from apps.gateway.pipeline.calls import Call, arguments_kept, outcome_of
from apps.gateway.pipeline.concurrency import BackendBusy, BackendGates, Gate
from apps.gateway.pipeline.metrics import Counters, note_error
from apps.gateway.pipeline.ports import (
    Admission,
    AuditEntry,
    AuditSink,
    RateLimiter,
    ReplicaUnreachable,
    Upstream,
    UpstreamReply,
    UpstreamUnavailable,
)
from apps.gateway.pipeline.replies import JSON, SSE_HEADERS, Headers, Reply, Stream, error_reply
from apps.gateway.pipeline.streams import (
    StreamCaps,
    StreamOverCap,
    capped,
    chain,
    drain,
    relayed_stream,
    response_in,
    translated,
)
from apps.gateway.pipeline.tracing import NO_SPAN, Tracer
from apps.gateway.pipeline.values import Budget, Limit
from apps.gateway.protocol import jsonrpc
from apps.gateway.protocol.errors import BackendUnavailable, PolicyDenied, RateLimited
from apps.gateway.protocol.jsonrpc import Kind
from apps.gateway.protocol.sse import SseEvent, encode_event

log = logging.getLogger(__name__)

#: Outcomes that give the call's span error status (a tool's own error is a result, not a failure).
_FAILED = frozenset({"error", "denied", "rate_limited", "over_budget"})


class BackendSessionGone(Exception):
    """The backend answered 404 to a request in a session: it no longer knows the session."""


def _refusal(refused: Limit | Budget, admission: Admission, cost: int) -> str:
    """The -32005 message: which rate limit or budget refused, and why."""
    subject = f"{refused.scope} {refused.name!r}"
    if not admission.checked:
        return f"Rate limits and budgets could not be checked for {subject}; try again later"
    if isinstance(refused, Limit):
        return f"Rate limit exceeded: {refused.limit} calls per {refused.window_seconds} s for {subject}"
    daily = admission.period == "day"
    cap = refused.daily if daily else refused.monthly
    plan = refused.daily_plan if daily else refused.monthly_plan
    budget = f"{'daily' if daily else 'monthly'} budget of {cap} units{f' (plan {plan!r})' if plan else ''}"
    resets = f"it resets at the start of the next UTC {'day' if daily else 'month'}"
    if cap is not None and cost > cap:
        return f"Over budget: this call costs {cost} units, more than the whole {budget} of {subject}"
    return f"Over budget: {subject} has spent its {budget}; this call costs {cost}, and {resets}"


class Relay:
    def __init__(
        self,
        upstream: Upstream,
        audit: AuditSink,
        limiter: RateLimiter | None = None,
        counters: Counters | None = None,
        *,
        hash_key: bytes = b"",
        gates: BackendGates | None = None,
        tracer: Tracer | None = None,
        stream_caps: StreamCaps | None = None,
    ) -> None:
        self._hash_key = hash_key
        #: What one call's answer stream from a backend may bring.
        self._stream_caps = stream_caps or StreamCaps()
        self.tracer = tracer or Tracer()
        #: Per-backend concurrency limits (None: none are enforced).
        self._gates = gates
        self._upstream = upstream
        self._audit = audit
        self._limiter = limiter
        self._counters = counters or Counters()
        #: Cancellations of timed-out requests on their way to backends.
        self._cancelling: set[asyncio.Task[None]] = set()

    async def admit(self, call: Call, headers: Headers = ()) -> Reply | None:
        """Charge an audited call to the caller's rate limits (one call each) and budgets (the
        call's cost each), all or nothing: None to go on, or the refusal (-32005 with
        `data: {limit_scope, retry_after}`), audited. A call is charged when it is admitted, so one
        that then fails (a tool error, an unreachable backend) has still cost its units."""
        if not call.audited:
            return None
        cost = call.price()
        limits = call.principal.limits
        budgets = call.principal.budgets if cost > 0 else ()  # a free call cannot overspend
        if self._limiter is None or not (limits or budgets):
            call.cost = cost
            return None
        admission = await self._limiter.admit(limits, budgets, cost)
        if not admission.checked:
            self._counters.increment("rate_limit_unchecked")
            if budgets:
                self._counters.increment("budget_unchecked")
        refused = admission.refused_by
        if refused is None:
            call.limit_state = "ok" if admission.checked else "unchecked"
            call.cost = cost  # when unchecked, what it would have been charged (the audit row says so)
            return None
        call.limit_state = "limited" if admission.checked else "unchecked"
        retry_after = math.ceil(admission.retry_after * 1000) / 1000
        error = RateLimited(
            _refusal(refused, admission, cost), data={"limit_scope": refused.scope, "retry_after": retry_after}
        )
        reply = error_reply(call.message.id, error, headers)
        if isinstance(refused, Budget):
            self._counters.increment("over_budget", scope=refused.scope, period=admission.period)
            self.record(call, "over_budget", error.code, len(reply.body))
        else:
            self._counters.increment("rate_limited", scope=refused.scope)
            self.record(call, "rate_limited", error.code, len(reply.body))
        return reply

    def forwarding(self, call: Call) -> Any:
        """The span of forwarding `call` (until its answer is relayed), as a context manager that
        gives it: `with relay.forwarding(call) as call.span:`; its audit row sets the outcome."""
        if not self.tracer.enabled:
            return NO_SPAN
        attributes = {"gateway.backend": call.backend.name, "gateway.backend.kind": call.backend.kind,
                      "mcp.method.name": call.message.method or ""}
        if call.exposed_name is not None:
            attributes["gateway.tool.exposed_name"] = call.exposed_name
        return self.tracer.span("gateway.forward", **attributes)

    def record(self, call: Call, outcome: str, code: int | None, bytes_out: int) -> None:
        """One audit row for the call, if its method is audited."""
        if not call.audited:
            return
        name = call.target_name()
        exposed = name if call.exposed_name is None else call.exposed_name
        if (span := call.span) is not NO_SPAN:
            span.set("gateway.outcome", outcome)
            span.set("gateway.tool.exposed_name", exposed)
            span.set("gateway.tool.upstream_name", name)
            if code is not None:
                span.set("rpc.jsonrpc.error_code", code)
            if outcome in _FAILED:
                span.fail(f"{outcome}{'' if code is None else f' ({code})'}")
        seconds = time.perf_counter() - call.started
        counters = self._counters
        tool = counters.bounded("tool", exposed, str(call.principal.tenant_id))  # capped per tenant
        counters.observe(
            "calls", seconds, method=call.message.method or "", tool=tool,
            backend=counters.bounded("backend", call.backend.name), outcome=outcome,
        )
        note_error(code)
        self._audit.record(
            AuditEntry(
                principal=call.principal,
                virtual_host=call.virtual_host,
                backend=call.backend.name,
                method=call.message.method or "",
                exposed_name=exposed,
                upstream_name=name,
                outcome=outcome,
                error_code=code,
                latency_ms=seconds * 1000.0,
                bytes_in=call.bytes_in,
                bytes_out=bytes_out,
                session_id=call.session_id,
                trace_id=call.trace_id,
                at=call.at,
                backend_kind=call.backend.kind,
                rule=call.rule,
                limit_state=call.limit_state,
                arguments=arguments_kept(call.audit_arguments, call.message.params.get("arguments"), self._hash_key),
                cost=call.cost,
            )
        )

    def deny(self, call: Call, denied: PolicyDenied, headers: Headers = (), *, exposed_name: str) -> Reply:
        """A call the access policy refused: the error, and its audit row with the deciding rule."""
        call.exposed_name = exposed_name
        call.rule = (denied.data or {}).get("rule") or ""
        reply = error_reply(call.message.id, denied, headers)
        self.record(call, "denied", denied.code, len(reply.body))
        return reply

    def fail(self, call: Call, reason: str, headers: Headers = (), *, kind: str = "unavailable") -> Reply:
        """The backend could not answer: a request gets -32004, anything else a bare 502. `kind`
        (unavailable | timeout | bad_reply | busy) is what the upstream error metric counts."""
        log.warning("backend %s unavailable: %s", call.backend.name, reason)
        self._counters.increment("upstream_errors", backend=self._counters.bounded("backend", call.backend.name), kind=kind)
        if call.message.kind is not Kind.REQUEST:
            return Reply(502, headers)
        error = BackendUnavailable(f"Backend {call.backend.name!r} unavailable: {reason}",
                                   data={"backend": call.backend.name})
        reply = error_reply(call.message.id, error, headers)
        self.record(call, "error", error.code, len(reply.body))
        return reply

    def timed_out(self, call: Call, headers: Headers = ()) -> Reply:
        """The backend did not answer within its timeout."""
        call.timed_out = True
        return self.fail(call, f"timed out after {call.backend.timeout:g} s", headers, kind="timeout")

    def _cancel_upstream(self, call: Call, replica: str, headers: list[tuple[str, str]], reason: str = "") -> None:
        """Tell the backend session that the gateway gave up on a request, so it stops working on it
        (MCP: a sender whose request timed out SHOULD cancel it). Sent on its own, never awaited.
        Outside a session there is nothing to send: closing the connection cancels."""
        request_id = call.message.id if call.upstream_id is None else call.upstream_id
        reason = reason or f"the gateway stopped waiting after {call.backend.timeout:g} s"
        body = jsonrpc.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                              "params": {"requestId": request_id, "reason": reason}})
        task = asyncio.ensure_future(self._send_cancel(call, replica, headers, body))
        self._cancelling.add(task)
        task.add_done_callback(self._cancelling.discard)

    async def _send_cancel(self, call: Call, replica: str, headers: list[tuple[str, str]], body: bytes) -> None:
        try:
            reply = await self._upstream.send(call.backend, replica, "POST", headers, body, timeout=call.backend.timeout)
            reply.close()
        except Exception as exc:  # best effort: the backend may be why the call timed out
            log.info("could not cancel a timed-out request at backend %s: %s", call.backend.name, exc)

    async def take_slot(self, call: Call, headers: Headers = ()) -> Gate | Reply | None:
        """A slot of the call's backend, to `leave()` when the call is over (None: no limit
        applies); when none came within the queue time, the refusal (-32004, audited).
        Notifications never wait: a cancellation must not queue behind what it cancels."""
        if self._gates is None or call.backend.max_concurrency <= 0 or call.message.kind is not Kind.REQUEST:
            return None
        try:
            return await self._gates.enter(call.backend)
        except BackendBusy as busy:
            return self.fail(call, str(busy), headers, kind="busy")
        except asyncio.CancelledError:
            self.record(call, "cancelled", None, 0)
            raise

    async def forward(
        self,
        call: Call,
        replica: str,
        headers: list[tuple[str, str]],
        body: bytes,
        *,
        wants_sse: bool,
        reply_headers: Headers = (),
        in_session: bool = False,
        intercept: Callable[[UpstreamReply], UpstreamReply] | None = None,
    ) -> Reply:
        """Send the call's message to `replica` and relay the answer. `intercept` sees the
        backend's reply first (and may stand in for it). The call holds a slot of its backend's
        concurrency limit until its answer is relayed (a streamed one: until the stream closes)."""
        slot = await self.take_slot(call, reply_headers)
        if isinstance(slot, Reply):
            return slot
        reply: Reply | None = None
        try:
            reply = await self._forward(call, replica, headers, body, wants_sse, reply_headers, in_session, intercept)
        except asyncio.CancelledError:
            self.record(call, "cancelled", None, 0)  # the client went away before the answer
            raise
        finally:
            if slot is not None and (reply is None or reply.stream is None):
                slot.leave()
        if slot is not None and reply.stream is not None:
            return Reply(reply.status, reply.headers, reply.body, Stream(reply.stream, slot.leave))
        return reply

    async def forward_to_any(
        self,
        call: Call,
        pick: Callable[[], str],
        headers: list[tuple[str, str]],
        body: bytes,
        *,
        wants_sse: bool,
        reply_headers: Headers = (),
    ) -> Reply:
        """Forward a request that belongs to no backend session, to the replica `pick()` names; when
        that one cannot be reached (nothing was sent, and it is now marked down), to the next."""
        try:
            return await self.forward(call, pick(), headers, body, wants_sse=wants_sse, reply_headers=reply_headers)
        except ReplicaUnreachable:
            return await self.forward(call, pick(), headers, body, wants_sse=wants_sse, reply_headers=reply_headers)

    async def _forward(
        self,
        call: Call,
        replica: str,
        headers: list[tuple[str, str]],
        body: bytes,
        wants_sse: bool,
        reply_headers: Headers,
        in_session: bool,
        intercept: Callable[[UpstreamReply], UpstreamReply] | None,
    ) -> Reply:
        try:
            if call.backend.egress is not None:
                headers = [*headers, *await call.backend.egress.headers(call.principal)]
            reply = await self._upstream.send(
                call.backend, replica, "POST", headers, body, timeout=call.backend.timeout
            )
        except ReplicaUnreachable:
            raise  # nothing was sent: the caller may send it to another replica
        except UpstreamUnavailable as exc:
            return self.fail(call, str(exc), reply_headers)
        except TimeoutError:
            answer = self.timed_out(call, reply_headers)
        else:
            if reply.status == 404 and in_session:
                reply.close()
                raise BackendSessionGone
            cancel = None
            if in_session and call.message.kind is Kind.REQUEST:
                def cancel() -> None:
                    self._cancel_upstream(call, replica, headers, "its answer went past the gateway's limits")
            answer = await self._answer(call, intercept(reply) if intercept else reply, wants_sse, reply_headers, cancel)
        if call.timed_out and in_session and call.message.kind is Kind.REQUEST:
            self._cancel_upstream(call, replica, headers)
        return answer

    async def answer(self, call: Call, reply: UpstreamReply, wants_sse: bool, reply_headers: Headers = ()) -> Reply:
        """Relay a backend's answer to the call (audited like any)."""
        try:
            return await self._answer(call, reply, wants_sse, reply_headers)
        except asyncio.CancelledError:
            self.record(call, "cancelled", None, 0)
            raise

    async def _answer(
        self, call: Call, reply: UpstreamReply, wants_sse: bool, reply_headers: Headers,
        cancel: Callable[[], None] | None = None,
    ) -> Reply:
        """Relay the backend's answer. An answer to a request that is not a JSON-RPC response to it
        (not JSON, not one object, another id) is -32004 with the client's own id; a stream past
        its caps (`StreamCaps`) ends with that error, and `cancel` tells the backend so."""
        if reply.status == 202:
            reply.close()
            return Reply(202, reply_headers)
        if reply.content_type == "text/event-stream":
            events = capped(call, reply.events(), self._stream_caps)
            try:
                # Like a JSON answer's head, the stream's first event must come within the timeout;
                # after that, events show the call is alive and the stream may run as long as it needs.
                async with asyncio.timeout(call.backend.timeout):
                    first = await anext(events, None)
            except UpstreamUnavailable as exc:
                reply.close()
                if isinstance(exc, StreamOverCap) and cancel is not None:
                    cancel()
                return self.fail(call, str(exc), reply_headers, kind=_kind(exc))
            except TimeoutError:
                reply.close()
                return self.timed_out(call, reply_headers)
            if first is not None and (response := response_in(call, first)) is not None:
                # The stream carries the response and nothing else (the common case): answer in
                # one piece instead of relaying a stream.
                await drain(reply, events)
                first = translated(call, first) or first
                self.record(call, *outcome_of(response), len(first.data))
                if wants_sse:
                    return Reply(reply.status, SSE_HEADERS + reply_headers, encode_event(first))
                return Reply(200, (JSON, *reply_headers), first.data)
            if first is None:
                reply.close()
                if call.message.kind is Kind.REQUEST:
                    return self.fail(call, "the backend's stream ended without a response", reply_headers, kind="bad_reply")
                return Reply(202, reply_headers)
            if wants_sse:
                stream = relayed_stream(call, reply, first, events, self.record, cancel)
                return Reply(reply.status, SSE_HEADERS + reply_headers, stream=stream)
            return await self._collect(call, reply, first, events, reply_headers, cancel)
        try:
            async with asyncio.timeout(call.backend.timeout):
                payload = await reply.read()
        except UpstreamUnavailable as exc:
            return self.fail(call, str(exc), reply_headers)
        except TimeoutError:
            reply.close()
            return self.timed_out(call, reply_headers)
        if reply.content_type != "application/json":
            if reply.status < 300 and not payload:
                return Reply(reply.status, reply_headers)
            return self.fail(call, f"HTTP {reply.status} ({reply.content_type or 'no content type'})", reply_headers, kind="bad_reply")
        status = reply.status
        if status == 404 and call.session_id:
            # A stateless backend's 404 means "no such method"; to a client in a session, 404
            # means "session gone, start over". The JSON-RPC error alone says what happened.
            status = 200
        if call.message.kind is not Kind.REQUEST:
            return Reply(status, (JSON, *reply_headers), payload)
        if not (call.audited or call.translate or call.upstream_id is not None):
            # Nothing on the way reads this answer (a pass-through list, say) and it carries the
            # client's own id, so only its shape is checked: parsing a 500 KB list would cost
            # more CPU than relaying it.
            if not _object_shaped(payload):
                return self.fail(call, "its answer is not a JSON-RPC response (not one JSON object)",
                                 reply_headers, kind="bad_reply")
            return Reply(status, (JSON, *reply_headers), payload)
        response, problem = _response_to(call, payload)
        if response is None:
            return self.fail(call, f"its answer is {problem}", reply_headers, kind="bad_reply")
        shown = call.translate(response) if call.translate else response
        if shown is not None and (shown is not response or problem):
            payload = jsonrpc.dumps(shown)
        self.record(call, *outcome_of(response), len(payload))
        return Reply(status, (JSON, *reply_headers), payload)

    async def _collect(
        self, call: Call, reply: UpstreamReply, first: SseEvent, events: AsyncIterator[SseEvent], reply_headers: Headers,
        cancel: Callable[[], None] | None = None,
    ) -> Reply:
        """A client that takes only JSON gets the response alone; notifications are dropped."""
        try:
            async for event in chain(first, events):
                if (response := response_in(call, event)) is not None:
                    body = (translated(call, event) or event).data
                    self.record(call, *outcome_of(response), len(body))
                    return Reply(200, (JSON, *reply_headers), body)
        except UpstreamUnavailable as exc:
            if isinstance(exc, StreamOverCap) and cancel is not None:
                cancel()
            return self.fail(call, str(exc), reply_headers, kind=_kind(exc))
        finally:
            reply.close()
        if call.message.kind is Kind.REQUEST:
            return self.fail(call, "the backend's stream ended without a response", reply_headers, kind="bad_reply")
        return Reply(202, reply_headers)


def _kind(exc: UpstreamUnavailable) -> str:
    """What the upstream error metric counts a broken answer as."""
    return "bad_reply" if isinstance(exc, StreamOverCap) else "unavailable"


def _object_shaped(payload: bytes) -> bool:
    """Whether `payload` opens and closes as one JSON object: what a relayed answer nobody parses
    is held to (an array, a bare value or a body cut short is not)."""
    body = payload.strip()
    return body[:1] == b"{" and body[-1:] == b"}"


def _response_to(call: Call, payload: bytes) -> tuple[dict[str, Any] | None, str]:
    """The JSON-RPC response to the call's request that `payload` is, or (None, what it is
    instead); a response re-made from the payload comes with a note saying why."""
    try:
        message = jsonrpc.loads(payload)
    except ValueError:
        return None, "not JSON"
    if not isinstance(message, dict):
        return None, "not a JSON-RPC response (a JSON array or value)"
    expected = call.message.id if call.upstream_id is None else call.upstream_id
    if "method" in message or ("result" in message) == ("error" in message) or message.get("jsonrpc") != "2.0":
        return None, "not a JSON-RPC response"
    if message.get("id") is None and "error" in message:
        # Its error to a request it could not read (JSON-RPC answers those with a null id) is still
        # its answer: under the id the call carries.
        return {**message, "id": expected}, "an error with a null id"
    if message.get("id") != expected:
        return None, "a response to another request (a wrong id)"
    return message, ""
