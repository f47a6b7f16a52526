"""`subscriptions/listen` (2026-07-28) on a virtual host whose names are rewritten: one stream for the
client, made of
- list changes (`toolsListChanged`, `promptsListChanged`, `resourcesListChanged`) of every backend
  of the host, as this process learns them (`change_fanin.ListChanges`: the gateway's own
  subscriptions to stateless backends, and `list_changed` seen on any stream it relays);
- resource updates (`resourceSubscriptions`, exposed URIs): each URI is routed to its backend, and
  every stateless-era backend that offers `resources.subscribe` gets one upstream listen for its URIs;
  updates come back with the URI the client subscribed to;
- task status (`taskIds`, the tasks extension's filter, ids as the host showed them to this caller):
  each id is routed to the backend that runs the task, which gets its own id in the same upstream
  listen; `notifications/tasks` come back as the host shows them (`compose.BackendMessages`).

The acknowledgement names what is honoured: the list filters always; a resource URI or a task id only
when its backend acknowledged it (URIs of handshake-era backends are not honoured: those take
`resources/subscribe` in a session). Every message carries the client's subscription id."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from apps.gateway.pipeline.backend_client import BackendClient
from apps.gateway.pipeline.backends import BackendCatalog, BackendRefused
from apps.gateway.pipeline.compose import BackendMessages
from apps.gateway.pipeline.host_lists import LIST_FILTERS, HostLists
from apps.gateway.pipeline.ports import UpstreamUnavailable
from apps.gateway.pipeline.replies import SSE_HEADERS, Reply, Stream
from apps.gateway.pipeline.task_ids import TASKS_EXTENSION, offers_tasks
from apps.gateway.pipeline.values import BackendView, VirtualHostView
from apps.gateway.protocol import jsonrpc
from apps.gateway.protocol.errors import InvalidParams
from apps.gateway.protocol.jsonrpc import Message
from apps.gateway.protocol.sse import SseEvent, encode_event
from apps.kernel.identity import Principal

log = logging.getLogger(__name__)

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
_FLAG_OF = {notification: flag for flag, notification in LIST_FILTERS.items()}
_END: dict[str, Any] = {}  # queued when the stream must end
#: Most tasks one listen stream may follow (each id is checked and routed when the stream opens).
MAX_TASK_IDS = 1000


@dataclass(slots=True)
class _Wanted:
    """What one backend's upstream listen asks for: (exposed, upstream) resource URIs and task ids."""

    uris: list[tuple[str, str]] = field(default_factory=list)
    tasks: list[tuple[str, str]] = field(default_factory=list)


