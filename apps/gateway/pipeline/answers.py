"""A backend's answer on its way to the client, JSON or SSE: checking that it answers the call,
finding the call's response among a stream's events, renaming what the client must see renamed,
and relaying a stream. What the answer was goes into the call's `Outcome`; an answer that is none
raises (BadReply, UpstreamUnavailable, TimeoutError), and the forwarder makes that the call's error."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from apps.gateway.pipeline.calls import BadReply, Call, Outcome, Translate
from apps.gateway.pipeline.ports import UpstreamReply, UpstreamUnavailable
from apps.gateway.pipeline.replies import JSON, SSE_HEADERS, Reply, Stream
from apps.gateway.protocol import jsonrpc
from apps.gateway.protocol.errors import BackendUnavailable
from apps.gateway.protocol.jsonrpc import Kind
from apps.gateway.protocol.sse import SseEvent, encode_event

log = logging.getLogger(__name__)

@dataclass(frozen=True, slots=True)
class StreamCaps:
    """What a backend's event stream answering one request may bring before the gateway ends the
    call: events other than the response (server→client requests and notifications:
    `max_messages`), bytes of event data (`max_bytes`), and time since the call began
    (`max_seconds`). None: no cap."""

    max_messages: int | None = None
    max_bytes: int | None = None
    max_seconds: float | None = None


class StreamOverCap(BadReply):
    """A backend's answer stream went past one of its `StreamCaps`; the call ends with this error."""


#: How many times one call's answer stream is resumed at most; its time is capped by `StreamCaps`.
MAX_RESUMES = 1000
#: Resumes in a row that bring no new event before the gateway gives up on the stream.
MAX_IDLE_RESUMES = 3
#: The longest the gateway waits before resuming, whatever `retry` the backend asked for; and the
#: wait before resuming a stream that brought nothing new, when the backend asked none.
MAX_RETRY_SECONDS = 30.0
IDLE_RETRY_SECONDS = 1.0


class Resuming:
    """A backend's answer stream in a session, resumed by the gateway where the backend ends it
    before the call's response (SSE polling, 2025-11-25, SEP-1699: a server that sent an event id
    may close the stream at any time, and the client reconnects with GET and `Last-Event-ID` after
    `retry` ms). So the client reads one stream, whatever its transport: an HTTP+SSE or JSON-only
    client could not resume anything, and a call answered on a stream the gateway never reads would
    leave an audit row without its outcome. `resume(last_event_id)` is that GET, in the call's
    session. Only a stream that ends cleanly is resumed (one that broke, or whose event was too big,
    fails the call as before); a stream is given up after `MAX_IDLE_RESUMES` resumes in a row that
    bring nothing new, or when the backend refuses the GET."""

    def __init__(self, call: Call, reply: UpstreamReply, resume: Callable[[str], Awaitable[UpstreamReply]]) -> None:
        self._call = call
        self._reply = reply
        self._resume = resume
        self.status = reply.status
        self.headers = reply.headers

    @property
    def content_type(self) -> str:
        return self._reply.content_type

    async def read(self, limit: int = 0) -> bytes:
        return await (self._reply.read(limit) if limit else self._reply.read())

    def close(self) -> None:
        self._reply.close()

    async def events(self) -> AsyncIterator[SseEvent]:
        last_id: str | None = None  # most backends send no ids: their streams are never resumed
        retry: float | None = None
        answered = False
        idle = 0
        for resumes in range(MAX_RESUMES + 1):
            new = False
            async for event in self._reply.events():
                new = new or event.id is not None
                last_id = last_id if event.id is None else event.id
                retry = retry if event.retry is None else event.retry / 1000
                # Looked for only once the stream has ids: a stream without them ends as it ends.
                answered = answered or (last_id is not None and bool(event.data) and is_response(self._call, event))
                yield event
                if answered and resumes:
                    return  # a resumed GET stream may go on with messages that are not the call's
            idle = 0 if new else idle + 1
            if answered or last_id is None or idle >= MAX_IDLE_RESUMES or resumes == MAX_RESUMES:
                return
            self._reply.close()
            wait = retry if retry is not None else (0.0 if new else IDLE_RETRY_SECONDS)
            await asyncio.sleep(min(wait, MAX_RETRY_SECONDS))
            try:
                reply = await self._resume(last_id)
            except TimeoutError:
                raise UpstreamUnavailable(f"it did not resume its answer stream within {self._call.backend.timeout:g} s") from None
            if reply.status != 200 or reply.content_type != "text/event-stream":
                log.info("backend %s did not resume its answer stream (HTTP %s)", self._call.backend.name, reply.status)
                reply.close()
                return
            self._reply = reply


def is_response(call: Call, event: SseEvent) -> bool:
    return response_in(call, event) is not None


