"""The one path of a call (`Forwarder`), with its ports faked: exactly one audit row whichever way
a call ends (answered, refused, failed, cancelled, streamed: when its stream closes), a stage added
to `Forwarder.stages` runs on every call, local or forwarded, and a backend's answer that answers
nothing is the call's -32004."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import pytest

from apps.gateway.pipeline.answers import MAX_IDLE_RESUMES
from apps.gateway.pipeline.calls import Call, Next, Outbound, Outcome
from apps.gateway.pipeline.compose import stream_positions
from apps.gateway.pipeline.concurrency import BackendGates
from apps.gateway.pipeline.forwarder import Forwarder
from apps.gateway.pipeline.ports import ReplicaUnreachable, UpstreamUnavailable
from apps.gateway.pipeline.replies import Reply, error_reply
from apps.gateway.pipeline.values import BackendInfo, BackendSession, BackendView, HttpRequest, VirtualHostView
from apps.gateway.protocol.errors import PolicyDenied
from apps.gateway.protocol.jsonrpc import classify
from apps.gateway.protocol.sse import SseEvent
from tests.gateway.pipeline.test_gateway import PRINCIPAL, Audit, StatelessLeg, forwarder
from tests.gateway.pipeline.test_local import FakeTools

REMOTE = BackendView(id=7, name="calc", transport="streamable-http", urls=("http://calc/mcp",), timeout=2)
LOCAL = BackendView(id=8, name="rest", transport="", urls=(), timeout=2, kind="openapi", server=FakeTools())
VHOST = VirtualHostView(1, "acme", "main", MappingProxyType({"calc": REMOTE, "rest": LOCAL}), MappingProxyType({}))


class Answer:
    """A backend's reply: a JSON body, or SSE events fed by the test (None ends the stream)."""

    def __init__(self, body: object = None, *, status: int = 200, content_type: str = "application/json") -> None:
        self.status = status
        self.content_type = content_type
        self.headers: Mapping[str, str] = {"content-type": content_type}
        self.body = b"" if body is None else json.dumps(body).encode()
        self.queue: asyncio.Queue[SseEvent | None] = asyncio.Queue()
        self.closed = False

    async def read(self, limit: int = 0) -> bytes:
        return self.body

    async def events(self) -> AsyncIterator[SseEvent]:
        while (event := await self.queue.get()) is not None:
            yield event

    def close(self) -> None:
        self.closed = True


class Scripted:
    """An upstream that answers each send with the next of `answers` (an exception is raised)."""

    def __init__(self, *answers: Answer | BaseException) -> None:
        self.answers = list(answers)
        self.sent: list[tuple[str, bytes]] = []
        self.requests: list[tuple[str, str | None]] = []  # (method, Last-Event-ID)
        self.long_lived: list[bool | None] = []

    async def send(self, backend: BackendView, replica: str, method: str, headers: Any, body: bytes = b"",
                   *, timeout: float, long_lived: bool | None = None) -> Answer:
        self.sent.append((replica, body))
        self.requests.append((method, dict(headers).get("last-event-id")))
        self.long_lived.append(long_lived)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def _message(request_id: int = 1, name: str = "add") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": name, "arguments": {}}}


async def _call(relay: Forwarder, map_key: str = "calc", *, leg: Any = None, sse: bool = False) -> Reply:
    message = _message()
    headers = {"accept": "text/event-stream" if sse else "application/json"}
    request = HttpRequest("POST", "acme", "main", headers, json.dumps(message).encode())
    return await relay.direct(leg or StatelessLeg(), request, VHOST, PRINCIPAL, classify(message), map_key=map_key,
                              wants_sse=sse)


def _rows(audit: Audit) -> list[tuple[str, int | None]]:
    return [(entry.outcome, entry.error_code) for entry in audit.entries]


def _result(text: str = "3") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}]}}


async def test_an_answered_call_has_one_audit_row() -> None:
    audit = Audit()
    reply = await _call(forwarder(Scripted(Answer(_result())), audit))
    assert json.loads(reply.body)["result"]["content"][0]["text"] == "3"
    assert _rows(audit) == [("ok", None)] and audit.entries[0].bytes_out == len(reply.body)


