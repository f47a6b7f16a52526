"""What the pipeline answers: one HTTP response, its body whole or streamed as SSE."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from apps.gateway.pipeline.metrics import note_error
from apps.gateway.protocol import jsonrpc
from apps.gateway.protocol.errors import GatewayError, HttpError
from apps.gateway.protocol.jsonrpc import RequestId
from apps.gateway.protocol.sse import SseEvent, encode_event

Headers = tuple[tuple[str, str], ...]

JSON = ("content-type", "application/json")
SSE_HEADERS: Headers = (
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache, no-transform"),
    ("x-accel-buffering", "no"),
)


class Stream:
    """A streamed body. `aclose()` releases what feeds it even if iteration never began (an async
    generator that never started would skip its own cleanup)."""

    def __init__(self, chunks: AsyncIterator[bytes], on_close: Callable[[], None]) -> None:
        self._chunks = chunks
        self._on_close: Callable[[], None] | None = on_close

    def __aiter__(self) -> Stream:
        return self

    async def __anext__(self) -> bytes:
        return await self._chunks.__anext__()

    async def aclose(self) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is None:
            return
        try:
            await self._chunks.aclose()  # type: ignore[attr-defined]
        finally:
            on_close()


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    headers: Headers = ()
    body: bytes = b""
    stream: Stream | None = None

    def with_headers(self, extra: Headers) -> Reply:
        return Reply(self.status, self.headers + extra, self.body, self.stream)

    def after_stream(self, callback: Callable[[], None]) -> Reply:
        """This reply, with `callback` run once its stream closes (at once when it has none)."""
        if self.stream is None:
            callback()
            return self
        return Reply(self.status, self.headers, self.body, Stream(self.stream, callback))


def json_reply(message: Mapping[str, Any], status: int = 200, headers: Headers = ()) -> Reply:
    return Reply(status, (JSON, *headers), jsonrpc.dumps(message))


def result_reply(
    request_id: RequestId | None, result: dict[str, Any], *, sse: bool = False, headers: Headers = ()
) -> Reply:
    """A locally answered request, as JSON or as a one-event SSE stream (as the client accepts)."""
    message = jsonrpc.result_message(request_id, result)
    if not sse:
        return json_reply(message, headers=headers)
    return Reply(200, SSE_HEADERS + headers, encode_event(SseEvent(jsonrpc.dumps(message))))


def error_reply(request_id: RequestId | None, error: GatewayError, headers: Headers = ()) -> Reply:
    note_error(error.code)
    return json_reply(jsonrpc.error_message(request_id, error.to_error()), error.http_status, headers)


def http_error_reply(error: HttpError) -> Reply:
    if error.code is None:
        return Reply(error.status, (("content-type", "text/plain; charset=utf-8"), *error.headers),
                     error.message.encode())
    message = jsonrpc.error_message(None, {"code": error.code, "message": error.message})
    return json_reply(message, error.status, error.headers)


def accepted() -> Reply:
    return Reply(202)