async def capped(call: Call, events: AsyncIterator[SseEvent], caps: StreamCaps) -> AsyncIterator[SseEvent]:
    """`events` until a cap of `caps` is passed, then StreamOverCap. The time cap holds even while
    the backend sends nothing but keep-alive comments (no event at all)."""
    messages = size = 0
    deadline = None if caps.max_seconds is None else asyncio.get_running_loop().time() + max(
        0.0, caps.max_seconds - (time.perf_counter() - call.started))
    iterator = aiter(events)
    while True:
        try:
            if deadline is None:
                event = await anext(iterator)
            else:
                async with asyncio.timeout_at(deadline):  # only around the wait: never across a yield
                    event = await anext(iterator)
        except StopAsyncIteration:
            return
        except TimeoutError:
            raise StreamOverCap(f"its answer took longer than {caps.max_seconds:g} s, the gateway's limit per call") from None
        size += len(event.data)
        if caps.max_bytes is not None and size > caps.max_bytes:
            raise StreamOverCap(f"its answer stream passed {caps.max_bytes:,} bytes, the gateway's limit per call")
        if caps.max_messages is not None and event.data and not is_response(call, event):
            messages += 1
            if messages > caps.max_messages:
                raise StreamOverCap(f"it sent more than {caps.max_messages:,} requests and notifications during one "
                                    "call, the gateway's limit")
        yield event


def response_in(call: Call, event: SseEvent) -> dict[str, Any] | None:
    """The JSON-RPC response to this call, if the event carries it."""
    data = event.data
    if not data or (b'"result"' not in data and b'"error"' not in data):
        return None
    try:
        message = jsonrpc.loads(data)
    except ValueError:
        return None
    expected = call.message.id if call.upstream_id is None else call.upstream_id
    if isinstance(message, dict) and "method" not in message and message.get("id") == expected:
        return message
    return None


def translated(call: Call, event: SseEvent) -> SseEvent | None:
    """The event as the client must see it (None: left out): its id as the call shows ids,
    translated, then reshaped."""
    if call.event_id is not None and event.id is not None:
        event = SseEvent(event.data, event.event, call.event_id(event.id), event.retry)
    shown = event if call.translate is None else translate_event(call.translate, event)
    if shown is None or call.reshape is None or not shown.data:
        return shown
    data = call.reshape(shown.data)
    return shown if data is shown.data else SseEvent(data, shown.event, shown.id, shown.retry)


def translate_event(translate: Translate, event: SseEvent) -> SseEvent | None:
    """The event as the client must see it; None to leave it out."""
    if not event.data:
        return event
    try:
        message = jsonrpc.loads(event.data)
    except ValueError:
        return event
    if not isinstance(message, dict):
        return event
    renamed = translate(message)
    if renamed is None:
        return None
    if renamed is message:
        return event
    return SseEvent(jsonrpc.dumps(renamed), event.event, event.id, event.retry)


async def chain(first: SseEvent, rest: AsyncIterator[SseEvent]) -> AsyncIterator[SseEvent]:
    yield first
    async for event in rest:
        yield event


async def drain(reply: UpstreamReply, events: AsyncIterator[SseEvent]) -> None:
    """Read a finished stream to its end so its connection can be reused. A server SHOULD close the
    stream after the response; one that keeps it open loses the connection instead."""
    try:
        async with asyncio.timeout(1.0):
            async for _ in events:
                pass
    except (TimeoutError, UpstreamUnavailable):
        reply.close()


def relayed_stream(
    call: Call, reply: UpstreamReply, first: SseEvent, events: AsyncIterator[SseEvent], outcome: Outcome,
    cancel: Callable[[], None] | None = None,
) -> Stream:
    """Relay a stream, noting in `outcome` what it answered and what it sent (a stream closed
    before the response is `cancelled`). A response that is not to this request (another id) or an
    event that is not JSON-RPC is not passed on; a request whose stream ends without its response
    gets an error in its place. `cancel` tells the backend the gateway gave up on the request (its
    stream went past a cap)."""
    request = call.message.kind is Kind.REQUEST
    outcome.outcome = "cancelled"
    answered = False

    def failure(reason: str) -> bytes:
        error = BackendUnavailable(f"Backend {call.backend.name!r} unavailable: {reason}", data={"backend": call.backend.name})
        chunk = encode_event(SseEvent(jsonrpc.dumps(jsonrpc.error_message(call.message.id, error.to_error()))))
        outcome.answered("error", error.code, outcome.bytes_out + len(chunk))
        return chunk

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal answered
        try:
            async for event in chain(first, events):
                if event.data and not answered and request:
                    response = response_in(call, event)
                    if response is not None:
                        outcome.answered_by(call, response)
                        answered = True
                    elif stray(event):
                        log.warning("backend %s sent an event that is not a message of this call; left out",
                                    call.backend.name)
                        continue
                renamed = translated(call, event)
                if renamed is None:
                    continue
                chunk = encode_event(renamed)
                outcome.bytes_out += len(chunk)
                yield chunk
        except UpstreamUnavailable as exc:
            log.info("stream from backend %s broke: %s", call.backend.name, exc)
            if isinstance(exc, StreamOverCap) and cancel is not None:
                cancel()
            if not answered and request:
                # The response will not come (a timeout, an event over the size cap): say so in
                # it, so the client is not left waiting for the end of a closed stream.
                yield failure(str(exc))
            return
        if not answered and request:
            yield failure("the backend's stream ended without a response")

    return Stream(chunks(), reply.close)


