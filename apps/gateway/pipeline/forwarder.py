"""Every message the gateway sends on to a backend takes this one path (docs/architecture.md):

    route → authorize          (`routed`, on a host whose names are rewritten)
    Call.begin                 (built once, frozen)
    span "gateway.forward"
      stages: Denied → Limits → Interception  (each only where it applies)
      answer: local tools, or the era's leg → upstream → the backend's answer
              (each exchange with a backend holds one of its slots: `admission.Slots`)
    finally: the audit row     (from the `Outcome` the stages set; a stream's when it closes)

A stage is one callable in `Forwarder.stages` (`calls.Stage`). The eras differ only in how they
reach a backend (`calls.Leg`); errors on the way become the call's reply in `_run`, and nowhere else."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

from apps.gateway.pipeline.admission import Denied, Limits, Slots
from apps.gateway.pipeline.answers import Resuming, StreamCaps, answer
from apps.gateway.pipeline.backends import BackendCatalog, BackendRefused
from apps.gateway.pipeline.calls import (
    AS_SENT,
    BackendSessionGone,
    BadReply,
    Call,
    Leg,
    Outbound,
    Outcome,
    Stage,
    arguments_kept,
)
from apps.gateway.pipeline.compose import BackendMessages, admit, route, stream_event_id
from apps.gateway.pipeline.concurrency import BackendBusy, BackendGates
from apps.gateway.pipeline.host_lists import HostLists
from apps.gateway.pipeline.interception import Interception
from apps.gateway.pipeline.list_pieces import ListPieces
from apps.gateway.pipeline.local import LocalTools
from apps.gateway.pipeline.metrics import Counters, note_error
from apps.gateway.pipeline.ports import (
    AuditSink,
    ConnectionRequired,
    InterceptorHooks,
    RateLimiter,
    ReplicaUnreachable,
    ToolServer,
    Upstream,
    UpstreamReply,
    UpstreamUnavailable,
)
from apps.gateway.pipeline.replies import Reply, accepted, error_reply, result_reply
from apps.gateway.pipeline.standalone import NoHooks
from apps.gateway.pipeline.task_ids import TaskIds
from apps.gateway.pipeline.tracing import NO_SPAN, Tracer
from apps.gateway.pipeline.values import HttpRequest, VirtualHostView
from apps.gateway.protocol import jsonrpc
from apps.gateway.protocol.errors import (
    URL_ELICITATION_REQUIRED,
    BackendUnavailable,
    GatewayError,
    InvalidParams,
    PolicyDenied,
    UrlElicitationRequired,
)
from apps.gateway.protocol.jsonrpc import Kind, Message
from apps.kernel.audit_entry import AuditEntry, TaskEnd
from apps.kernel.identity import Principal

log = logging.getLogger(__name__)

#: Outcomes that give the call's span error status (a tool's own error is a result, not a failure).
_FAILED = frozenset({"error", "denied", "rate_limited", "over_budget"})


class Forwarder:
    def __init__(
        self,
        *,
        upstream: Upstream,
        backends: BackendCatalog,
        lists: HostLists,
        pieces: ListPieces,
        local: LocalTools,
        audit: AuditSink,
        counters: Counters,
        tracer: Tracer,
        limiter: RateLimiter,
        gates: BackendGates,
        hash_key: bytes = b"",
        stream_caps: StreamCaps | None = None,
        task_ids: TaskIds | None = None,
        hooks: InterceptorHooks | None = None,
    ) -> None:
        self._upstream = upstream
        self._backends = backends
        self._lists = lists
        self._pieces = pieces
        self._local = local
        self._audit = audit
        self._counters = counters
        self.tracer = tracer
        self._hash_key = hash_key
        #: What one call's answer stream from a backend may bring.
        self._stream_caps = stream_caps or StreamCaps()
        #: The stages of every call, in order.
        self.stages: Sequence[Stage] = (Denied(), Limits(limiter, counters), Interception(hooks or NoHooks(), counters))
        #: The backend's concurrency slots, held around each exchange with it.
        self._slots = Slots(gates)
        #: Task ids on hosts with several backends (without a shared secret, valid on this instance only).
        self._task_ids = task_ids or TaskIds(secrets.token_bytes(32))
        #: Cancellations of timed-out requests on their way to backends.
        self._cancelling: set[asyncio.Task[None]] = set()

    async def direct(
        self, leg: Leg, request: HttpRequest, vhost: VirtualHostView, principal: Principal, message: Message, *,
        map_key: str, wants_sse: bool, body: bytes | None = None,
    ) -> Reply:
        """Send `message` (encoded as `body`, by default the request's) to the backend under
        `map_key` as it is, and relay the answer; a list the backend answers in a page too big to
        send is handed out in pieces (`list_pieces.py`)."""
        backend = vhost.mounts[map_key]
        reshape = refused = None
        if backend.server is None:
            prepared = self._pieces.prepare(vhost, message)
            message, reshape, refused = prepared.message, prepared.reshape, prepared.refused
            body = body if prepared.body is None else prepared.body
        call = Call.begin(request, vhost, principal, backend, message, session_id=leg.session_id,
                          map_key=map_key, body=body, wants_sse=wants_sse, reshape=reshape, denied=refused,
                          event_id=_stream_ids(leg, map_key) if vhost.composed else None)
        return await self._run(call, leg)

    async def routed(
        self, leg: Leg, request: HttpRequest, vhost: VirtualHostView, principal: Principal, message: Message, *,
        wants_sse: bool,
    ) -> Reply:
        """A routed request (`names.ROUTED_METHODS`) on a host whose names are rewritten: the host's
        `tool_search`, or the one backend its name routes to, in that backend's terms and with what
        comes back in the client's; authorized by the host's access policy. A name that routes
        nowhere raises InvalidParams (ResourceNotFound): nothing was called, so nothing is audited."""
        if (search := self._local.search_server(vhost, message)) is not None:
            call = Call.begin(request, vhost, principal, search.backend, message, session_id=leg.session_id,
                              wants_sse=wants_sse)
            return await self._run(call, leg)
        with self.tracer.span("gateway.route") as span:
            routing = route(vhost, message, modern=leg.modern, body=request.body)
            span.set("gateway.backend", routing.backend.name)
            span.set("gateway.tool.exposed_name", routing.exposed_name)
        refusal: PolicyDenied | None = None
        try:
            with self.tracer.span("gateway.authorize") as span:
                rule = await admit(self._lists, vhost, principal, routing)
                span.set("gateway.rule", rule)
        except PolicyDenied as error:
            refusal, rule = error, (error.data or {}).get("rule") or ""
        call = Call.begin(
            request, vhost, principal, routing.backend, routing.message, session_id=leg.session_id,
            map_key=routing.map_key, body=routing.body, wants_sse=wants_sse,
            translate=self.backend_messages(vhost, principal, routing.map_key),
            exposed_name=routing.exposed_name, rule=rule, denied=refusal,
            event_id=_stream_ids(leg, routing.map_key),
        )
        return await self._run(call, leg)

    def backend_messages(
        self, vhost: VirtualHostView, principal: Principal, map_key: str, *, via_hub: bool = False,
    ) -> BackendMessages:
        """What the backend under `map_key` sends, as `principal` sees it on `vhost` (`compose.py`):
        its `list_changed` makes its lists stale (with `via_hub` the notification itself is left to
        the merged stream), its task ids are shown as the host shows them to this caller (`task_ids.py`)."""
        backend_id = vhost.mounts[map_key].id
        tasks = None if vhost.naming.single_key is not None else partial(
            self._task_ids.expose, vhost.tenant_id, vhost.slug, principal.key_id, map_key)
        return BackendMessages(vhost.naming, map_key, lambda method: self._lists.invalidate(backend_id, method),
                               drop_list_changed=via_hub, tasks=tasks)

    def task_of(self, vhost: VirtualHostView, principal: Principal, exposed: object) -> tuple[str, str] | None:
        """(map key, the backend's own id) of a task id `vhost` showed `principal`; None for any other."""
        target = self._task_ids.route(vhost.tenant_id, vhost.slug, principal.key_id, exposed)
        return target if target is not None and target[0] in vhost.mounts else None

    async def tasked(
        self, leg: Leg, request: HttpRequest, vhost: VirtualHostView, principal: Principal, message: Message, *,
        wants_sse: bool, map_key: str | None = None,
    ) -> Reply:
        """A task request on a host with several backends: one that names a task (2025-11-25's
        `task_ids.TASK_METHODS`, the extension's `EXTENSION_TASK_METHODS`) goes to the backend that
        runs it, with that backend's id for it (in the body, and in `Mcp-Name` for a backend of the
        stateless era); another (`tasks/list`) to the backend under `map_key`. Task ids in the answer
        are shown as the host shows them. An id this host never showed this caller is -32602."""
        params = message.params
        exposed: str | None = None
        if map_key is None:
            target = self.task_of(vhost, principal, params.get("taskId"))
            if target is None:
                raise InvalidParams(f"Invalid params: unknown task {params.get('taskId')!r}", data={"taskId": params.get("taskId")})
            exposed = params["taskId"]
            map_key, upstream = target
            params = {**params, "taskId": upstream}
        raw = {**message.raw, "params": params}
        backend = vhost.mounts[map_key]
        sent = Message(Kind.REQUEST, raw, method=message.method, id=message.id)
        call = Call.begin(request, vhost, principal, backend, sent, session_id=leg.session_id, map_key=map_key,
                          body=jsonrpc.dumps(raw), wants_sse=wants_sse, exposed_name=exposed,
                          translate=self.backend_messages(vhost, principal, map_key),
                          event_id=_stream_ids(leg, map_key))
        return await self._run(call, leg)

    async def _run(self, call: Call, leg: Leg) -> Reply:
        """The call's stages, then its answer; the one place its errors become its reply and its
        audit row is written."""
        outcome = Outcome()
        reply: Reply | None = None
        # A refused call is never forwarded: it has no forwarding span.
        with (self._span(call) if call.denied is None else NO_SPAN) as outcome.span:
            try:
                reply = await self._staged(call, leg, outcome, 0)
            except GatewayError as error:
                reply = error_reply(call.message.id, error, call.headers)
                outcome.answered("error", error.code, len(reply.body))
            except ConnectionRequired as needed:
                reply = self._connect_first(call, leg, outcome, needed)
            except BackendBusy as busy:
                reply = self._unavailable(call, outcome, str(busy), "busy")
            except TimeoutError:
                reply = self._unavailable(call, outcome, f"timed out after {call.backend.timeout:g} s", "timeout")
            except (UpstreamUnavailable, BackendRefused) as exc:
                reply = self._unavailable(call, outcome, str(exc), "bad_reply" if isinstance(exc, BadReply) else "unavailable")
            except BaseException as error:
                # The client went away before the answer; or a failure the request as a whole
                # answers (its session store is down, say).
                outcome.answered("cancelled" if isinstance(error, asyncio.CancelledError) else "error", None, 0)
                raise
            finally:
                if reply is None or reply.stream is None:
                    self._write(call, outcome)
        if reply.stream is None:
            return reply
        return reply.after_stream(lambda: self._write(call, outcome))

    async def _staged(self, call: Call, leg: Leg, outcome: Outcome, index: int) -> Reply:
        stages = self.stages
        while index < len(stages):
            stage = stages[index]
            if stage.applies(call):
                def then(changed: Call | None = None, after: int = index + 1) -> Awaitable[Reply]:
                    return self._staged(call if changed is None else changed, leg, outcome, after)

                return await stage(call, outcome, then)
            index += 1
        return await self._answer(call, leg, outcome)

    async def _answer(self, call: Call, leg: Leg, outcome: Outcome) -> Reply:
        """The backend's answer: the gateway's own for a backend it answers itself, else the
        backend's, through the era's leg. Two tries: a backend session the backend forgot, or a
        replica found down before anything was sent, is tried once more elsewhere."""
        backend = call.backend
        if backend.server is not None:
            if call.message.kind is not Kind.REQUEST:
                return accepted().with_headers(call.headers)  # no notification means anything to a tool server
            return await self._slots.hold(call, partial(self._local_answer, call, backend.server, leg.modern, outcome))
        info = await self._backends.info(backend, call.principal)
        lost: Outbound | None = None
        for attempt in (1, 2):
            out = await leg.outbound(call, info, lost)
            if isinstance(out, Reply):
                return out
            try:
                return await self._exchange(call.bridged(out), out, outcome)
            except ReplicaUnreachable:
                if attempt == 2:
                    if out.in_session:
                        raise UpstreamUnavailable("the backend keeps losing its session") from None
                    raise
            except BackendSessionGone:
                if attempt == 2:
                    raise UpstreamUnavailable("the backend keeps losing its session") from None
            lost = out
        raise AssertionError("unreachable")

    async def _local_answer(self, call: Call, server: ToolServer, modern: bool, outcome: Outcome) -> Reply:
        result = await self._local.answer(call, server, modern=modern)
        reply = result_reply(call.message.id, result, sse=call.sse_only, headers=call.headers)
        outcome.answered("tool_error" if result.get("isError") is True else "ok", None, len(reply.body))
        return reply

    async def _exchange(self, call: Call, out: Outbound, outcome: Outcome) -> Reply:
        """The client's reply of `out`'s answer: a continued call's from its request state, else
        the backend's, with one of the backend's slots held for the exchange."""
        if out.resumed is not None:
            return await answer(call, out.resumed, outcome, self._stream_caps)
        return await self._slots.hold(call, partial(self._send, call, out, outcome))

    async def _send(self, call: Call, out: Outbound, outcome: Outcome) -> Reply:
        """Send `out` to one replica of the call's backend and make the client's reply of the answer."""
        replica = out.pick()
        request = call.message.kind is Kind.REQUEST
        headers = out.headers
        if call.backend.egress is not None:
            headers = [*headers, *await call.backend.egress.headers(call.principal)]
        try:
            reply = await self._upstream.send(call.backend, replica, "POST", headers, out.body, timeout=call.backend.timeout)
            if reply.status == 404 and out.in_session:
                reply.close()
                raise BackendSessionGone
            cancel = None
            if out.in_session and request:
                def cancel() -> None:
                    self._cancel_upstream(call, replica, headers, "its answer went past the gateway's limits")
                if reply.content_type == "text/event-stream":
                    reply = Resuming(call, reply, partial(self._resume, call, replica, headers))
            return await answer(call, out.intercept(reply) if out.intercept else reply, outcome, self._stream_caps, cancel)
        except TimeoutError:
            if out.in_session and request:
                self._cancel_upstream(call, replica, headers, f"the gateway stopped waiting after {call.backend.timeout:g} s")
            raise

    async def _resume(self, call: Call, replica: str, headers: list[tuple[str, str]], last_event_id: str) -> UpstreamReply:
        """The rest of a call's answer stream the backend ended early: GET in the call's backend
        session, from `last_event_id` on (`answers.Resuming`)."""
        sent = [(name, value) for name, value in headers if name not in {"content-type", "accept"}]
        sent += [("accept", "text/event-stream"), ("last-event-id", last_event_id)]
        # The call's answer, resumed: a backend silent for its timeout is given up, as on the POST.
        return await self._upstream.send(call.backend, replica, "GET", sent, timeout=call.backend.timeout,
                                         long_lived=False)

    def _unavailable(self, call: Call, outcome: Outcome, reason: str, kind: str) -> Reply:
        """The backend could not answer: a request gets -32004, anything else a bare 502. `kind`
        (unavailable | timeout | bad_reply | busy) is what the upstream error metric counts."""
        log.warning("backend %s unavailable: %s", call.backend.name, reason)
        self._counters.increment("upstream_errors", backend=self._counters.bounded("backend", call.backend.name), kind=kind)
        if call.message.kind is not Kind.REQUEST:
            return Reply(502, call.headers)
        error = BackendUnavailable(f"Backend {call.backend.name!r} unavailable: {reason}",
                                   data={"backend": call.backend.name})
        reply = error_reply(call.message.id, error, call.headers)
        outcome.answered("error", error.code, len(reply.body))
        return reply

    def _connect_first(self, call: Call, leg: Leg, outcome: Outcome, needed: ConnectionRequired) -> Reply:
        """The answer to a call that needs the caller's own account at the backend first: where to
        connect it, as the client's era can show it — an `InputRequiredResult` carrying a URL-mode
        elicitation (2026-07-28), a -32042 error (2025-11-25), else -32004 with the link in its words."""
        url = f"{call.origin}{needed.path}"
        words = f"{needed}: connect your {needed.backend} account at {url}, then try again"
        if call.message.kind is not Kind.REQUEST:
            outcome.answered("error", None, 0)
            return Reply(502, call.headers)
        if leg.url_elicitation and leg.modern:
            elicitation = {"method": "elicitation/create", "params": {"mode": "url", "message": words, "url": url}}
            result = {"resultType": "input_required", "inputRequests": {f"gw-connect.{needed.backend}": elicitation}}
            reply = result_reply(call.message.id, result, sse=call.sse_only, headers=call.headers)
            outcome.answered("error", URL_ELICITATION_REQUIRED, len(reply.body))
            return reply
        error: GatewayError
        if leg.url_elicitation:
            elicitation_id = f"gw-connect.{needed.backend}.{secrets.token_hex(8)}"
            error = UrlElicitationRequired(words, data={"elicitations": [
                {"mode": "url", "elicitationId": elicitation_id, "url": url, "message": words}]})
        else:
            error = BackendUnavailable(f"Backend {call.backend.name!r} unavailable: {words}",
                                       data={"backend": call.backend.name, "url": url})
        reply = error_reply(call.message.id, error, call.headers)
        outcome.answered("error", error.code, len(reply.body))
        return reply

    def _cancel_upstream(self, call: Call, replica: str, headers: list[tuple[str, str]], reason: str) -> None:
        """Tell the backend session that the gateway gave up on a request, so it stops working on it
        (MCP: a sender whose request timed out SHOULD cancel it). Sent on its own, never awaited.
        Outside a session there is nothing to send: closing the connection cancels."""
        request_id = call.message.id if call.upstream_id is None else call.upstream_id
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

    def _span(self, call: Call) -> Any:
        """The span of forwarding `call` (until its answer is relayed); its audit row sets the outcome."""
        if not self.tracer.enabled:
            return NO_SPAN
        attributes = {"gateway.backend": call.backend.name, "gateway.backend.kind": call.backend.kind,
                      "mcp.method.name": call.message.method or ""}
        if call.exposed_name is not None and call.audited:  # (a task request's is the task id)
            attributes["gateway.tool.exposed_name"] = call.exposed_name
        return self.tracer.span("gateway.forward", **attributes)

    def _write(self, call: Call, outcome: Outcome) -> None:
        """The call's audit row (if its method is audited), its metrics and its span's outcome;
        or, for a request that found the task it follows ended, that task's final outcome."""
        if outcome.task_end is not None and isinstance(task_id := call.message.params.get("taskId"), str):
            ended, code = outcome.task_end
            self._audit.task_ended(TaskEnd(call.principal.tenant_id, call.vhost.slug, call.backend.name, task_id,
                                           ended, code, time.time()))
        if not call.audited:
            return
        result, code = outcome.outcome or "error", outcome.code
        name = call.target_name()
        exposed = name if call.exposed_name is None else call.exposed_name
        if (span := outcome.span) is not NO_SPAN:
            span.set("gateway.outcome", result)
            span.set("gateway.tool.exposed_name", exposed)
            span.set("gateway.tool.upstream_name", name)
            if code is not None:
                span.set("rpc.jsonrpc.error_code", code)
            if result in _FAILED:
                span.fail(f"{result}{'' if code is None else f' ({code})'}")
        seconds = time.perf_counter() - call.started
        counters = self._counters
        tool = counters.bounded("tool", exposed, str(call.principal.tenant_id))  # capped per tenant
        counters.observe(
            "calls", seconds, method=call.message.method or "", tool=tool,
            backend=counters.bounded("backend", call.backend.name), outcome=result,
        )
        note_error(code)
        self._audit.record(
            AuditEntry(
                principal=call.principal,
                virtual_host=call.vhost.slug,
                backend=call.backend.name,
                method=call.message.method or "",
                exposed_name=exposed,
                upstream_name=name,
                outcome=result,
                error_code=code,
                latency_ms=seconds * 1000.0,
                bytes_in=call.bytes_in,
                bytes_out=outcome.bytes_out,
                session_id=call.session_id,
                trace_id=call.trace_id,
                at=call.at,
                backend_kind=call.backend.kind,
                rule=call.rule,
                limit_state=outcome.limit_state,
                arguments=arguments_kept(call.vhost.audit_arguments, call.message.params.get("arguments")
                                         if outcome.arguments_sent is AS_SENT else outcome.arguments_sent, self._hash_key),
                cost=outcome.cost,
                task_id=outcome.task_id,
                interceptions=() if outcome.interceptions is None else tuple(outcome.interceptions),
            )
        )


def _stream_ids(leg: Leg, map_key: str) -> Callable[[str], str | None] | None:
    """How a composed host's session shows the event ids of a backend's answer stream (`compose.py`):
    resumable through the session's GET stream. The stateless era resumes nothing."""
    if not leg.session_id:
        return None
    return lambda event_id: stream_event_id({map_key: event_id})
