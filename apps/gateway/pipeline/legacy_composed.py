"""Handshake-era sessions on a virtual host whose names are rewritten (several backends, or aliases):
lists merged from every backend, routed requests to one, the client's answers and notifications to
the backends they concern, and the backends' GET streams merged into one (docs/virtual-hosts.md).

The session holds one backend session per map key, opened on first use (`session_backends.py`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from typing import Any

from apps.gateway.pipeline.answers import translate_event
from apps.gateway.pipeline.backends import BackendCatalog, BackendRefused
from apps.gateway.pipeline.calls import Leg
from apps.gateway.pipeline.compose import backend_request_of, stream_event_id, stream_positions, with_related_task
from apps.gateway.pipeline.cursors import ListScope, stale_cursor
from apps.gateway.pipeline.forwarder import Forwarder
from apps.gateway.pipeline.host_lists import HostLists
from apps.gateway.pipeline.interception import stream_event_kept
from apps.gateway.pipeline.listing import LIST_METHODS, encode_page
from apps.gateway.pipeline.ports import UpstreamReply, UpstreamUnavailable
from apps.gateway.pipeline.replies import SSE_HEADERS, Reply, Stream, accepted, error_reply, result_reply
from apps.gateway.pipeline.session_backends import SessionBackends
from apps.gateway.pipeline.task_ids import TASK_METHODS
from apps.gateway.pipeline.values import BackendView, HttpRequest, SessionState, VirtualHostView
from apps.gateway.protocol import jsonrpc
from apps.gateway.protocol.errors import GatewayError, HttpError, InvalidParams, MethodNotFound
from apps.gateway.protocol.jsonrpc import Kind, Message
from apps.gateway.protocol.sse import SseEvent, encode_event
from apps.kernel.identity import Principal
from apps.kernel.names import ROUTED_METHODS

log = logging.getLogger(__name__)

#: How many (session, request id) -> map key entries are remembered for routing cancellations.
_IN_FLIGHT = 10_000
_MAX_TASK_PAGES = 20  # backend pages one `tasks/list` reads at most (empty ones are passed over)
_TASK_LIST_VERSION = bytes(8)  # a list of tasks has no version: its cursors follow the backends' own
#: Where a page of a composed host's `tasks/list` starts: map key, the backend's cursor, items served.
_TaskPosition = tuple[str, str | None, int]


def _task_scope(vhost: VirtualHostView) -> ListScope:
    return ListScope("tasks", vhost.tenant_id, vhost.slug, _TASK_LIST_VERSION)


class InFlight:
    """Which backend each request of a session went to, for routing its cancellation (the most
    recent `_IN_FLIGHT`)."""

    def __init__(self) -> None:
        self._map_keys: OrderedDict[tuple[str, str], str] = OrderedDict()

    def remember(self, session_id: str, request_id: object, map_key: str) -> None:
        self._map_keys[(session_id, jsonrpc.dumps(request_id).decode())] = map_key
        if len(self._map_keys) > _IN_FLIGHT:
            self._map_keys.popitem(last=False)

    def map_key(self, session_id: str, request_id: object) -> str | None:
        return self._map_keys.get((session_id, jsonrpc.dumps(request_id).decode()))


class ComposedLegacy:
    def __init__(
        self, *, forwarder: Forwarder, lists: HostLists, backends: BackendCatalog, backend_sessions: SessionBackends
    ) -> None:
        self._forwarder = forwarder
        self._lists = lists
        self._backends = backends
        self._backend_sessions = backend_sessions
        self.in_flight = InFlight()

    async def handle(
        self,
        leg: Leg,
        request: HttpRequest,
        vhost: VirtualHostView,
        principal: Principal,
        state: SessionState,
        message: Message,
        wants_sse: bool,
    ) -> Reply:
        headers = (("mcp-session-id", state.id),)
        try:
            if message.kind is Kind.REQUEST:
                return await self._request(leg, request, vhost, principal, message, wants_sse)
            if message.kind is Kind.RESPONSE:
                return await self._answer(leg, request, vhost, principal, state, message)
            return await self._notification(leg, request, vhost, principal, state, message)
        except GatewayError as error:
            return error_reply(message.id, error, headers)

    async def _request(
        self, leg: Leg, request: HttpRequest, vhost: VirtualHostView, principal: Principal, message: Message,
        wants_sse: bool,
    ) -> Reply:
        method = message.method or ""
        headers = (("mcp-session-id", leg.session_id),)
        sse = wants_sse and "application/json" not in request.headers.get("accept", "*/*")
        forwarder = self._forwarder
        if method in LIST_METHODS:
            result = await self._lists.result(vhost, principal, method, message.params, modern=False)
            return result_reply(message.id, result, sse=sse, headers=headers)
        if method == "logging/setLevel":
            # Every backend that logs gets the level; the client asked the gateway, which answers.
            await asyncio.gather(*(
                forwarder.direct(leg, request, vhost, principal, message, map_key=map_key, wants_sse=False)
                for map_key in await self._with_capability(vhost, "logging")
            ))
            return result_reply(message.id, {}, sse=sse, headers=headers)
        if method in ROUTED_METHODS:
            return await forwarder.routed(leg, request, vhost, principal, message, wants_sse=wants_sse)
        single = vhost.naming.single_key
        if single is None:
            if method in TASK_METHODS:
                return await forwarder.tasked(leg, request, vhost, principal, message, wants_sse=wants_sse)
            if method == "tasks/list":
                return result_reply(message.id, await self._tasks(leg, request, vhost, principal, message), sse=sse,
                                    headers=headers)
            raise MethodNotFound(f"Method not found: {method}")
        # One backend (aliases or a policy): what names nothing passes through, its task ids too.
        return await forwarder.direct(leg, request, vhost, principal, message, map_key=single, wants_sse=wants_sse)

    async def _answer(
        self, leg: Leg, request: HttpRequest, vhost: VirtualHostView, principal: Principal, state: SessionState,
        message: Message,
    ) -> Reply:
        """The client's answer to a backend's request goes to that backend, with the backend's own
        ids: the request's, and the task's it belongs to."""
        target = backend_request_of(message.id)
        if target is None or target[0] not in vhost.mounts:
            log.info("session %s answered request %r, which no backend made", state.id, message.id)
            return accepted().with_headers((("mcp-session-id", state.id),))
        map_key, backend_id = target

        def upstream_task(task_id: str) -> str | None:
            task = self._forwarder.task_of(vhost, principal, task_id)
            return task[1] if task is not None and task[0] == map_key else None

        # An answer to a request a task made names the task as the host showed it: the backend's id again.
        raw = with_related_task({**message.raw, "id": backend_id}, upstream_task)
        answer = Message(Kind.RESPONSE, raw, id=backend_id)
        return await self._forwarder.direct(leg, request, vhost, principal, answer, map_key=map_key, wants_sse=False,
                                            body=jsonrpc.dumps(raw))

    async def _notification(
        self, leg: Leg, request: HttpRequest, vhost: VirtualHostView, principal: Principal, state: SessionState,
        message: Message,
    ) -> Reply:
        """A cancellation goes to the backend that has the request; other notifications (roots
        changed, ...) to every backend this session has a backend session with."""
        forwarder = self._forwarder
        if message.method == "notifications/cancelled":
            map_key = self.in_flight.map_key(state.id, message.params.get("requestId"))
            if map_key is not None and map_key in vhost.mounts:
                return await forwarder.direct(leg, request, vhost, principal, message, map_key=map_key, wants_sse=False)
        await asyncio.gather(*(
            forwarder.direct(leg, request, vhost, principal, message, map_key=map_key, wants_sse=False)
            for map_key in vhost.mounts
            if map_key in state.backends
        ))
        return accepted().with_headers((("mcp-session-id", state.id),))

    async def _tasks(
        self, leg: Leg, request: HttpRequest, vhost: VirtualHostView, principal: Principal, message: Message
    ) -> dict[str, Any]:
        """`tasks/list`: the tasks of every backend that lists its tasks, one backend after another,
        each backend's pages as they come, cut to the host's page limits (`listing.PageLimits`), their
        ids as the host shows them. The cursor is a signed piece cursor of the `tasks` list saying
        which backend, its own cursor, and how many of that page were served already."""
        order = await self._with_capability(vhost, "tasks", "list")
        position: _TaskPosition | None = self._task_position(vhost, message.params.get("cursor"), order)
        for _ in range(_MAX_TASK_PAGES):  # backends with no tasks are passed over, a bounded number
            if position is None:
                return {"tasks": []}
            map_key, upstream, served = position
            tasks, upstream_next = await self._backend_tasks(leg, request, vhost, principal, message, map_key, upstream)
            encoded, end = encode_page(tasks, served, self._lists.pages)
            if end < len(tasks):
                position = (map_key, upstream, end)
            elif upstream_next is not None:
                position = (map_key, upstream_next, 0)
            else:
                following = order[order.index(map_key) + 1 :] if map_key in order else []
                position = (following[0], None, 0) if following else None
            if end > served or position is None:
                return self._task_page(vhost, encoded, position)
        return self._task_page(vhost, b"[]", position)

    def _task_page(self, vhost: VirtualHostView, encoded: bytes, position: _TaskPosition | None) -> dict[str, Any]:
        result: dict[str, Any] = {"tasks": jsonrpc.encoded(encoded)}
        if position is not None:
            map_key, upstream, served = position
            cursor = self._lists.codec.encode_piece(_task_scope(vhost), served, jsonrpc.dumps([map_key, upstream]).decode())
            if cursor is None:  # the backend's own cursor is too long to carry: the list ends here
                log.warning("tasks/list: backend under %s gave a cursor too long to page on; its list is cut", map_key)
            else:
                result["nextCursor"] = cursor
        return result

    def _task_position(self, vhost: VirtualHostView, cursor: object, order: list[str]) -> _TaskPosition | None:
        """Where the page a `tasks/list` asks for starts; InvalidParams for a cursor this host did not give."""
        if cursor is None:
            return (order[0], None, 0) if order else None
        piece = self._lists.codec.open_piece(cursor, "tasks", vhost.tenant_id, vhost.slug)
        if piece is None or piece.upstream is None:
            raise InvalidParams("Invalid params: unknown cursor; list again without a cursor", data={"cursor": "malformed"})
        try:
            map_key, upstream = jsonrpc.loads(piece.upstream)
        except (ValueError, TypeError):  # a piece cursor of this host's tasks while it had one backend
            raise stale_cursor("tasks") from None
        if map_key not in order:
            raise stale_cursor("tasks")  # the backend it was in no longer lists tasks on this host
        return map_key, upstream, piece.offset

    async def _backend_tasks(
        self, leg: Leg, request: HttpRequest, vhost: VirtualHostView, principal: Principal, message: Message,
        map_key: str, cursor: str | None,
    ) -> tuple[list[Any], str | None]:
        """One page of the backend's tasks (ids as the host shows them), and its cursor of the next."""
        params = {k: v for k, v in message.params.items() if k != "cursor"}
        if cursor is not None:
            params["cursor"] = cursor
        page = Message(Kind.REQUEST, {**message.raw, "params": params}, method="tasks/list", id=message.id)
        reply = await self._forwarder.tasked(leg, request, vhost, principal, page, wants_sse=False, map_key=map_key)
        answer = jsonrpc.loads(reply.body) if reply.body else {}
        result = answer.get("result") if isinstance(answer, dict) else None
        if not isinstance(result, dict) or not isinstance(result.get("tasks"), list):
            log.info("tasks/list: backend under %s answered no list; left out", map_key)
            return [], None
        upstream_next = result.get("nextCursor")
        return result["tasks"], upstream_next if isinstance(upstream_next, str) and upstream_next else None

    async def _with_capability(self, vhost: VirtualHostView, capability: str, flag: str | None = None) -> list[str]:
        """Map keys of the MCP backends that declared `capability` (with `flag` in it, when given;
        unreachable ones left out)."""
        found = []
        for map_key, backend in vhost.mounts.items():
            if backend.server is not None:
                continue
            try:
                info = await self._backends.info(backend)
            except (UpstreamUnavailable, BackendRefused, TimeoutError):
                continue
            capabilities = info.legacy_capabilities if info.legacy_version else info.modern_capabilities
            declared = capabilities.get(capability)
            if capability in capabilities and (flag is None or (isinstance(declared, Mapping) and flag in declared)):
                found.append(map_key)
        return found

    # --- the GET stream ------------------------------------------------------------------------------

    async def open_stream(
        self, request: HttpRequest, vhost: VirtualHostView, principal: Principal, state: SessionState
    ) -> Reply:
        """One stream made of every backend's GET stream, each message in client terms, plus the
        `list_changed` notifications of the host's backends seen anywhere in this process. Event ids
        carry every backend's last event id, so a client resuming with Last-Event-ID resumes each
        backend where it was."""
        resume = stream_positions(request.headers.get("last-event-id"))
        opened = await asyncio.gather(*(
            self._open(state, map_key, backend, principal, resume.get(map_key)) for map_key, backend in vhost.mounts.items()
        ))
        replies = {map_key: reply for map_key, reply in zip(vhost.mounts, opened, strict=True) if reply is not None}
        if not replies and not any(backend.server is None for backend in vhost.mounts.values()):
            raise HttpError(405, "Method Not Allowed: no backend of this host has a server stream",
                            headers=(("allow", "POST, DELETE"),))
        subscription = self._lists.changes.subscribe(frozenset(backend.id for backend in vhost.mounts.values()))
        queue: asyncio.Queue[tuple[str, SseEvent] | None] = asyncio.Queue()

        async def pump(map_key: str, reply: UpstreamReply) -> None:
            try:
                async for event in reply.events():
                    await queue.put((map_key, event))
            except UpstreamUnavailable as exc:
                log.info("stream of backend %s broke: %s", map_key, exc)
            # The merged stream ends with any of its parts: the client reconnects, and its
            # Last-Event-ID resumes every backend where it was.
            await queue.put(None)

        async def changes() -> None:
            while True:
                notification = await subscription.next()
                data = jsonrpc.dumps({"jsonrpc": "2.0", "method": notification})
                await queue.put(("", SseEvent(data)))

        tasks = [asyncio.ensure_future(pump(map_key, reply)) for map_key, reply in replies.items()]
        tasks.append(asyncio.ensure_future(changes()))
        translators = {map_key: self._forwarder.backend_messages(vhost, principal, map_key, via_hub=True) for map_key in replies}

        async def chunks() -> AsyncIterator[bytes]:
            last_ids = dict(resume)
            while (item := await queue.get()) is not None:
                map_key, event = item
                if map_key:
                    if not stream_event_kept(vhost, event.data):
                        continue
                    translated = translate_event(translators[map_key], event)
                    if event.id is not None:
                        last_ids[map_key] = event.id
                    if translated is None:
                        continue
                    event = SseEvent(translated.data, translated.event, stream_event_id(last_ids), translated.retry)
                yield encode_event(event)

        def close() -> None:
            subscription.close()
            for task in tasks:
                task.cancel()
            for reply in replies.values():
                reply.close()

        return Reply(200, SSE_HEADERS + (("mcp-session-id", state.id),), stream=Stream(chunks(), close))

    async def _open(
        self, state: SessionState, map_key: str, backend: BackendView, principal: Principal, last_event_id: str | None
    ) -> UpstreamReply | None:
        """The backend's stream for this session, or None if it has none (it is left out)."""
        if backend.server is not None:
            return None
        try:
            info = await self._backends.info(backend)
            if info.legacy_version is None:
                return None
            reply = await self._backend_sessions.stream(state, map_key, backend, info, principal, last_event_id)
        except (UpstreamUnavailable, BackendRefused, TimeoutError, GatewayError, HttpError) as exc:
            log.info("backend %s left out of the stream of session %s: %s", map_key, state.id, exc)
            return None
        if reply.status == 200 and reply.content_type == "text/event-stream":
            return reply
        reply.close()
        return None