async def test_an_answer_to_a_request_that_answers_nothing_is_32004_with_one_row() -> None:
    for answer in (Answer(status=202, content_type=""), Answer(status=200, content_type=""),
                   Answer([1, 2]), Answer({"jsonrpc": "2.0", "id": 99, "result": {}})):
        audit = Audit()
        reply = await _call(forwarder(Scripted(answer), audit))
        error = json.loads(reply.body)["error"]
        assert error["code"] == -32004 and error["data"] == {"backend": "calc"}
        assert _rows(audit) == [("error", -32004)]


async def test_a_replica_found_down_before_sending_is_tried_once_more_then_the_call_fails() -> None:
    audit = Audit()
    upstream = Scripted(ReplicaUnreachable("cannot connect"), Answer(_result()))
    assert "result" in json.loads((await _call(forwarder(upstream, audit))).body)
    assert len(upstream.sent) == 2 and _rows(audit) == [("ok", None)]
    audit = Audit()
    upstream = Scripted(ReplicaUnreachable("cannot connect"), ReplicaUnreachable("cannot connect again"))
    error = json.loads((await _call(forwarder(upstream, audit))).body)["error"]
    assert error["code"] == -32004 and "cannot connect again" in error["message"]
    assert _rows(audit) == [("error", -32004)]


class SessionLeg(StatelessLeg):
    """A leg in a backend session; records the outbounds it was told were lost."""

    def __init__(self) -> None:
        super().__init__()
        self.lost: list[Outbound | None] = []

    async def outbound(self, call: Call, info: BackendInfo, lost: Outbound | None) -> Outbound:
        self.lost.append(lost)
        session = BackendSession(session_id=f"s{len(self.lost)}", version="2025-11-25", replica="http://calc/mcp")
        return Outbound([], call.body, pick=lambda: session.replica, session=session)


async def test_a_backend_session_forgotten_twice_fails_the_call_once() -> None:
    audit = Audit()
    leg = SessionLeg()
    upstream = Scripted(Answer(status=404), Answer(status=404))
    error = json.loads((await _call(forwarder(upstream, audit), leg=leg)).body)["error"]
    assert error["code"] == -32004 and "keeps losing its session" in error["message"]
    assert leg.lost[0] is None and leg.lost[1] is not None and leg.lost[1].session.session_id == "s1"
    assert _rows(audit) == [("error", -32004)]


async def test_a_replica_found_down_twice_in_a_session_fails_the_call_as_a_lost_session() -> None:
    audit = Audit()
    upstream = Scripted(ReplicaUnreachable("cannot connect"), ReplicaUnreachable("cannot connect again"))
    error = json.loads((await _call(forwarder(upstream, audit), leg=SessionLeg())).body)["error"]
    assert error["code"] == -32004 and "keeps losing its session" in error["message"]
    assert _rows(audit) == [("error", -32004)]


LIMITED = VirtualHostView(1, "acme", "main", MappingProxyType({"calc": replace(REMOTE, max_concurrency=1)}),
                          MappingProxyType({}))


class SlowSessionLeg(StatelessLeg):
    """A leg whose backend session takes until `opened` is set to open (the first call's only)."""

    def __init__(self) -> None:
        super().__init__()
        self.opened = asyncio.Event()
        self.waiting = asyncio.Event()
        self.calls = 0

    async def outbound(self, call: Call, info: BackendInfo, lost: Outbound | None) -> Outbound:
        self.calls += 1
        if self.calls == 1:
            self.waiting.set()
            await self.opened.wait()
        return await super().outbound(call, info, lost)


class ResumingLeg(StatelessLeg):
    """A leg continuing every call from a request state: the answer is already there."""

    async def outbound(self, call: Call, info: BackendInfo, lost: Outbound | None) -> Outbound:
        return Outbound([], b"", pick=str, resumed=Answer(_result("resumed")))


async def _limited_call(relay: Forwarder, leg: Any, *, sse: bool = False) -> Reply:
    message = _message()
    headers = {"accept": "text/event-stream" if sse else "application/json"}
    request = HttpRequest("POST", "acme", "main", headers, json.dumps(message).encode())
    return await relay.direct(leg, request, LIMITED, PRINCIPAL, classify(message), map_key="calc", wants_sse=sse)


