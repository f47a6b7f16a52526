"""Server→client requests of a handshake-era backend, for clients of the stateless era (MRTR,
SEP-2322): such a client cannot answer a request on a stream, so the gateway answers its call with
an `InputRequiredResult` carrying the backend's request, keeps the backend's call waiting, and
when the client retries with `inputResponses`, hands the answer to the backend and relays the rest
of the call.

The waiting call stays on the instance that made it (`_Parked`); the retry may land on any
instance. They meet in the `Mailbox`: the retry posts the client's answers to `in:<key>` and reads
what follows from `out:<key>`. `requestState` is `gw-input.<key>`, the key 128 random bits and a
tag binding them to the caller that made the call — tenant, virtual host and principal (`caller`)
— under a secret every instance shares: knowing it is what lets a retry continue the call, and a
retry by anyone else, or on another virtual host, is refused before it reaches any instance."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from apps.gateway.pipeline.ports import Inbox, Mailbox, StoreUnavailable, UpstreamReply, UpstreamUnavailable
from apps.gateway.protocol import jsonrpc
from apps.gateway.protocol.sse import SseEvent

log = logging.getLogger(__name__)

STATE_PREFIX = "gw-input."
#: Backend requests a stateless client can answer as `inputResponses`.
INPUT_METHODS = frozenset({"sampling/createMessage", "elicitation/create", "roots/list"})
_ACK = b"\x00ack"
#: How long a retry waits to hear that some instance holds the call its requestState names.
_ACK_SECONDS = 2.0

#: Sends one message (the client's answer to a backend request) in the call's backend session.
Respond = Callable[[bytes], Awaitable[None]]


class UnknownRequestState(Exception):
    """No instance holds a call for this requestState (never made, answered, or given up)."""


class ForeignRequestState(UnknownRequestState):
    """The requestState was not issued to this caller on this virtual host (or not by a gateway
    of this deployment at all): its tag does not match."""


def caller_of(tenant_id: int, vhost: str, key_id: int) -> str:
    """Who made a call, as its requestState is bound to: the principal, on one tenant's virtual host."""
    return f"{tenant_id}/{vhost}/{key_id}"


def request_key(params: Mapping[str, Any]) -> str | None:
    """The key of a retry's `requestState`, if it is one the gateway issued."""
    state = params.get("requestState")
    if isinstance(state, str) and state.startswith(STATE_PREFIX) and 8 < len(state) < 100:
        return state[len(STATE_PREFIX):]
    return None


def _input_request(message: dict[str, Any]) -> bool:
    return message.get("method") in INPUT_METHODS and "id" in message


def _required(request_id: Any, key: str, request: dict[str, Any]) -> bytes:
    result = {"resultType": "input_required", "requestState": STATE_PREFIX + key,
              "inputRequests": {key: {"method": request["method"], "params": request.get("params") or {}}}}
    return jsonrpc.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})


