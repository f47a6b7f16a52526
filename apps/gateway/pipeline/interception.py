"""The stage of a host's interceptors (docs/interceptors.md): each call's request is inspected
before it is forwarded, and its result before the client sees it, by the host's interceptors in the
order written (`apps.kernel.interceptors`). Each passes, rewrites (the next one sees the rewrite),
flags (a result's `_meta` says so; nothing else changes) or refuses: -32006 naming the interceptor,
the call's outcome `denied`. A webhook is asked through the `InterceptorHooks` port; one that does
not answer fails open or closed, as configured. Every decision but a built-in's plain pass goes on
the audit row and into the `interceptions` metric.

A host without interceptors has `vhost.interceptors` None: the stage does not apply, and its calls
pay nothing for it."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator
from typing import Any

from apps.gateway.pipeline.calls import AUDITED, Call, Next, Outcome
from apps.gateway.pipeline.metrics import Counters
from apps.gateway.pipeline.ports import HookFailed, InterceptorHooks
from apps.gateway.pipeline.replies import JSON, Reply, Stream, accepted, error_reply
from apps.gateway.pipeline.values import VirtualHostView
from apps.gateway.protocol import jsonrpc
from apps.gateway.protocol.errors import InterceptorRefused
from apps.gateway.protocol.jsonrpc import Kind
from apps.gateway.protocol.sse import SseEvent, SseParser, encode_event
from apps.kernel.audit_entry import Interception as Note
from apps.kernel.interceptors import Interceptor
from apps.kernel.interceptors.base import Decision, Payload, Subject
from apps.kernel.interceptors.webhook import HookRequest

log = logging.getLogger(__name__)

#: Where a flagged result tells the client what was flagged, by interceptor name.
META_KEY = "gateway/interceptors"


class Refused(Exception):
    def __init__(self, error: InterceptorRefused) -> None:
        self.error = error


class Interception:
    """Runs the host's interceptors over an audited call (`tools/call`, `resources/read`,
    `prompts/get`) they apply to, and over the result a task's follow-up brings."""

    def __init__(self, hooks: InterceptorHooks, counters: Counters) -> None:
        self._hooks = hooks
        self._counters = counters

    def applies(self, call: Call) -> bool:
        return call.vhost.interceptors is not None and (call.read_back or call.message.method in AUDITED)

    async def __call__(self, call: Call, outcome: Outcome, then: Next) -> Reply:
        interceptors = call.vhost.interceptors
        assert interceptors is not None
        method = call.message.method or ""
        if call.message.kind is not Kind.REQUEST:
            # A `tools/call` without an id asks for nothing back, and would reach the backend
            # uninspected: on a host with interceptors it goes no further.
            return accepted().with_headers(call.headers)
        if method not in AUDITED:
            # A task's follow-up (`tasks/result`, `tasks/get`) may bring the tool's result: it is
            # inspected as a `tools/call` result by the interceptors that apply to every tool
            # (the tool it ran is not known here).
            reply = await then()
            chain = interceptors.on("result", "tools/call", "")
            return reply if not chain else await self._result(chain, call, outcome, reply, "tools/call", "")
        target = call.exposed_name if call.exposed_name is not None else call.target_name()
        if chain := interceptors.on("request", method, target):
            try:
                payload, _ = await self._decide(chain, call, outcome, "request", method, target,
                                                Payload(value=call.message.params))
                if payload is not None:
                    params = _renaming_refused(call, payload.value)
            except Refused as refused:
                outcome.arguments_sent = None  # what the client sent was refused: the audit row keeps none of it
                return self._refusal(call, outcome, refused.error)
            if payload is not None:
                call = call.with_params(params)
                outcome.arguments_sent = params.get("arguments")
        reply = await then(call)
        if not (chain := interceptors.on("result", method, target)):
            return reply
        return await self._result(chain, call, outcome, reply, method, target)

    async def _result(
        self, chain: tuple[Interceptor, ...], call: Call, outcome: Outcome, reply: Reply, method: str, target: str,
    ) -> Reply:
        """The reply with its response inspected: a JSON body, a one-event SSE body, or the
        response event of a relayed stream (the events before it pass as they are)."""
        if reply.stream is not None:
            inspected = _Chunks(self._stream(chain, call, outcome, reply.stream, method, target), reply.stream)
            return Reply(reply.status, reply.headers, reply.body, Stream(inspected, lambda: None))
        content_type = next((value for name, value in reply.headers if name == "content-type"), "")
        try:
            if content_type == JSON[1]:
                checked = await self._response(chain, call, outcome, reply.body, method, target)
                if checked is None:
                    return reply
                outcome.bytes_out = len(checked)
                return Reply(reply.status, reply.headers, checked)
            if content_type == "text/event-stream":
                events = SseParser().feed(reply.body)
                if len(events) != 1:
                    return reply
                event = events[0]
                checked = await self._response(chain, call, outcome, event.data, method, target)
                if checked is None:
                    return reply
                body = encode_event(SseEvent(checked, event.event, event.id, event.retry))
                outcome.bytes_out = len(body)
                return Reply(reply.status, reply.headers, body)
        except Refused as refused:
            return self._refusal(call, outcome, refused.error)
        return reply

    async def _stream(
        self, chain: tuple[Interceptor, ...], call: Call, outcome: Outcome, stream: Stream, method: str, target: str,
    ) -> AsyncGenerator[bytes, None]:
        """A relayed stream's chunks (one event each), its response event inspected."""
        expected = call.message.id
        async for chunk in stream:
            if b'"result"' not in chunk and b'"error"' not in chunk:
                yield chunk
                continue
            events = SseParser().feed(chunk)
            event = events[0] if len(events) == 1 else None
            if event is None or not _is_response(event.data, expected):
                yield chunk
                continue
            try:
                checked = await self._response(chain, call, outcome, event.data, method, target)
            except Refused as refused:
                error = refused.error
                data = jsonrpc.dumps(jsonrpc.error_message(call.message.id, error.to_error()))
                checked = data
                outcome.answered("denied", error.code, outcome.bytes_out)
            if checked is None:
                yield chunk
                continue
            rewritten = encode_event(SseEvent(checked, event.event, event.id, event.retry))
            outcome.bytes_out += len(rewritten) - len(chunk)
            yield rewritten

    async def _response(
        self, chain: tuple[Interceptor, ...], call: Call, outcome: Outcome, data: bytes, method: str, target: str,
    ) -> bytes | None:
        """The response `data` as the client gets it after `chain`: None when unchanged; raises
        Refused."""
        payload, flags = await self._decide(chain, call, outcome, "result", method, target, Payload(text=data.decode()))
        if payload is None and not flags:
            return None
        value = (payload or Payload(text=data.decode())).value
        value = {**value, "jsonrpc": "2.0", "id": call.message.id}  # a rewrite answers the same call
        if flags and isinstance(result := value.get("result"), dict):
            meta = result.get("_meta")
            meta = {**meta} if isinstance(meta, dict) else {}
            meta[META_KEY] = flags  # the gateway's own key: whatever a backend put there is not kept
            value["result"] = {**result, "_meta": meta}
        return jsonrpc.dumps(value)

    async def _decide(
        self, chain: tuple[Interceptor, ...], call: Call, outcome: Outcome, phase: str, method: str, target: str,
        payload: Payload,
    ) -> tuple[Payload | None, dict[str, Any]]:
        """(the payload as rewritten, None when no interceptor changed it; the flags raised, by
        interceptor), after each interceptor of `chain` in order; raises Refused."""
        changed = False
        flags: dict[str, Any] = {}
        for interceptor in chain:
            subject = Subject(phase, method, target, payload)
            note: Note
            if interceptor.inspector is not None:
                try:
                    decision = interceptor.inspector.inspect(subject)
                except Exception as exc:  # a payload it cannot read (nested past any parser's depth, say)
                    log.warning("interceptor %s on %s/%s failed, refusing the call: %r", interceptor.name,
                                call.vhost.tenant_slug, call.vhost.slug, exc)
                    decision = Decision("refuse", reason=f"it could not inspect the {phase} ({type(exc).__name__})")
                if decision.action == "pass":
                    continue
                note = {"interceptor": interceptor.name, "kind": interceptor.kind, "phase": phase,
                        "action": decision.action}
            else:
                decision, note = await self._ask(interceptor, call, subject)
            if decision.findings:
                note["findings"] = list(decision.findings)
            self._note(outcome, note)
            if decision.action == "refuse":
                data: dict[str, Any] = {"interceptor": interceptor.name, "phase": phase}
                if decision.findings:
                    data["findings"] = list(decision.findings)
                where = "request" if phase == "request" else "result"
                raise Refused(InterceptorRefused(
                    f"Interceptor {interceptor.name!r} refused the call's {where}: {decision.reason}", data=data))
            if decision.action == "rewrite" and decision.payload is not None:
                payload, changed = decision.payload, True
            elif decision.action == "flag":
                flags[interceptor.name] = {"kind": interceptor.kind, **(decision.meta or {})}
        return (payload if changed else None), flags

    async def _ask(self, interceptor: Interceptor, call: Call, subject: Subject) -> tuple[Decision, Note]:
        """A webhook's decision, and its audit note with the round trip's time; a webhook that
        gives none fails open (a pass) or closed (a refusal), as configured."""
        webhook = interceptor.webhook
        assert webhook is not None
        principal = call.principal
        request: HookRequest = {
            "interceptor": interceptor.name, "phase": subject.phase, "method": subject.method,
            "target": subject.target, "virtual_host": call.vhost.slug,
            "caller": {"tenant": principal.tenant_slug, "key": principal.key_name,
                       **({"team": principal.team} if principal.team else {})},
            "trace_id": call.trace_id, "payload": subject.payload.value,
        }
        started = time.perf_counter()
        note: Note = {"interceptor": interceptor.name, "kind": "webhook", "phase": subject.phase, "action": "pass"}
        try:
            decision = await self._hooks.ask(webhook, request)
        except Exception as exc:
            failed = exc if isinstance(exc, HookFailed) else HookFailed(f"it could not be asked ({exc!r})", kind="error")
            note["ms"] = round((time.perf_counter() - started) * 1000, 3)
            note["reason"] = str(failed)
            if webhook.fail_open:
                note["action"] = "failed_open"
                return Decision("pass"), note
            note["action"] = "failed_closed"
            return Decision("refuse", reason=f"the service gave no decision ({failed}), and the interceptor "
                                             "refuses calls then"), note
        note["ms"] = round((time.perf_counter() - started) * 1000, 3)
        note["action"] = decision.action
        if decision.action == "refuse":
            note["reason"] = decision.reason
        return decision, note

    def _note(self, outcome: Outcome, note: Note) -> None:
        if outcome.interceptions is None:
            outcome.interceptions = []
        outcome.interceptions.append(note)
        self._counters.increment("interceptions", kind=note["kind"], phase=note["phase"], action=note["action"])

    def _refusal(self, call: Call, outcome: Outcome, error: InterceptorRefused) -> Reply:
        reply = error_reply(call.message.id, error, call.headers)
        outcome.answered("denied", error.code, len(reply.body))
        return reply