async def test_a_backend_slot_is_held_for_the_exchange_not_while_its_session_opens() -> None:
    audit = Audit()
    relay = forwarder(Scripted(Answer(_result("second")), Answer(_result("first"))), audit,
                      gates=BackendGates(queue_seconds=0.05))
    slow = SlowSessionLeg()
    first = asyncio.ensure_future(_limited_call(relay, slow))
    await slow.waiting.wait()  # the first call is opening its session: it holds no slot yet
    second = await _limited_call(relay, slow)
    assert json.loads(second.body)["result"]["content"][0]["text"] == "second"
    slow.opened.set()
    assert json.loads((await first).body)["result"]["content"][0]["text"] == "first"
    assert _rows(audit) == [("ok", None), ("ok", None)]


async def test_a_call_continued_from_a_request_state_takes_no_slot() -> None:
    audit = Audit()
    stream = Answer(content_type="text/event-stream")
    stream.queue.put_nowait(SseEvent(b'{"jsonrpc":"2.0","method":"notifications/progress","params":{}}'))
    relay = forwarder(Scripted(stream), audit, gates=BackendGates(queue_seconds=0.05))
    held = await _limited_call(relay, StatelessLeg(), sse=True)  # its stream holds the backend's one slot
    assert held.stream is not None
    reply = await _limited_call(relay, ResumingLeg())
    assert json.loads(reply.body)["result"]["content"][0]["text"] == "resumed"
    busy = json.loads((await _limited_call(relay, StatelessLeg())).body)["error"]  # a new exchange waits, in vain
    assert busy["code"] == -32004 and "busy" in busy["message"]
    await held.stream.aclose()
    assert sorted(_rows(audit), key=str) == sorted([("ok", None), ("error", -32004), ("cancelled", None)], key=str)


async def test_a_streamed_answer_is_audited_when_its_stream_closes_not_before() -> None:
    audit = Audit()
    answer = Answer(content_type="text/event-stream")
    answer.queue.put_nowait(SseEvent(b'{"jsonrpc":"2.0","method":"notifications/progress","params":{}}'))
    reply = await _call(forwarder(Scripted(answer), audit), sse=True)
    assert reply.stream is not None and audit.entries == []
    answer.queue.put_nowait(SseEvent(json.dumps(_result()).encode()))
    answer.queue.put_nowait(None)
    chunks = [chunk async for chunk in reply.stream]
    assert audit.entries == []
    await reply.stream.aclose()
    assert _rows(audit) == [("ok", None)] and audit.entries[0].bytes_out == sum(map(len, chunks))
    assert answer.closed


async def test_a_stream_closed_before_its_response_is_one_cancelled_row() -> None:
    audit = Audit()
    answer = Answer(content_type="text/event-stream")
    answer.queue.put_nowait(SseEvent(b'{"jsonrpc":"2.0","method":"notifications/progress","params":{}}'))
    reply = await _call(forwarder(Scripted(answer), audit), sse=True)
    assert reply.stream is not None
    await anext(reply.stream)
    await reply.stream.aclose()
    assert _rows(audit) == [("cancelled", None)]


def _stream(*events: SseEvent) -> Answer:
    """An answer stream of `events`, then its end."""
    answer = Answer(content_type="text/event-stream")
    for event in (*events, None):
        answer.queue.put_nowait(event)
    return answer


async def test_a_stream_the_backend_ends_before_the_answer_is_resumed_by_the_gateway() -> None:
    """SSE polling (2025-11-25): a backend that sent an event id may end a call's stream and answer
    on the stream resumed with GET and Last-Event-ID in its session. The gateway resumes it, so the
    client reads one stream to the answer (as SSE, or as JSON), and the audit row has its outcome."""
    for sse in (True, False):
        audit = Audit()
        upstream = Scripted(_stream(SseEvent(b"", id="268", retry=10)),
                            _stream(SseEvent(b"", id="269"), SseEvent(json.dumps(_result("late")).encode(), id="270")))
        reply = await _call(forwarder(upstream, audit), leg=SessionLeg(), sse=sse)
        body = b"".join([chunk async for chunk in reply.stream]) if reply.stream is not None else reply.body
        if reply.stream is not None:
            await reply.stream.aclose()
        assert b'"late"' in body and b"-32004" not in body
        assert upstream.requests[1] == ("GET", "268") and upstream.long_lived[1] is False  # the call's answer
        assert _rows(audit) == [("ok", None)]


