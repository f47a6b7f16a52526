"""`subscriptions/listen` (2026-07-28) on a virtual host whose names are rewritten: one stream for the
client, made of
- list changes (`toolsListChanged`, `promptsListChanged`, `resourcesListChanged`) of every backend
  of the host, as this process learns them (`change_fanin.ListChanges`: the gateway's own
  subscriptions to stateless backends, and `list_changed` seen on any stream it relays);
- resource updates (`resourceSubscriptions`, exposed URIs): each URI is routed to its backend, and
  every stateless-era backend that offers `resources.subscribe` gets one upstream listen for its URIs;
  updates come back with the URI the client subscribed to.

The acknowledgement names what is honoured: the list filters always; a resource URI only when its
backend acknowledged it (URIs of handshake-era backends are not honoured: those take
`resources/subscribe` in a session). Every message carries the client's subscription id."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from apps.gateway.pipeline.backend_client import BackendClient
from apps.gateway.pipeline.backends import BackendCatalog, BackendRefused
from apps.gateway.pipeline.host_lists import LIST_FILTERS, HostLists
from apps.gateway.pipeline.ports import UpstreamUnavailable
from apps.gateway.pipeline.replies import SSE_HEADERS, Reply, Stream
from apps.gateway.pipeline.values import BackendView, VirtualHostView
from apps.gateway.protocol import jsonrpc
from apps.gateway.protocol.errors import InvalidParams
from apps.gateway.protocol.jsonrpc import Message
from apps.gateway.protocol.sse import SseEvent, encode_event

log = logging.getLogger(__name__)

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
_FLAG_OF = {notification: flag for flag, notification in LIST_FILTERS.items()}
_END: dict[str, Any] = {}  # queued when the stream must end


class ComposedListen:
    def __init__(self, client: BackendClient, lists: HostLists, backends: BackendCatalog, *, timeout: float) -> None:
        self._client = client
        self._lists = lists
        self._backends = backends
        self._timeout = timeout

    async def handle(self, vhost: VirtualHostView, message: Message) -> Reply:
        """The listen stream; raises InvalidParams for a malformed filter."""
        wanted = message.params.get("notifications")
        if not isinstance(wanted, dict):
            raise InvalidParams("Invalid params: subscriptions/listen needs 'notifications' (an object)")
        uris = wanted.get("resourceSubscriptions") or []
        if not isinstance(uris, list) or not all(isinstance(uri, str) for uri in uris):
            raise InvalidParams("Invalid params: 'resourceSubscriptions' must be a list of URIs")
        flags = {flag for flag in LIST_FILTERS if wanted.get(flag) is True}
        per_backend = await self._route(vhost, uris)
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        honoured_uris: list[str] = []
        acknowledged = {map_key: asyncio.Event() for map_key in per_backend}
        tasks = [
            asyncio.ensure_future(self._upstream(vhost, map_key, pairs, queue, honoured_uris, acknowledged[map_key]))
            for map_key, pairs in per_backend.items()
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

    async def _route(self, vhost: VirtualHostView, uris: list[str]) -> dict[str, list[tuple[str, str]]]:
        """Map key -> (exposed, upstream) URIs, for backends that take resource subscriptions here."""
        per_backend: dict[str, list[tuple[str, str]]] = {}
        for uri in uris:
            target = vhost.naming.route_uri(uri)
            backend = vhost.mounts.get(target[0]) if target else None
            if target is None or backend is None or not await self._subscribable(backend):
                continue
            per_backend.setdefault(target[0], []).append((uri, target[1]))
        return per_backend

    async def _subscribable(self, backend: BackendView) -> bool:
        if backend.server is not None:
            return False
        try:
            info = await self._backends.info(backend)
        except (UpstreamUnavailable, BackendRefused, TimeoutError):
            return False
        resources = info.modern_capabilities.get("resources")
        return bool(info.modern_versions) and isinstance(resources, dict) and resources.get("subscribe") is True

    async def _upstream(
        self,
        vhost: VirtualHostView,
        map_key: str,
        pairs: list[tuple[str, str]],
        queue: asyncio.Queue[dict[str, Any]],
        honoured: list[str],
        acknowledged: asyncio.Event,
    ) -> None:
        exposed_of = {upstream: exposed for exposed, upstream in pairs}
        naming = vhost.naming

        def on_acknowledged(params: dict[str, Any]) -> None:
            accepted = (params.get("notifications") or {}).get("resourceSubscriptions") or []
            honoured.extend(exposed_of[uri] for uri in accepted if uri in exposed_of)
            acknowledged.set()

        def on_message(message: dict[str, Any]) -> None:
            method = message.get("method")
            params = message.get("params")
            if not isinstance(params, dict) or not isinstance(method, str):
                return
            shown = naming.expose_notification(map_key, method, params)
            if shown is not None and method == "notifications/resources/updated":
                queue.put_nowait({"method": method, "params": dict(shown)})

        try:
            await self._client.listen(
                vhost.mounts[map_key], {"resourceSubscriptions": [upstream for _, upstream in pairs]},
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


def _event(message: dict[str, Any]) -> bytes:
    return encode_event(SseEvent(jsonrpc.dumps(message)))
