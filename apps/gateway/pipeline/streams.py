"""A backend's SSE answer on its way to the client: finding the call's response among the events,
renaming what the client must see renamed, and relaying the stream with its audit row written
when it closes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
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
    call: Call, reply: UpstreamReply, first: SseEvent, events: AsyncIterator[SseEvent], record: Record
) -> Stream:
    """Relay a stream; the audit row is written when it closes, whichever way it ends."""
    sent = 0
    outcome: tuple[str, int | None] | None = None

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal sent, outcome
        try:
            async for event in chain(first, events):
                if outcome is None and (call.audited or call.translate) and (response := response_in(call, event)):
                    outcome = outcome_of(response)
                renamed = translated(call, event)
                if renamed is None:
                    continue
                chunk = encode_event(renamed)
                sent += len(chunk)
                yield chunk
        except UpstreamUnavailable as exc:
            log.info("stream from backend %s broke: %s", call.backend.name, exc)
            if outcome is None and call.audited and call.message.kind is Kind.REQUEST:
                # The response will not come (a timeout, an event over the size cap): say so in
                # it, so the client is not left waiting for the end of a closed stream.
                error = BackendUnavailable(f"Backend {call.backend.name!r} unavailable: {exc}",
                                           data={"backend": call.backend.name})
                outcome = ("error", error.code)
                chunk = encode_event(SseEvent(jsonrpc.dumps(jsonrpc.error_message(call.message.id, error.to_error()))))
                sent += len(chunk)
                yield chunk

    def close() -> None:
        reply.close()
        record(call, *(outcome or ("cancelled", None)), sent)

    return Stream(chunks(), close)