class Broken(Answer):
    """An answer stream that breaks after its events (the connection dropped, an event too big)."""

    async def events(self) -> AsyncIterator[SseEvent]:
        async for event in super().events():
            yield event
        raise UpstreamUnavailable("broken event stream: an event over the size limit")


async def test_a_stream_that_cannot_be_resumed_ends_with_an_error_in_place_of_the_answer() -> None:
    """No event id, no session, a stream that broke rather than ended, the backend refusing the GET,
    or resumes that bring nothing new (given up after a few): -32004, as for any stream that ends
    unanswered."""
    broken = Broken(content_type="text/event-stream")
    for event in (SseEvent(b"", id="1"), None):
        broken.queue.put_nowait(event)
    nothing_new = [_stream(SseEvent(b"", id="1", retry=1)), *(_stream() for _ in range(MAX_IDLE_RESUMES))]
    cases = [
        (SessionLeg(), [_stream(SseEvent(b"{}"))]),
        (StatelessLeg(), [_stream(SseEvent(b"", id="1"))]),
        (SessionLeg(), [broken]),
        (SessionLeg(), [_stream(SseEvent(b"", id="1")), Answer(status=405, content_type="")]),
        (SessionLeg(), nothing_new),
    ]
    for leg, answers in cases:
        audit = Audit()
        upstream = Scripted(*answers)
        reply = await _call(forwarder(upstream, audit), leg=leg, sse=True)
        assert reply.stream is not None
        body = b"".join([chunk async for chunk in reply.stream])
        await reply.stream.aclose()
        assert b"-32004" in body
        assert len(upstream.requests) == len(answers)
        assert _rows(audit) == [("error", -32004)]


async def test_a_composed_hosts_session_names_the_backend_in_its_answer_streams_event_ids() -> None:
    """So that resuming the stream (GET with Last-Event-ID) reaches that backend's stream."""
    answer = Answer(content_type="text/event-stream")
    answer.queue.put_nowait(SseEvent(b"", id="268", retry=1000))
    answer.queue.put_nowait(None)
    message = _message()
    request = HttpRequest("POST", "acme", "main", {"accept": "text/event-stream"}, json.dumps(message).encode())
    leg = StatelessLeg()
    leg.session_id = "s-1"  # a handshake-era session
    reply = await forwarder(Scripted(answer)).direct(leg, request, VHOST, PRINCIPAL, classify(message), map_key="calc",
                                                     wants_sse=True)
    assert reply.stream is not None
    priming, *_ = [chunk async for chunk in reply.stream]  # and the error in place of the answer: nobody resumes
    await reply.stream.aclose()
    shown_id = priming.decode().split("id: ")[1].split("\n")[0]
    assert stream_positions(shown_id) == {"calc": "268"}


class Hanging:
    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def send(self, *args: Any, **kwargs: Any) -> Answer:
        self.started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_a_call_cancelled_while_forwarded_is_one_cancelled_row() -> None:
    audit = Audit()
    upstream = Hanging()
    task = asyncio.ensure_future(_call(forwarder(upstream, audit)))
    await upstream.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _rows(audit) == [("cancelled", None)]


