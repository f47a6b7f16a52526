"""The forwarder and a backend's limits, with a scripted upstream: a streamed answer holds its call's
concurrency slot until the stream closes, and a stream that breaks before the response (a
timeout, an event over the cap) ends with the call's -32004 response, audited."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from types import MappingProxyType
from typing import Any

from apps.gateway.pipeline.concurrency import BackendGates
from apps.gateway.pipeline.forwarder import Forwarder
from apps.gateway.pipeline.ports import UpstreamUnavailable
from apps.gateway.pipeline.values import BackendView, HttpRequest, VirtualHostView
from apps.gateway.protocol.jsonrpc import classify
from apps.gateway.protocol.sse import SseEvent
from tests.gateway.pipeline.test_gateway import PRINCIPAL, Audit, StatelessLeg, forwarder

BACKEND = BackendView(id=9, name="slow", transport="streamable-http", urls=("http://slow/mcp",), timeout=5,
                      max_concurrency=1)
PROGRESS = json.dumps({"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": {"progressToken": "p", "progress": 1}}).encode()


class StreamedReply:
    """An SSE answer whose events the test feeds; an exception fed is raised by the stream."""

    status = 200
    headers: Mapping[str, str] = {"content-type": "text/event-stream"}
    content_type = "text/event-stream"

    def __init__(self) -> None:
        self.queue: asyncio.Queue[SseEvent | Exception | None] = asyncio.Queue()
        self.closed = False

    async def read(self, limit: int = 0) -> bytes:
        raise AssertionError("a stream is not read whole")

    async def events(self) -> AsyncIterator[SseEvent]:
        while (item := await self.queue.get()) is not None:
            if isinstance(item, Exception):
                raise item
            yield item

    def close(self) -> None:
        self.closed = True


class StreamingUpstream:
    def __init__(self) -> None:
        self.replies: list[StreamedReply] = []

    async def send(self, backend: BackendView, replica: str, method: str, headers: Any, body: bytes = b"",
                   *, timeout: float, long_lived: bool | None = None) -> StreamedReply:
        reply = StreamedReply()
        reply.queue.put_nowait(SseEvent(PROGRESS))
        self.replies.append(reply)
        return reply


VHOST = VirtualHostView(1, "acme", "main", MappingProxyType({"slow": BACKEND}), MappingProxyType({}))


async def _forward(relay: Forwarder, request_id: int) -> Any:
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "sleep", "arguments": {}}}
    request = HttpRequest("POST", "acme", "main", {"accept": "text/event-stream"}, json.dumps(message).encode())
    return await relay.direct(StatelessLeg(replica="http://slow/mcp"), request, VHOST, PRINCIPAL, classify(message),
                              map_key="slow", wants_sse=True)


async def test_a_streamed_answer_holds_its_slot_until_the_stream_closes() -> None:
    audit = Audit()
    relay = forwarder(StreamingUpstream(), audit, gates=BackendGates(queue_seconds=0.05))
    streamed = await _forward(relay, 1)
    assert streamed.stream is not None
    assert await anext(streamed.stream) == b"data: " + PROGRESS + b"\n\n"
    busy = json.loads((await _forward(relay, 2)).body)
    assert busy["error"]["code"] == -32004 and "backend busy" in busy["error"]["message"]
    await streamed.stream.aclose()
    later = await _forward(relay, 3)  # the slot came back with the stream's end
    assert later.stream is not None
    await later.stream.aclose()


async def test_a_stream_that_breaks_before_the_response_ends_with_the_calls_error() -> None:
    audit = Audit()
    upstream = StreamingUpstream()
    relay = forwarder(upstream, audit)
    streamed = await _forward(relay, 5)
    assert streamed.stream is not None
    upstream.replies[0].queue.put_nowait(UpstreamUnavailable("timed out after 5 s waiting for the rest of the response"))
    chunks = [chunk async for chunk in streamed.stream]
    await streamed.stream.aclose()
    last = json.loads(chunks[-1].removeprefix(b"data: ").strip())
    assert last["id"] == 5 and last["error"]["code"] == -32004 and last["error"]["data"] == {"backend": "slow"}
    assert "timed out after 5 s" in last["error"]["message"]
    assert [(entry.outcome, entry.error_code) for entry in audit.entries] == [("error", -32004)]
    assert upstream.replies[0].closed
