"""A backend's SSE answer on its way to the client: finding the call's response among the events,
renaming what the client must see renamed, and relaying the stream with its audit row written
when it closes."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from apps.gateway.pipeline.calls import Call, Translate, outcome_of
from apps.gateway.pipeline.ports import UpstreamReply, UpstreamUnavailable
from apps.gateway.pipeline.replies import Stream
from apps.gateway.protocol import jsonrpc
from apps.gateway.protocol.errors import BackendUnavailable
from apps.gateway.protocol.jsonrpc import Kind
from apps.gateway.protocol.sse import SseEvent, encode_event

log = logging.getLogger(__name__)

#: Writes the call's audit row: (call, outcome, JSON-RPC error code, bytes sent).
Record = Callable[[Call, str, "int | None", int], None]


@dataclass(frozen=True, slots=True)
class StreamCaps:
    """What a backend's event stream answering one request may bring before the gateway ends the
    call: events other than the response (server→client requests and notifications:
    `max_messages`), bytes of event data (`max_bytes`), and time since the call began
    (`max_seconds`). None: no cap."""

    max_messages: int | None = None
    max_bytes: int | None = None
    max_seconds: float | None = None


class StreamOverCap(UpstreamUnavailable):
    """A backend's answer stream went past one of its `StreamCaps`; the call ends with this error."""


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
    return event if call.translate is None else translate_event(call.translate, event)


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
    call: Call, reply: UpstreamReply, first: SseEvent, events: AsyncIterator[SseEvent], record: Record,
    cancel: Callable[[], None] | None = None,
) -> Stream:
    """Relay a stream; the audit row is written when it closes, whichever way it ends. A response
    that is not to this request (another id) or an event that is not JSON-RPC is not passed on; a
    request whose stream ends without its response gets an error in its place. `cancel` tells the
    backend the gateway gave up on the request (its stream went past a cap)."""
    sent = 0
    outcome: tuple[str, int | None] | None = None

    def failure(reason: str) -> bytes:
        nonlocal outcome, sent
        error = BackendUnavailable(f"Backend {call.backend.name!r} unavailable: {reason}", data={"backend": call.backend.name})
        outcome = ("error", error.code)
        chunk = encode_event(SseEvent(jsonrpc.dumps(jsonrpc.error_message(call.message.id, error.to_error()))))
        sent += len(chunk)
        return chunk

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal sent, outcome
        request = call.message.kind is Kind.REQUEST
        try:
            async for event in chain(first, events):
                if event.data and outcome is None and request:
                    response = response_in(call, event)
                    if response is not None:
                        outcome = outcome_of(response)
                    elif stray(event):
                        log.warning("backend %s sent an event that is not a message of this call; left out",
                                    call.backend.name)
                        continue
                renamed = translated(call, event)
                if renamed is None:
                    continue
                chunk = encode_event(renamed)
                sent += len(chunk)
                yield chunk
        except UpstreamUnavailable as exc:
            log.info("stream from backend %s broke: %s", call.backend.name, exc)
            if isinstance(exc, StreamOverCap) and cancel is not None:
                cancel()
            if outcome is None and request:
                # The response will not come (a timeout, an event over the size cap): say so in
                # it, so the client is not left waiting for the end of a closed stream.
                yield failure(str(exc))
            return
        if outcome is None and request:
            yield failure("the backend's stream ended without a response")

    def close() -> None:
        reply.close()
        record(call, *(outcome or ("cancelled", None)), sent)

    return Stream(chunks(), close)


def stray(event: SseEvent) -> bool:
    """Whether an event of a call's stream is neither a JSON-RPC request nor a notification (what
    a backend may send during a call): not JSON, not an object, or a response to another request."""
    try:
        message = jsonrpc.loads(event.data)
    except ValueError:
        return True
    return not isinstance(message, dict) or not isinstance(message.get("method"), str)
