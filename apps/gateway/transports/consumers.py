"""The MCP endpoint as a Channels consumer: ASGI in, `HttpRequest` to the pipeline, `Reply` out.

It drives the ASGI exchange itself rather than through the generic dispatch loop: that loop
closes database connections through a thread hop on every message and cannot notice a client
disconnect while a response streams, and this endpoint touches no database and streams a lot."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from channels.generic.http import AsyncHttpConsumer
from django.conf import settings

from apps.common import lifecycle
from apps.gateway.pipeline.replies import Reply, json_reply
from apps.gateway.pipeline.values import HttpRequest
from apps.gateway.prometheus import RequestMeter
from apps.gateway.protocol.errors import INTERNAL_ERROR
from apps.gateway.transports import shutdown
from apps.gateway.wiring import gateway

log = logging.getLogger(__name__)

_INTERNAL = json_reply({"jsonrpc": "2.0", "id": None, "error": {"code": INTERNAL_ERROR, "message": "Internal error"}}, 500)


_DRAINING = Reply(503, (("content-type", "text/plain; charset=utf-8"), ("retry-after", "1")),
                  b"Service Unavailable: this gateway instance is shutting down; connect again")
_CUT = Reply(503, (("content-type", "text/plain; charset=utf-8"), ("retry-after", "1")),
             b"Service Unavailable: this gateway instance shut down before the request was answered")


def _too_large(limit: int) -> Reply:
    return Reply(413, (("content-type", "text/plain; charset=utf-8"),),
                 f"Payload Too Large: the limit is {limit} bytes".encode())


class McpConsumer(AsyncHttpConsumer):
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.scope = scope
        meter = RequestMeter(scope["method"])
        headers: dict[str, str] = {}
        names: list[str] = []
        for raw_name, raw_value in scope["headers"]:
            name = raw_name.decode("latin-1").lower()
            value = raw_value.decode("latin-1")
            names.append(name)
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        long_lived = scope["method"] == "GET" or headers.get("mcp-method") == "subscriptions/listen"
        if long_lived and lifecycle.draining():
            await self._send(send, _DRAINING)  # it would be ended at once: open it elsewhere
            meter.done(gateway().counters, 503)
            return
        limit = settings.GATEWAY_MAX_BODY_BYTES
        body = await self._read_body(receive, headers, limit)
        if body is None:
            await self._send(send, _too_large(limit))
            meter.done(gateway().counters, 413)
            return
        kwargs = scope["url_route"]["kwargs"]
        client = scope.get("client") or ("", 0)
        request = HttpRequest(
            method=scope["method"],
            tenant=kwargs["tenant"],
            vhost=kwargs["vhost"],
            headers=headers,
            body=body,
            raw_header_names=tuple(names),
            client=str(client[0]),
            scheme=scope.get("scheme", "http"),
            endpoint=kwargs.get("endpoint", ""),
            query=scope.get("query_string", b"").decode("latin-1"),
        )
        # A client that goes away cancels its request: the pipeline unwinds and closes the upstream
        # exchange, which is how the backend learns of it (for stateless clients that is what
        # cancelling a request means).
        task = asyncio.current_task()
        watcher = asyncio.ensure_future(_disconnected(receive))
        watcher.add_done_callback(lambda done: task.cancel() if task and not done.cancelled() else None)
        self._started = False
        try:
            try:
                reply = await gateway().handle(request)
            except Exception:
                log.exception("unhandled error on %s %s", scope["method"], scope["path"])
                reply = _INTERNAL
            meter.answered()
            if long_lived and reply.stream is not None:
                shutdown.stream_opened()
            await self._send(send, reply)
            meter.done(gateway().counters, reply.status)
        except asyncio.CancelledError:
            if shutdown.is_ending() and task is not None:
                # Ended or cut by a graceful shutdown: finish the response rather than drop it.
                task.uncancel()
                if self._started:
                    await send({"type": "http.response.body", "body": b""})
                else:
                    await self._send(send, _CUT)
                    meter.done(gateway().counters, 503)
                return
            if not watcher.done() or watcher.cancelled():
                raise  # cancelled by the server (stopping), not by the client
            # The client went away: after the response began (a stream it closed), or before (nginx's
            # 499 "client closed request").
            meter.done(gateway().counters, reply.status if self._started else 499)
        finally:
            watcher.cancel()

    async def _read_body(self, receive: Any, headers: dict[str, str], limit: int) -> bytes | None:
        """The whole request body, or None once it is known to exceed `limit` (nothing more is read)."""
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b""
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body"):
                return b"".join(chunks)

    async def _send(self, send: Any, reply: Reply) -> None:
        headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in reply.headers]
        if reply.stream is None:
            headers.append((b"content-length", str(len(reply.body)).encode()))
        if reply.stream is None:
            await send({"type": "http.response.start", "status": reply.status, "headers": headers})
            await send({"type": "http.response.body", "body": reply.body})
            return
        stream = reply.stream
        try:
            self._started = True
            await send({"type": "http.response.start", "status": reply.status, "headers": headers})
            try:
                async for chunk in stream:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except Exception:
                log.exception("relaying a stream failed")
            await send({"type": "http.response.body", "body": b""})
        finally:
            with contextlib.suppress(Exception):
                await stream.aclose()


async def _disconnected(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