class InputRequests:
    def __init__(self, mailbox: Mailbox, *, secret: bytes | None = None, wait_seconds: float = 300.0) -> None:
        """`secret` tags request states; every instance of a deployment needs the same one (None: a
        random one, so retries must come back to this instance)."""
        self._mailbox = mailbox
        self._secret = hashlib.sha256(b"mcp-gateway request states|" + (secret or secrets.token_bytes(32))).digest()
        self._wait_seconds = wait_seconds
        self._tasks: set[asyncio.Task[None]] = set()

    def _tag(self, nonce: str, caller: str) -> str:
        digest = hmac.new(self._secret, f"{nonce}|{caller}".encode(), hashlib.sha256).digest()[:12]
        return base64.urlsafe_b64encode(digest).decode("ascii")

    def new_key(self, caller: str) -> str:
        """A fresh key for one backend request of `caller`'s call: random, tagged for that caller."""
        nonce = secrets.token_urlsafe(16)
        return f"{nonce}.{self._tag(nonce, caller)}"

    def _check(self, key: str, caller: str) -> None:
        nonce, _, tag = key.rpartition(".")
        if not nonce or not hmac.compare_digest(tag.encode(), self._tag(nonce, caller).encode()):
            raise ForeignRequestState(key)

    def intercept(self, reply: UpstreamReply, *, upstream_id: str, caller: str, respond: Respond) -> UpstreamReply:
        """The reply of a call as the stateless client may see it: up to the first backend request
        it can only answer by retrying, which then ends it as an `InputRequiredResult`."""
        return _Intercepted(self, reply, upstream_id, caller, respond)

    async def resume(self, key: str, *, caller: str, responses: Any, upstream_id: str, timeout: float) -> UpstreamReply:
        """The rest of the call `key` names, once the client's `responses` reached the backend;
        its response carries `upstream_id` (the retry's). Raises ForeignRequestState when `key`
        was not issued to `caller` (nothing is sent anywhere), UnknownRequestState when no
        instance holds its call."""
        self._check(key, caller)
        # Only the answer to this key travels: the rest of `inputResponses` is nobody's business.
        answer = responses.get(key) if isinstance(responses, dict) else None
        inbox = await self._mailbox.open(f"out:{key}")
        try:
            await self._mailbox.post(f"in:{key}", [jsonrpc.dumps(
                {"caller": caller, "responses": {key: answer}, "upstream_id": upstream_id})])
            if await inbox.get(_ACK_SECONDS) != _ACK:
                raise UnknownRequestState(key)
        except BaseException:
            inbox.close()
            raise

        async def messages() -> AsyncIterator[SseEvent]:
            try:
                while True:
                    message = await inbox.get(timeout)
                    if message is None:
                        raise UpstreamUnavailable(f"no answer within {timeout:g}s")
                    yield SseEvent(message)
                    if b'"method"' not in message:
                        return  # the response (or the next InputRequiredResult) ends it
            finally:
                inbox.close()

        return _Events(messages(), inbox.close)

    def park(self, key: str, events: AsyncIterator[SseEvent], reply: UpstreamReply, *,
             request_id: Any, upstream_id: str, caller: str, respond: Respond) -> Awaitable[None]:
        """Keep a backend call waiting for the client's answer to its request `request_id`."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(self._wait(key, events, reply, request_id, upstream_id, caller, respond, ready))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return ready

    async def _wait(
        self, key: str, events: AsyncIterator[SseEvent], reply: UpstreamReply, request_id: Any,
        upstream_id: str, caller: str, respond: Respond, ready: asyncio.Future[None],
    ) -> None:
        """Wait for a retry, hand its answer to the backend, relay what follows to the retry; again
        for each further backend request. The backend knows the call by `upstream_id` throughout;
        the client by the id of its latest retry."""
        inbox: Inbox | None = None
        try:
            inbox = await self._mailbox.open(f"in:{key}")
            ready.set_result(None)  # listening: the client may be told now
            while True:
                assert inbox is not None
                raw = await inbox.get(self._wait_seconds)
                if raw is None:
                    return  # the client gave up: closing the stream cancels the backend's call
                retry = jsonrpc.loads(raw)
                if retry.get("caller") != caller:
                    log.warning("a retry by another caller named a waiting call; ignored")
                    continue  # unanswered: that retry is told nobody holds the call
                inbox.close()
                inbox = None
                out = f"out:{key}"
                await self._mailbox.post(out, [_ACK])
                answer = (retry.get("responses") or {}).get(key)
                await respond(jsonrpc.dumps({"jsonrpc": "2.0", "id": request_id, "result": answer or {}}))
                retried = retry.get("upstream_id") or upstream_id
                async for event in events:
                    message = jsonrpc.loads(event.data) if event.data else None
                    if not isinstance(message, dict):
                        continue
                    if _input_request(message):
                        key, request_id = self.new_key(caller), message["id"]
                        inbox = await self._mailbox.open(f"in:{key}")  # before the client can retry
                        await self._mailbox.post(out, [_required(retried, key, message)])
                        break
                    if "method" not in message and message.get("id") == upstream_id:
                        await self._mailbox.post(out, [jsonrpc.dumps({**message, "id": retried})])
                        return
                    params = message.get("params")
                    if isinstance(params, dict) and params.get("progressToken") == upstream_id:
                        message = {**message, "params": {**params, "progressToken": retried}}
                    await self._mailbox.post(out, [jsonrpc.dumps(message)])
                else:
                    return  # the stream ended without a response
        except (UpstreamUnavailable, StoreUnavailable, ValueError) as exc:
            log.info("a call waiting for input ended: %s", exc)
        finally:
            if inbox is not None:
                inbox.close()
            if not ready.done():
                ready.set_result(None)
            reply.close()


class _Intercepted:
    def __init__(self, owner: InputRequests, reply: UpstreamReply, upstream_id: str, caller: str, respond: Respond) -> None:
        self._owner = owner
        self._reply = reply
        self._upstream_id = upstream_id
        self._caller = caller
        self._respond = respond
        self._parked = False
        self.status = reply.status
        self.headers = reply.headers

    @property
    def content_type(self) -> str:
        return self._reply.content_type

    async def read(self, limit: int = 16 * 1024 * 1024) -> bytes:
        return await self._reply.read(limit)

    async def events(self) -> AsyncIterator[SseEvent]:
        events = self._reply.events()
        async for event in events:
            message = None
            if event.data and b'"method"' in event.data:
                try:
                    message = jsonrpc.loads(event.data)
                except ValueError:
                    message = None
            if isinstance(message, dict) and _input_request(message):
                key = self._owner.new_key(self._caller)
                self._parked = True
                await self._owner.park(key, events, self._reply, request_id=message["id"],
                                       upstream_id=self._upstream_id, caller=self._caller, respond=self._respond)
                yield SseEvent(_required(self._upstream_id, key, message))
                return
            yield event

    def close(self) -> None:
        if not self._parked:  # a parked call's stream is the waiting task's to close
            self._reply.close()


class _Events:
    """A reply made of events the gateway relays from elsewhere."""

    status = 200
    headers: Mapping[str, str] = {"content-type": "text/event-stream"}
    content_type = "text/event-stream"

    def __init__(self, events: AsyncIterator[SseEvent], on_close: Callable[[], None]) -> None:
        self._events = events
        self._on_close = on_close

    async def read(self, limit: int = 0) -> bytes:
        return b""

    def events(self) -> AsyncIterator[SseEvent]:
        return self._events

    def close(self) -> None:
        self._on_close()