def stray(event: SseEvent) -> bool:
    """Whether an event of a call's stream is neither a JSON-RPC request nor a notification (what
    a backend may send during a call): not JSON, not an object, or a response to another request."""
    try:
        message = jsonrpc.loads(event.data)
    except ValueError:
        return True
    return not isinstance(message, dict) or not isinstance(message.get("method"), str)


async def answer(
    call: Call, reply: UpstreamReply, outcome: Outcome, caps: StreamCaps, cancel: Callable[[], None] | None = None,
) -> Reply:
    """The client's reply to the backend's answer. An answer to a request that is not a JSON-RPC
    response to it (not JSON, not one object, another id) is BadReply; a stream past its caps ends
    with StreamOverCap, and `cancel` tells the backend so."""
    headers = call.headers
    request = call.message.kind is Kind.REQUEST
    if reply.status == 202:
        reply.close()
        if request:
            raise BadReply("it accepted the request without answering it (HTTP 202)")
        return Reply(202, headers)
    if reply.content_type == "text/event-stream":
        events = capped(call, reply.events(), caps)
        try:
            # Like a JSON answer's head, the stream's first event must come within the timeout;
            # after that, events show the call is alive and the stream may run as long as it needs.
            async with asyncio.timeout(call.backend.timeout):
                first = await anext(events, None)
        except (UpstreamUnavailable, TimeoutError) as exc:
            reply.close()
            if isinstance(exc, StreamOverCap) and cancel is not None:
                cancel()
            raise
        if first is not None and (response := response_in(call, first)) is not None:
            # The stream carries the response and nothing else (the common case): answer in
            # one piece instead of relaying a stream.
            await drain(reply, events)
            first = translated(call, first) or first
            outcome.answered_by(call, response, len(first.data))
            if call.wants_sse:
                return Reply(reply.status, SSE_HEADERS + headers, encode_event(first))
            return Reply(200, (JSON, *headers), first.data)
        if first is None:
            reply.close()
            if request:
                raise BadReply("the backend's stream ended without a response")
            return Reply(202, headers)
        if call.wants_sse:
            return Reply(reply.status, SSE_HEADERS + headers, stream=relayed_stream(call, reply, first, events, outcome, cancel))
        return await _collect(call, reply, first, events, outcome, cancel)
    try:
        async with asyncio.timeout(call.backend.timeout):
            payload = await reply.read()
    except TimeoutError:
        reply.close()
        raise
    if reply.content_type != "application/json":
        if reply.status < 300 and not payload and not request:
            return Reply(reply.status, headers)
        raise BadReply(f"HTTP {reply.status} ({reply.content_type or 'no content type'})")
    status = reply.status
    if status == 404 and call.session_id:
        # A stateless backend's 404 means "no such method"; to a client in a session, 404
        # means "session gone, start over". The JSON-RPC error alone says what happened.
        status = 200
    if not request:
        return Reply(status, (JSON, *headers), payload)
    if not (call.read_back or call.translate or call.upstream_id is not None):
        # Nothing on the way reads this answer (a pass-through list, say) and it carries the
        # client's own id, so only its shape is checked: parsing a 500 KB list would cost
        # more CPU than relaying it.
        if not _object_shaped(payload):
            raise BadReply("its answer is not a JSON-RPC response (not one JSON object)")
        return Reply(status, (JSON, *headers), payload if call.reshape is None else call.reshape(payload))
    response, problem = _response_to(call, payload)
    if response is None:
        raise BadReply(f"its answer is {problem}")
    shown = call.translate(response) if call.translate else response
    if shown is not None and (shown is not response or problem):
        payload = jsonrpc.dumps(shown)
    if call.reshape is not None:
        payload = call.reshape(payload)
    outcome.answered_by(call, response, len(payload))
    return Reply(status, (JSON, *headers), payload)


async def _collect(
    call: Call, reply: UpstreamReply, first: SseEvent, events: AsyncIterator[SseEvent], outcome: Outcome,
    cancel: Callable[[], None] | None,
) -> Reply:
    """A client that takes only JSON gets the response alone; notifications are dropped."""
    try:
        async for event in chain(first, events):
            if (response := response_in(call, event)) is not None:
                body = (translated(call, event) or event).data
                outcome.answered_by(call, response, len(body))
                return Reply(200, (JSON, *call.headers), body)
    except StreamOverCap:
        if cancel is not None:
            cancel()
        raise
    finally:
        reply.close()
    if call.message.kind is Kind.REQUEST:
        raise BadReply("the backend's stream ended without a response")
    return Reply(202, call.headers)


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
