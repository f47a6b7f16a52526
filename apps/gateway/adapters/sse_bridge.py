"""Backends that speak only HTTP+SSE (2024-11-05), made to look like Streamable HTTP ones, so the
pipeline has one way to talk to a backend session.

Such a backend answers every POST on the event stream of the session, not on the POST. The
instance that opened the session holds that stream (`_Held`); any instance may POST to the
session's message endpoint, which the bridge session id carries. What the stream brings goes where
it belongs:
- a response, or a progress notification, of a request: to the instance that sent it. The bridge
  rewrote the request's id (and progress token) to `<that instance's channel>#<n>` and restores it;
- a server→client request (sampling, elicitation, roots) while exactly one request of the session
  waits on this instance: into that request's answer, as a Streamable HTTP backend would send it;
- anything else (notifications of the session, other server→client requests): to whoever holds
  the session's GET stream (`Mailbox`, keyed by the bridge session id).
A session whose stream ends (its instance died, the backend restarted) is gone for the backend
too: its next POST gets 404, and the pipeline opens a new one, as with any backend that forgets."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import urljoin, urlsplit

import orjson
from channels.layers import BaseChannelLayer
from redis.exceptions import RedisError

from apps.gateway.pipeline.ports import Inbox, Mailbox, UpstreamReply, UpstreamUnavailable
from apps.gateway.pipeline.values import BackendView
from apps.gateway.protocol.sse import SseEvent, encode_event

log = logging.getLogger(__name__)

_PREFIX = "sse1."
_REPLY_TYPE = "mcp.upstream.reply"
_CLOSE = b"\x00close"
#: How long a new stream may take to name its message endpoint.
_ENDPOINT_SECONDS = 10.0

#: Sends one request to any URL: `HttpUpstream.request(method, url, headers, body, timeout)`.
#: (method, url, headers, body, timeout, allow_private=...): `HttpUpstream.request`.
Send = Callable[..., Awaitable[UpstreamReply]]


def session_token(endpoint: str) -> str:
    return _PREFIX + base64.urlsafe_b64encode(endpoint.encode()).rstrip(b"=").decode("ascii")


def endpoint_of(token: str) -> str | None:
    if not token.startswith(_PREFIX):
        return None
    data = token[len(_PREFIX):]
    try:
        return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)).decode()
    except ValueError:
        return None


class BridgeReply:
    """An `UpstreamReply` made by the bridge: a status, or the answer to one request as events."""

    def __init__(
        self, status: int, headers: Mapping[str, str] | None = None, *, body: bytes = b"",
        messages: AsyncIterator[bytes] | None = None, on_close: Callable[[], None] | None = None,
    ) -> None:
        self.status = status
        self.headers = dict(headers or {})
        self._body = body
        self._messages = messages
        self._on_close = on_close
        if messages is not None:
            self.headers.setdefault("content-type", "text/event-stream")
        elif body:
            self.headers.setdefault("content-type", "application/json")

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    async def read(self, limit: int = 0) -> bytes:
        if self._messages is None:
            return self._body
        return b"".join([encode_event(event) async for event in self.events()])

    async def events(self) -> AsyncIterator[SseEvent]:
        if self._messages is None:
            return
        try:
            async for message in self._messages:
                yield SseEvent(message)
        finally:
            self.close()

    def close(self) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()


class _Held:
    """A backend event stream this instance holds, and the session it carries."""

    def __init__(self, token: str, reader: asyncio.Task[None]) -> None:
        self.token = token
        self.reader = reader
        self.owner_inbox: Inbox | None = None


class SseBridge:
    def __init__(self, send: Send, *, layer: BaseChannelLayer, mailbox: Mailbox) -> None:
        self._send = send
        self._layer = layer
        self._mailbox = mailbox
        self._held: dict[str, _Held] = {}
        self._waiting: dict[str, asyncio.Queue[dict[str, Any]]] = {}
        self._session_of: dict[str, str] = {}  # waiting request -> the bridge session it was sent in
        self._seq = itertools.count(1)
        self._channel: str | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def send(
        self, backend: BackendView, replica: str, method: str, headers: list[tuple[str, str]], body: bytes,
        *, timeout: float,
    ) -> UpstreamReply:
        private = backend.allow_private
        session = next((value for name, value in headers if name == "mcp-session-id"), None)
        passed = [(name, value) for name, value in headers
                  if name not in {"mcp-session-id", "mcp-protocol-version", "accept", "last-event-id"}]
        if method == "DELETE":
            await self._end(session)
            return BridgeReply(200)
        if method == "GET":
            if session is None:  # a health check: is anything there?
                return await self._send("GET", replica, [("accept", "text/event-stream")], b"", timeout,
                                        allow_private=private)
            return await self._listen(session)
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError:
            return BridgeReply(400, body=b'{"error": "not JSON"}')
        if not isinstance(message, dict):
            return BridgeReply(400, body=b'{"error": "one message per request"}')
        if session is None:
            if message.get("method") != "initialize":
                # What a backend of the handshake era answers a stateless request.
                return BridgeReply(400, {"content-type": "text/plain"}, body=b"Bad Request: initialize first")
            return await self._open(replica, passed, message, timeout, private=private)
        endpoint = endpoint_of(session)
        if endpoint is None or urlsplit(endpoint)[:2] != urlsplit(replica)[:2]:
            # Not a session of this replica's: never post anywhere else.
            return BridgeReply(404, body=b'{"error": "unknown session"}')
        return await self._post(endpoint, passed, message, timeout, private=private)

    async def _open(
        self, replica: str, headers: list[tuple[str, str]], message: dict[str, Any], timeout: float, *, private: bool
    ) -> BridgeReply:
        get_headers = [(name, value) for name, value in headers if name != "content-type"]
        stream = await self._send("GET", replica, [*get_headers, ("accept", "text/event-stream")], b"", timeout,
                                  allow_private=private)
        if stream.status != 200 or stream.content_type != "text/event-stream":
            stream.close()
            raise UpstreamUnavailable(f"the backend's event stream answered HTTP {stream.status}")
        events = stream.events()
        try:
            async with asyncio.timeout(_ENDPOINT_SECONDS):
                async for event in events:
                    if event.event == "endpoint":
                        endpoint = urljoin(replica, event.data.decode())
                        break
                else:
                    raise UpstreamUnavailable("the backend's event stream ended before naming its endpoint")
        except BaseException:
            stream.close()
            raise
        if urlsplit(endpoint)[:2] != urlsplit(replica)[:2]:
            stream.close()  # a backend may not send the gateway's requests elsewhere
            raise UpstreamUnavailable("the backend named a message endpoint on another origin")
        token = session_token(endpoint)
        held = _Held(token, asyncio.ensure_future(self._read(token, events, stream.close)))
        self._held[token] = held
        held.owner_inbox = await self._mailbox.open(f"owner:{token}")
        self._spawn(self._await_close(held))
        reply = await self._post(endpoint, headers, message, timeout, private=private)
        reply.headers["mcp-session-id"] = token
        return reply

    async def _post(
        self, endpoint: str, headers: list[tuple[str, str]], message: dict[str, Any], timeout: float, *, private: bool
    ) -> BridgeReply:
        original_id = message.get("id")
        is_request = isinstance(message.get("method"), str) and original_id is not None
        key = ""
        original_token = None
        if is_request:
            key = f"{await self._reply_channel()}#{next(self._seq)}"
            message = {**message, "id": key}
            params = message.get("params")
            meta = params.get("_meta") if isinstance(params, dict) else None
            if isinstance(meta, dict) and "progressToken" in meta:
                original_token = meta["progressToken"]
                message["params"] = {**params, "_meta": {**meta, "progressToken": key}}
            self._waiting[key] = asyncio.Queue()
            self._session_of[key] = session_token(endpoint)
        try:
            answer = await self._send("POST", endpoint, [*headers, ("content-type", "application/json")],
                                      orjson.dumps(message), timeout, allow_private=private)
            status = answer.status
            detail = await answer.read()
        except BaseException:
            self._forget(key)
            raise
        if status >= 300 or not is_request:
            self._forget(key)
            if status >= 300:  # 404: the backend no longer knows the session
                return BridgeReply(status, {"content-type": answer.content_type}, body=detail)
            return BridgeReply(202)
        return BridgeReply(200, messages=self._answers(key, original_id, original_token, timeout),
                           on_close=lambda: self._forget(key))

    def _forget(self, key: str) -> None:
        self._waiting.pop(key, None)
        self._session_of.pop(key, None)

    async def _answers(self, key: str, original_id: Any, original_token: Any, timeout: float) -> AsyncIterator[bytes]:
        """The request's progress notifications, then its response, in the client's terms."""
        queue = self._waiting[key]
        try:
            while True:
                try:
                    message = await asyncio.wait_for(queue.get(), timeout)
                except TimeoutError:
                    raise UpstreamUnavailable(f"no answer on the backend's event stream within {timeout:g}s") from None
                if message.get("method") == "notifications/progress":
                    params = dict(message.get("params") or {})
                    params["progressToken"] = original_token
                    yield orjson.dumps({**message, "params": params})
                    continue
                if "method" in message:  # a request of the backend's, made during this one
                    yield orjson.dumps(message)
                    continue
                yield orjson.dumps({**message, "id": original_id})
                return
        finally:
            self._forget(key)

    async def _read(self, token: str, events: AsyncIterator[SseEvent], close: Callable[[], None]) -> None:
        """Sort what the backend's stream brings until it ends."""
        try:
            async for event in events:
                if event.event != "message" or not event.data:
                    continue
                try:
                    message = orjson.loads(event.data)
                except orjson.JSONDecodeError:
                    log.warning("backend stream of %s sent an event that is not JSON", token[:40])
                    continue
                if isinstance(message, dict):
                    await self._route(token, message)
        except UpstreamUnavailable as exc:
            log.info("backend event stream ended: %s", exc)
        finally:
            close()
            held = self._held.pop(token, None)
            if held is not None and held.owner_inbox is not None:
                held.owner_inbox.close()

    async def _route(self, token: str, message: dict[str, Any]) -> None:
        key = message.get("id") if "method" not in message else (
            ((message.get("params") or {}).get("progressToken")) if message.get("method") == "notifications/progress" else None
        )
        if isinstance(key, str) and "#" in key:
            queue = self._waiting.get(key)
            if queue is not None:
                queue.put_nowait(message)
                return
            channel = key.rsplit("#", 1)[0]
            if channel != self._channel:
                with contextlib.suppress(RedisError, OSError):
                    await self._layer.send(channel, {"type": _REPLY_TYPE, "key": key, "message": orjson.dumps(message)})
                return
        if "method" in message and "id" in message:
            # A request of the backend's: HTTP+SSE does not say during which request it was made.
            # With one request of the session waiting here, it is that one's (so a stateless client
            # can be asked through an InputRequiredResult, as with Streamable HTTP backends).
            waiting = [waiting for waiting, session in self._session_of.items() if session == token]
            if len(waiting) == 1:
                self._waiting[waiting[0]].put_nowait(message)
                return
        await self._mailbox.post(token, [orjson.dumps(message)])

    async def _listen(self, token: str) -> BridgeReply:
        """The session's GET stream: what its backend stream brings outside any request."""
        inbox = await self._mailbox.open(token)

        async def messages() -> AsyncIterator[bytes]:
            while True:
                message = await inbox.get(3600.0)
                if message is not None:
                    yield message

        return BridgeReply(200, messages=messages(), on_close=inbox.close)

    async def _end(self, token: str | None) -> None:
        if token is None:
            return
        held = self._held.get(token)
        if held is not None:
            held.reader.cancel()
        else:  # held elsewhere: ask its instance
            await self._mailbox.post(f"owner:{token}", [_CLOSE])

    async def _await_close(self, held: _Held) -> None:
        inbox = held.owner_inbox
        while inbox is not None and not held.reader.done():
            if await inbox.get(60.0) == _CLOSE:
                held.reader.cancel()
                return

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reply_channel(self) -> str:
        """This process's channel, on which other instances hand over what belongs to its requests."""
        if self._channel is None:
            self._channel = await self._layer.new_channel()
            self._spawn(self._receive_replies(self._channel))
        return self._channel

    async def _receive_replies(self, channel: str) -> None:
        while True:
            try:
                received = await self._layer.receive(channel)
            except (RedisError, OSError) as exc:
                log.warning("relay of backend stream replies interrupted, retrying: %s", exc)
                await asyncio.sleep(1.0)
                continue
            queue = self._waiting.get(received.get("key", ""))
            if received.get("type") == _REPLY_TYPE and queue is not None:
                queue.put_nowait(orjson.loads(received["message"]))
