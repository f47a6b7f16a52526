"""The HTTP+SSE transport of protocol revision 2024-11-05, downstream: `GET …/sse` opens the
session's event stream (its first event names the URL to POST to), `POST …/messages?session_id=`
carries each client message and is answered `202 Accepted`; every answer travels on the stream.

Behind that, a session is an ordinary handshake-era session (`LegacyEra`): the backends, their
eras and transports are whatever they are. The POST and the stream may land on different gateway
instances; the `Mailbox` carries the answers to the instance that holds the stream. A stream that
breaks (its instance died) is opened again on any instance with `GET …/sse?session_id=<id>`, and the
session goes on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from urllib.parse import parse_qs

from apps.gateway.pipeline.legacy import LegacyEra, session_limit_error
from apps.gateway.pipeline.metrics import Counters
from apps.gateway.pipeline.ports import Inbox, Mailbox, SessionLimitReached, SessionStore, StoreUnavailable
from apps.gateway.pipeline.replies import SSE_HEADERS, Reply, Stream
from apps.gateway.pipeline.tracing import continue_trace, note_session
from apps.gateway.pipeline.values import HttpRequest, SessionState, VirtualHostView
from apps.gateway.protocol.errors import INVALID_REQUEST, GatewayError, HttpError, InvalidRequest, MethodNotFound
from apps.gateway.protocol.jsonrpc import Kind, Message, dumps, error_message, parse_body
from apps.gateway.protocol.sse import SseEvent, SseParser, encode_event
from apps.kernel.identity import Principal

log = logging.getLogger(__name__)

#: Comment lines this often keep proxies from closing an idle stream; each one also renews the
#: session's idle expiry, so a session lives as long as its stream (and its idle time after).
KEEPALIVE_SECONDS = 15.0
#: Asks the instance holding the stream to relay the backends' own streams too (server-initiated
#: notifications); sent once the client says it is initialized. Not JSON, so never a message.
OPEN_BACKEND_STREAMS = b"\x00open-backend-streams"
_ACCEPTED = Reply(202, (("content-type", "text/plain; charset=utf-8"),), b"Accepted")


def _session_param(request: HttpRequest) -> str | None:
    query = parse_qs(request.query)
    values = query.get("session_id") or query.get("sessionId")
    return values[0] if values else None


class HttpSseTransport:
    def __init__(
        self, *, legacy: LegacyEra, sessions: SessionStore, mailbox: Mailbox, counters: Counters,
        keepalive_seconds: float = KEEPALIVE_SECONDS,
    ) -> None:
        self._legacy = legacy
        self._sessions = sessions
        self._mailbox = mailbox
        self._counters = counters
        self._keepalive = keepalive_seconds
        self._tasks: set[asyncio.Task[None]] = set()
        #: Messages being answered (their answers still to go on the stream); a graceful shutdown
        #: waits for them like for any request in flight.
        self.answering: set[asyncio.Task[None]] = set()

    async def handle(self, request: HttpRequest, vhost: VirtualHostView, principal: Principal) -> Reply:
        if request.endpoint == "sse":
            if request.method != "GET":
                raise HttpError(405, "Method Not Allowed: open the event stream with GET", headers=(("allow", "GET"),))
            return await self._open(request, vhost, principal)
        if request.method != "POST":
            raise HttpError(405, "Method Not Allowed: post messages with POST", headers=(("allow", "POST"),))
        return await self._post(request, vhost, principal)

    async def _open(self, request: HttpRequest, vhost: VirtualHostView, principal: Principal) -> Reply:
        resumed = _session_param(request)
        if resumed is not None:
            state = await self._legacy.session_for(resumed, principal, vhost, handshake_pending=True)
        else:
            state = SessionState(
                id=self._sessions.new_id(), tenant_id=vhost.tenant_id, vhost=vhost.slug, key_id=principal.key_id,
                protocol_version="", client_capabilities={}, client_info={}, transport="sse",
                tenant_slug=vhost.tenant_slug,
            )
            try:
                await self._sessions.save(state, create=True)
            except SessionLimitReached as reached:
                error = session_limit_error(reached.limit)
                raise HttpError(429, error.message, code=error.code) from None
        inbox = await self._mailbox.open(state.id, replace=True)
        endpoint = f"/mcp/{request.tenant}/{request.vhost}/messages?session_id={state.id}"
        self._counters.increment("sse_streams", resumed="yes" if resumed else "no")
        events = self._events(request, vhost, principal, state, endpoint, inbox)
        return Reply(200, SSE_HEADERS, stream=Stream(events, inbox.close))

    async def _events(
        self, request: HttpRequest, vhost: VirtualHostView, principal: Principal, state: SessionState,
        endpoint: str, inbox: Inbox,
    ) -> AsyncIterator[bytes]:
        yield encode_event(SseEvent(endpoint.encode(), event="endpoint"))
        backend_streams: asyncio.Task[None] | None = None
        if state.protocol_version:  # resumed after the handshake: the backends' streams too
            backend_streams = self._relay_backend_streams(request, vhost, principal, state.id)
        try:
            while True:
                message = await inbox.get(self._keepalive)
                if message is None:
                    if inbox.ended:
                        return  # the client opened the stream again, here or elsewhere
                    alive = await self._sessions.load(
                        state.id, tenant_id=state.tenant_id, key_id=state.key_id, fresh=True)
                    if alive is None:
                        return  # ended (DELETE elsewhere, or expired)
                    yield b": keepalive\n\n"
                elif message == OPEN_BACKEND_STREAMS:
                    if backend_streams is None:
                        backend_streams = self._relay_backend_streams(request, vhost, principal, state.id)
                else:
                    yield encode_event(SseEvent(message))
        finally:
            if backend_streams is not None:
                backend_streams.cancel()

    def _relay_backend_streams(
        self, request: HttpRequest, vhost: VirtualHostView, principal: Principal, session_id: str
    ) -> asyncio.Task[None]:
        """Follow the backends' server-initiated messages (what a Streamable HTTP client would GET)
        into this stream, for as long as it is open here."""

        async def relay() -> None:
            try:
                # Fresh: the handshake may have been made on another instance after this one
                # cached the session as its stream opened.
                state = await self._legacy.session_for(session_id, principal, vhost, fresh=True)
                stream_request = replace(request, method="GET", endpoint="", query="", body=b"")
                reply = await self._legacy.open_stream(stream_request, vhost, principal, state)
            except (HttpError, StoreUnavailable) as exc:
                log.info("no backend stream for HTTP+SSE session %s: %s", session_id, exc)
                return
            await self._deliver(session_id, reply, None)

        return self._spawn(relay())

    async def _post(self, request: HttpRequest, vhost: VirtualHostView, principal: Principal) -> Reply:
        session_id = _session_param(request)
        if session_id is None:
            raise HttpError(400, "Bad Request: the session_id query parameter is required", code=-32600)
        state = await self._legacy.session_for(session_id, principal, vhost, handshake_pending=True)
        if not state.protocol_version:
            # This instance's cached copy may predate the handshake, made on another instance.
            state = await self._legacy.session_for(session_id, principal, vhost, handshake_pending=True, fresh=True)
        content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if content_type != "application/json":
            raise HttpError(415, "Unsupported Media Type: POST bodies must be application/json", code=-32600)
        try:
            parsed = parse_body(request.body)
        except GatewayError as error:
            raise HttpError(400, error.message, code=error.code) from None
        if isinstance(parsed, list):
            raise HttpError(400, "Invalid Request: HTTP+SSE sessions take one message per POST", code=-32600)
        message = parsed
        note_session(state.id)
        continue_trace(message)  # the answer, made in a task of its own, continues the trace
        if message.method == "initialize" and message.kind is Kind.REQUEST:
            reply = await self._legacy.initialize(request, vhost, principal, message, session=state)
            await self._deliver(state.id, reply, message)
            return _ACCEPTED
        if not state.protocol_version:
            if message.kind is not Kind.REQUEST:
                raise HttpError(400, "Bad Request: send initialize first", code=-32600)
            # Answered on the stream like every request of this transport (an HTTP error is a
            # broken connection to an SSE client). A client probing for the 2026-07-28 era learns,
            # as from any handshake-era server, that `server/discover` is not a method here.
            error = (MethodNotFound(f"Method not found: {message.method}") if message.method == "server/discover"
                     else InvalidRequest("Invalid Request: send initialize first"))
            await self._mailbox.post(state.id, [dumps(error_message(message.id, error.to_error()))])
            return _ACCEPTED
        # The answer may take long (a tool call): accept at once, answer on the stream.
        task = self._spawn(self._answer(request, vhost, principal, state, message))
        self.answering.add(task)
        task.add_done_callback(self.answering.discard)
        return _ACCEPTED

    async def _answer(
        self, request: HttpRequest, vhost: VirtualHostView, principal: Principal, state: SessionState, message: Message
    ) -> None:
        as_stream = replace(request, headers={**request.headers, "accept": "text/event-stream",
                                              "mcp-session-id": state.id})
        try:
            reply = await self._legacy.handle(as_stream, vhost, principal, state, message, wants_sse=True)
        except HttpError as error:
            if message.kind is Kind.REQUEST:
                await self._mailbox.post(state.id, [dumps(error_message(
                    message.id, {"code": error.code or INVALID_REQUEST, "message": error.message}))])
            return
        await self._deliver(state.id, reply, message)
        if message.kind is Kind.NOTIFICATION and message.method == "notifications/initialized":
            await self._mailbox.post(state.id, [OPEN_BACKEND_STREAMS])

    async def _deliver(self, session_id: str, reply: Reply, message: Message | None) -> None:
        """Post what the pipeline answered, message by message, to the session's stream."""
        if reply.stream is not None:
            parser = SseParser()
            try:
                async for chunk in reply.stream:
                    messages = [event.data for event in parser.feed(chunk) if event.data]
                    if messages:
                        await self._mailbox.post(session_id, messages)
            finally:
                await reply.stream.aclose()
            return
        if not reply.body:
            return
        if ("content-type", "text/event-stream") in reply.headers:  # a stream answered in one piece
            messages = [event.data for event in SseParser().feed(reply.body + b"\n\n") if event.data]
            await self._mailbox.post(session_id, messages)
        elif reply.body.startswith((b"{", b"[")):
            await self._mailbox.post(session_id, [reply.body])
        elif message is not None and message.kind is Kind.REQUEST:
            text = reply.body.decode("utf-8", "replace")[:500]
            await self._mailbox.post(session_id, [dumps(error_message(message.id, {
                "code": -32603, "message": f"HTTP {reply.status}: {text}"}))])

    def _spawn(self, work: object) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.ensure_future(work)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("answering an HTTP+SSE message failed", exc_info=task.exception())