class ComposedListen:
    def __init__(
        self,
        client: BackendClient,
        lists: HostLists,
        backends: BackendCatalog,
        *,
        timeout: float,
        task_of: Callable[[VirtualHostView, Principal, object], tuple[str, str] | None],
        messages: Callable[[VirtualHostView, Principal, str], BackendMessages],
    ) -> None:
        """`task_of` routes a task id the host showed a caller; `messages` shows what a backend
        sends as the host shows it to a caller (both `forwarder.Forwarder`'s)."""
        self._client = client
        self._lists = lists
        self._backends = backends
        self._timeout = timeout
        self._task_of = task_of
        self._messages = messages

    async def handle(self, vhost: VirtualHostView, principal: Principal, message: Message) -> Reply:
        """The listen stream; raises InvalidParams for a malformed filter."""
        wanted = message.params.get("notifications")
        if not isinstance(wanted, dict):
            raise InvalidParams("Invalid params: subscriptions/listen needs 'notifications' (an object)")
        uris = wanted.get("resourceSubscriptions") or []
        if not isinstance(uris, list) or not all(isinstance(uri, str) for uri in uris):
            raise InvalidParams("Invalid params: 'resourceSubscriptions' must be a list of URIs")
        task_ids = wanted.get("taskIds")
        if task_ids is not None and (not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids)):
            raise InvalidParams("Invalid params: 'taskIds' must be a list of task ids")
        if task_ids is not None and len(task_ids) > MAX_TASK_IDS:
            raise InvalidParams(f"Invalid params: 'taskIds' names {len(task_ids)} tasks; one stream follows at most "
                                f"{MAX_TASK_IDS}", data={"max": MAX_TASK_IDS})
        task_ids = list(dict.fromkeys(task_ids)) if task_ids is not None else None
        flags = {flag for flag in LIST_FILTERS if wanted.get(flag) is True}
        per_backend = await self._route(vhost, principal, uris, task_ids or [])
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        honoured_uris: list[str] = []
        honoured_tasks: set[str] = set()
        acknowledged = {map_key: asyncio.Event() for map_key in per_backend}
        tasks = [
            asyncio.ensure_future(self._upstream(vhost, principal, map_key, backend_wants, queue,
                                                 honoured_uris, honoured_tasks, acknowledged[map_key]))
            for map_key, backend_wants in per_backend.items()
        ]
        changes = self._lists.changes.subscribe(frozenset(b.id for b in vhost.mounts.values())) if flags else None
        if changes is not None:
            tasks.append(asyncio.ensure_future(_changes(changes, flags, queue)))
        meta = {SUBSCRIPTION_ID: message.id}

        async def chunks() -> AsyncIterator[bytes]:
            if acknowledged:
                await asyncio.wait([asyncio.ensure_future(event.wait()) for event in acknowledged.values()],
                                   timeout=self._timeout)
            honoured: dict[str, Any] = {flag: True for flag in sorted(flags)}
            if honoured_uris:
                honoured["resourceSubscriptions"] = [uri for uri in uris if uri in honoured_uris]
            if task_ids is not None:
                honoured["taskIds"] = [task_id for task_id in task_ids if task_id in honoured_tasks]
            yield _event({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                          "params": {"notifications": honoured, "_meta": meta}})
            while (notification := await queue.get()) is not _END:
                params = dict(notification.get("params") or {})
                params["_meta"] = {**(params.get("_meta") or {}), **meta}
                yield _event({"jsonrpc": "2.0", "method": notification["method"], "params": params})

        def close() -> None:
            if changes is not None:
                changes.close()
            for task in tasks:
                task.cancel()

        return Reply(200, SSE_HEADERS, stream=Stream(chunks(), close))

    async def _route(
        self, vhost: VirtualHostView, principal: Principal, uris: list[str], task_ids: list[str],
    ) -> dict[str, _Wanted]:
        """What each backend that takes them here is asked for: resource URIs and task ids."""
        per_backend: dict[str, _Wanted] = {}
        for uri in uris:
            target = vhost.naming.route_uri(uri)
            backend = vhost.mounts.get(target[0]) if target else None
            if target is None or backend is None or not await self._offers(backend, _subscribes):
                continue
            per_backend.setdefault(target[0], _Wanted()).uris.append((uri, target[1]))
        single = vhost.naming.single_key  # one backend's task ids pass through as they are
        for task_id in task_ids:
            task = (single, task_id) if single is not None else self._task_of(vhost, principal, task_id)
            if task is None or not await self._offers(vhost.mounts[task[0]], offers_tasks):
                continue
            per_backend.setdefault(task[0], _Wanted()).tasks.append((task_id, task[1]))
        return per_backend

    async def _offers(self, backend: BackendView, what: Callable[[dict[str, Any]], bool]) -> bool:
        """Whether a stateless-era backend's capabilities offer `what`."""
        if backend.server is not None:
            return False
        try:
            info = await self._backends.info(backend)
        except (UpstreamUnavailable, BackendRefused, TimeoutError):
            return False
        return bool(info.modern_versions) and what(dict(info.modern_capabilities))

    async def _upstream(
        self,
        vhost: VirtualHostView,
        principal: Principal,
        map_key: str,
        wanted: _Wanted,
        queue: asyncio.Queue[dict[str, Any]],
        honoured_uris: list[str],
        honoured_tasks: set[str],
        acknowledged: asyncio.Event,
    ) -> None:
        uri_of = {upstream: exposed for exposed, upstream in wanted.uris}
        task_of = {upstream: exposed for exposed, upstream in wanted.tasks}
        naming = vhost.naming
        shown_as = self._messages(vhost, principal, map_key)

        def on_acknowledged(params: dict[str, Any]) -> None:
            accepted = params.get("notifications") or {}
            honoured_uris.extend(uri_of[uri] for uri in accepted.get("resourceSubscriptions") or [] if uri in uri_of)
            honoured_tasks.update(task_of[task] for task in accepted.get("taskIds") or []
                                  if isinstance(task, str) and task in task_of)
            acknowledged.set()

        def on_message(message: dict[str, Any]) -> None:
            method = message.get("method")
            params = message.get("params")
            if not isinstance(params, dict) or not isinstance(method, str):
                return
            if method == "notifications/resources/updated":
                shown = naming.expose_notification(map_key, method, params)
                if shown is not None:
                    queue.put_nowait({"method": method, "params": dict(shown)})
            elif method == "notifications/tasks" and isinstance(params.get("taskId"), str) and params["taskId"] in task_of:
                shown_message = shown_as(message)
                if shown_message is not None:
                    queue.put_nowait(shown_message)

        notifications: dict[str, Any] = {}
        if wanted.uris:
            notifications["resourceSubscriptions"] = [upstream for _, upstream in wanted.uris]
        if wanted.tasks:
            notifications["taskIds"] = [upstream for _, upstream in wanted.tasks]
        # The tasks extension's filter is for clients that declare it.
        capabilities = {"extensions": {TASKS_EXTENSION: {}}} if wanted.tasks else {}
        try:
            await self._client.listen(
                vhost.mounts[map_key], notifications, principal=principal, capabilities=capabilities,
                on_acknowledged=on_acknowledged, on_message=on_message,
            )
        except Exception as exc:  # noqa: BLE001 - one backend's listen failing leaves the others running
            log.info("resource subscriptions on backend %s ended: %s", map_key, exc)
        finally:
            if acknowledged.is_set():
                # Subscriptions this stream acknowledged are gone: end it, so the client listens again.
                queue.put_nowait(_END)
            acknowledged.set()


async def _changes(changes: Any, flags: set[str], queue: asyncio.Queue[dict[str, Any]]) -> None:
    while True:
        notification = await changes.next()
        if _FLAG_OF.get(notification) in flags:
            queue.put_nowait({"method": notification, "params": {}})


def _subscribes(capabilities: dict[str, Any]) -> bool:
    resources = capabilities.get("resources")
    return isinstance(resources, dict) and resources.get("subscribe") is True


def _event(message: dict[str, Any]) -> bytes:
    return encode_event(SseEvent(jsonrpc.dumps(message)))