class Guard:
    """A stage that refuses calls to the tool `forbidden`, and marks every other answer."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def applies(self, call: Call) -> bool:
        return call.message.method == "tools/call"

    async def __call__(self, call: Call, outcome: Outcome, then: Next) -> Reply:
        self.seen.append(call.backend.name)
        if call.target_name() == "forbidden":
            reply = error_reply(call.message.id, PolicyDenied("Denied: guarded"), call.headers)
            outcome.answered("denied", -32003, len(reply.body))
            return reply
        reply = await then()
        return reply.with_headers((("x-guarded", "yes"),))


async def test_a_stage_added_to_the_list_runs_on_every_call_local_or_forwarded() -> None:
    audit = Audit()
    guard = Guard()
    relay = forwarder(Scripted(Answer(_result())), audit)
    relay.stages = (*relay.stages, guard)
    forwarded = await _call(relay)
    local = await _call(relay, "rest")
    assert ("x-guarded", "yes") in forwarded.headers and ("x-guarded", "yes") in local.headers
    assert guard.seen == ["calc", "rest"]
    message = _message(2, "forbidden")
    request = HttpRequest("POST", "acme", "main", {}, json.dumps(message).encode())
    refused = await relay.direct(StatelessLeg(), request, VHOST, PRINCIPAL, classify(message), map_key="calc",
                                 wants_sse=False)
    assert json.loads(refused.body)["error"]["code"] == -32003
    assert _rows(audit) == [("ok", None), ("ok", None), ("denied", -32003)]


async def _follow(relay: Forwarder, method: str, task_id: str = "t-1") -> Reply:
    message = {"jsonrpc": "2.0", "id": 2, "method": method, "params": {"taskId": task_id}}
    request = HttpRequest("POST", "acme", "main", {"accept": "application/json"}, json.dumps(message).encode())
    return await relay.direct(StatelessLeg(), request, VHOST, PRINCIPAL, classify(message), map_key="calc",
                              wants_sse=False)


async def test_a_call_that_creates_a_task_is_one_row_that_waits_for_the_tasks_end() -> None:
    """Both eras' CreateTaskResult: the row says `working` and keeps the backend's task id."""
    for result in ({"task": {"taskId": "t-1", "status": "working"}},
                   {"resultType": "task", "taskId": "t-1", "status": "working", "ttlMs": 1000}):
        audit = Audit()
        await _call(forwarder(Scripted(Answer({"jsonrpc": "2.0", "id": 1, "result": result})), audit))
        assert [(entry.outcome, entry.task_id) for entry in audit.entries] == [("working", "t-1")]


async def test_an_answer_that_shows_a_task_ended_gives_its_final_outcome_and_nothing_else() -> None:
    """What a request following a task finds: a terminal status (both eras), the 2026-07-28 task's
    inlined result or error, 2025-11-25's `tasks/result`; no row of its own, and nothing while the
    task runs or when the request itself is refused."""
    cases = [
        ("tasks/get", {"result": {"taskId": "t-1", "status": "working"}}, None),
        ("tasks/get", {"result": {"taskId": "t-1", "status": "completed"}}, ("ok", None)),
        ("tasks/get", {"result": {"taskId": "t-1", "status": "failed"}}, ("error", None)),
        ("tasks/cancel", {"result": {"taskId": "t-1", "status": "cancelled"}}, ("cancelled", None)),
        ("tasks/cancel", {"result": {"resultType": "complete"}}, None),
        ("tasks/get", {"result": {"taskId": "t-1", "status": "completed", "result": {"content": [], "isError": True}}},
         ("tool_error", None)),
        ("tasks/get", {"result": {"taskId": "t-1", "status": "failed", "error": {"code": -32603, "message": "x"}}},
         ("error", -32603)),
        ("tasks/result", {"result": {"content": [], "isError": True}}, ("tool_error", None)),
        ("tasks/result", {"error": {"code": -32000, "message": "it broke"}}, ("error", -32000)),
        ("tasks/result", {"error": {"code": -32602, "message": "unknown task"}}, None),
        ("tasks/result", {"error": {"code": 2**32, "message": "no 32-bit code"}}, ("error", None)),
        ("tasks/get", {"result": {"taskId": "t-1", "status": "failed", "error": {"code": True, "message": "x"}}},
         ("error", None)),
        ("tasks/get", {"error": {"code": -32602, "message": "unknown task"}}, None),
    ]
    for method, answer, ended in cases:
        audit = Audit()
        await _follow(forwarder(Scripted(Answer({"jsonrpc": "2.0", "id": 2, **answer})), audit), method)
        assert audit.entries == []
        assert [(end.task_id, end.outcome, end.error_code, end.backend, end.virtual_host) for end in audit.ends] == (
            [] if ended is None else [("t-1", *ended, "calc", "main")]), (method, answer)