def stream_event_kept(vhost: VirtualHostView, data: bytes) -> bool:
    """Whether a session's GET stream may carry this event on `vhost`. On a host whose interceptors
    inspect results, a JSON-RPC response there has been through none of them — a call's answer
    replayed to a client resuming its stream with `Last-Event-ID`, or one a backend sends out of
    turn — so it is left out (the client's call then ends as one whose answer never came, and it
    asks again through the call path)."""
    interceptors = vhost.interceptors
    if interceptors is None or not interceptors.results or (b'"result"' not in data and b'"error"' not in data):
        return True
    try:
        message = jsonrpc.loads(data)
    except ValueError:
        return True
    return not (isinstance(message, dict) and "method" not in message and ("result" in message or "error" in message))


class _Chunks:
    """A relayed stream's chunks as inspected; closing them closes the stream they come from, even
    if they were never read."""

    def __init__(self, chunks: AsyncGenerator[bytes, None], source: Stream) -> None:
        self._chunks = chunks
        self._source = source

    def __aiter__(self) -> _Chunks:
        return self

    async def __anext__(self) -> bytes:
        return await self._chunks.__anext__()

    async def aclose(self) -> None:
        try:
            await self._chunks.aclose()
        finally:
            await self._source.aclose()


def _renaming_refused(call: Call, params: object) -> dict[str, Any]:
    """Rewritten `params` as they go on: what the call names (its tool or prompt, its resource URI)
    was routed and authorized before the interceptors ran, so a rewrite that changes it — a webhook's
    answer, or a secret masked in a URI — refuses the call rather than send either name."""
    field = AUDITED[call.message.method or ""]
    if not isinstance(params, dict) or params.get(field) != call.message.params.get(field):
        raise Refused(InterceptorRefused(
            f"An interceptor rewrote what the call names ({field}); the call is refused rather than sent "
            f"as the client wrote it", data={"phase": "request", "field": field}))
    return params


def _is_response(data: bytes, expected: object) -> bool:
    try:
        message = jsonrpc.loads(data)
    except ValueError:
        return False
    return isinstance(message, dict) and "method" not in message and message.get("id") == expected
