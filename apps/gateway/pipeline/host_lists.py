"""The lists of a virtual host whose names are rewritten (several backends, or aliases): every
backend's complete list, fetched concurrently and cached per backend, exposed under the host's
naming contract (`names.py`), merged (`listing.py`) and handed out in signed pages (`cursors.py`).

Caching (docs/virtual-hosts.md, "Lists"). A backend's complete list is kept until the first of:
- its lifetime ends: `cache_seconds`; for a backend that sends a `ttlMs` and that the gateway is not
  subscribed to (below), that hint, if shorter;
- the backend sends `notifications/{tools,prompts,resources}/list_changed` on any stream this
  process relays, or on the `subscriptions/listen` stream the gateway holds with every stateless-era
  backend that announces `listChanged` (`invalidate`). Like any subscribed client, the gateway may
  keep a list while subscribed; when the subscription breaks, the backend's lists are dropped;
- the backend's configuration changes (the entry is keyed by the backend's configured values, and
  by the very `ToolServer` object of an OpenAPI backend, which a new spec version replaces).
A backend that fails or is too slow is left out, logged and counted; the failure is remembered for
`retry_seconds` so a host with a dead backend still lists fast. The merged list of a host is kept
while every backend entry it was made from is still the current one."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from bisect import bisect_left
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from apps.gateway.pipeline.backend_client import BackendClient, announces_changes, offers
from apps.gateway.pipeline.change_fanin import ListChanges
from apps.gateway.pipeline.cursors import CursorCodec
from apps.gateway.pipeline.listing import (
    LIST_METHODS,
    ListCaps,
    ListTooLarge,
    MergedList,
    Page,
    PageLimits,
    collect_all_pages,
    encode_page,
    list_result,
    list_version,
    merge_lists,
    without,
)
from apps.gateway.pipeline.metrics import Counters
from apps.gateway.pipeline.values import BackendView, VirtualHostView
from apps.gateway.protocol import jsonrpc
from apps.gateway.protocol.errors import InvalidParams
from apps.kernel.identity import Principal
from apps.kernel.names import Naming
from apps.kernel.search_tool import search_tool
from apps.kernel.singleflight import SingleFlight

log = logging.getLogger(__name__)

#: `notifications/<x>/list_changed` -> the list methods it makes stale.
CHANGED_LISTS: Mapping[str, tuple[str, ...]] = {
    "notifications/tools/list_changed": ("tools/list",),
    "notifications/prompts/list_changed": ("prompts/list",),
    "notifications/resources/list_changed": ("resources/list", "resources/templates/list"),
}


#: The `subscriptions/listen` filter for every list change (2026-07-28), and each part's notification.
LIST_CHANGES = {"toolsListChanged": True, "promptsListChanged": True, "resourcesListChanged": True}
LIST_FILTERS: Mapping[str, str] = {
    "toolsListChanged": "notifications/tools/list_changed",
    "promptsListChanged": "notifications/prompts/list_changed",
    "resourcesListChanged": "notifications/resources/list_changed",
}


@dataclass(frozen=True, slots=True)
class BackendList:
    """One backend's complete list (upstream names), or why it could not be had (`failure`)."""

    items: tuple[Mapping[str, Any], ...]
    expires: float  # monotonic
    failure: str | None = None
    source: object = field(default=None, compare=False)  # the ToolServer it came from, if any


@dataclass(frozen=True, slots=True)
class _Merged:
    parts: tuple[BackendList, ...]
    merged: MergedList
    expires: float
    pages: dict[int, tuple[Any, int]] = field(default_factory=dict)  # start -> the page encoded once, its end
    views: dict[Any, _Merged] = field(default_factory=dict)  # caller -> the tools it may see


@dataclass(frozen=True, slots=True)
class VisibleTools:
    merged: MergedList
    listed: Mapping[int, int]  # backend id -> how many tools it listed (backends that answered)


@dataclass(frozen=True, slots=True)
class ListSettings:
    pages: PageLimits = PageLimits()
    timeout: float = 5.0  # per backend, and never longer than the backend's own timeout
    cache_seconds: float = 60.0
    retry_seconds: float = 5.0
    #: How much of each backend's list is taken in; a backend over it is left out.
    caps: ListCaps = ListCaps()



def _nothing(*_: object) -> None:
    """What HostLists does with a change or a listed search when it is given nowhere to tell."""

class HostLists:
    def __init__(
        self,
        client: BackendClient,
        codec: CursorCodec,
        settings: ListSettings,
        counters: Counters,
        clock: Callable[[], float] = time.monotonic,
        share: Callable[[int, str], object] | None = None,
        search_listed: Callable[[], object] | None = None,
    ) -> None:
        """`share` passes a change on to the other gateway instances (`ChangeFeed.publish`);
        `search_listed` is told whenever a list shows a host's `tool_search` (`ToolFinder.prepare`):
        a caller who lists it is about to search, and the first search should not also load the
        model. Without them (a lone HostLists under test) neither happens."""
        self._client = client
        self._codec = codec
        self._settings = settings
        self._counters = counters
        self._clock = clock
        self._lists: dict[tuple[BackendView, str], BackendList] = {}
        self._flights: SingleFlight[BackendList] = SingleFlight()
        self._merged: weakref.WeakKeyDictionary[Naming, dict[str, _Merged]] = weakref.WeakKeyDictionary()
        self.changes = ListChanges()
        self._share = share or _nothing
        self._search_listed = search_listed or _nothing
        self._watches: dict[tuple[int, tuple[str, ...]], _Watch] = {}
        self._generations: dict[int, int] = {}  # backend id -> how many changes it has announced
        self._swept = clock()

    @property
    def codec(self) -> CursorCodec:
        """What signs the cursors of the host's lists (one secret for every list it pages)."""
        return self._codec

    @property
    def pages(self) -> PageLimits:
        """How big a page of any list the host pages may be."""
        return self._settings.pages

    def invalidate(self, backend_id: int, notification: str, *, shared: bool = False) -> bool:
        """Forget what a backend's `list_changed` notification makes stale, tell every merged
        stream of a host mounting that backend, and (unless the news came from another instance,
        `shared`) the other instances; False for other methods."""
        methods = CHANGED_LISTS.get(notification)
        if methods is None:
            return False
        for key in [key for key in self._lists if key[0].id == backend_id and key[1] in methods]:
            del self._lists[key]
        # A fetch still in flight started before the change: its answer must not be kept or shared.
        self._generations[backend_id] = self._generations.get(backend_id, 0) + 1
        self.changes.publish(backend_id, notification)
        if not shared:
            self._share(backend_id, notification)
        return True

    async def result(
        self, vhost: VirtualHostView, principal: Principal, method: str, params: Mapping[str, Any], *, modern: bool
    ) -> dict[str, Any]:
        """The result of a list request on `vhost` for `principal`; raises InvalidParams for a
        refused cursor."""
        search = vhost.tool_search if method == "tools/list" else None
        if search is not None:
            self._search_listed()
        cached = await self._visible(vhost, principal, method)

        def encoded_once(start: int) -> tuple[Any, int]:
            placed = cached.pages.get(start)
            if placed is None:
                # The host's own search tool leads the first page (it is not one of the backends').
                lead = [search_tool(search.name)] if search is not None and start == 0 else []
                encoded, end = encode_page(cached.merged.items, start, self._settings.pages, lead=lead)
                placed = cached.pages[start] = (jsonrpc.encoded(encoded), end)
            return placed

        if search is not None and search.only:
            if params.get("cursor") is not None:
                raise InvalidParams("Invalid params: unknown cursor")  # one page: none was handed out
            result: dict[str, Any] = {"tools": [search_tool(search.name)]}
        else:
            result = list_result(
                cached.merged, params.get("cursor"), codec=self._codec, tenant_id=vhost.tenant_id, vhost=vhost.slug,
                pages=encoded_once,
            )
        if modern:
            ttl_ms = max(0, int((cached.expires - self._clock()) * 1000))
            # Public only when anyone may list it and it is the same for everyone.
            scope = "public" if vhost.anonymous_key_id is not None and vhost.policy is None else "private"
            result = {"resultType": "complete", **result, "ttlMs": ttl_ms, "cacheScope": scope}
        return result

    async def merged(self, vhost: VirtualHostView, method: str) -> MergedList:
        """The host's merged list, from the cache while it is current."""
        return (await self._current(vhost, method)).merged

    async def visible_tools(self, vhost: VirtualHostView, principal: Principal) -> VisibleTools:
        """The host's tools as `principal` sees them, and how many tools each backend listed."""
        view = await self._visible(vhost, principal, "tools/list")
        listed = {
            backend.id: len(part.items)
            for backend, part in zip(vhost.mounts.values(), view.parts, strict=True) if part.failure is None
        }
        return VisibleTools(view.merged, listed)

    async def tool_listed(self, vhost: VirtualHostView, principal: Principal, exposed: str, map_key: str) -> bool | None:
        """Whether `principal` sees the tool `exposed` (of the backend under `map_key`) in the host's
        list; None when that backend's list could not be had (then nobody knows)."""
        view = await self._visible(vhost, principal, "tools/list")
        identities = view.merged.identities
        at = bisect_left(identities, exposed)
        if at < len(identities) and identities[at] == exposed:
            return True
        keys = list(vhost.mounts)
        if map_key in vhost.mounts and view.parts[keys.index(map_key)].failure is not None:
            return None
        return False

    async def _visible(self, vhost: VirtualHostView, principal: Principal, method: str) -> _Merged:
        """The merged list as `principal` sees it: under a policy, the tools some call could pass
        (`policy.Policy.visible`), kept per key alongside the host's list."""
        cached = await self._current(vhost, method)
        policy = vhost.policy
        if policy is None or method != "tools/list":
            return cached
        # Everything a rule can look at: the same key with another token may see other tools.
        who = (principal.key_id, principal.team, principal.scopes, principal.issuer)
        view = cached.views.get(who)
        if view is None:
            merged, route = cached.merged, vhost.naming.route_tool
            keep = [
                i for i, identity in enumerate(merged.identities)
                if (target := route(identity)) is not None and policy.visible(principal, identity, target[1])
            ]
            identities = tuple(merged.identities[i] for i in keep)
            shown = MergedList(
                merged.kind, tuple(merged.items[i] for i in keep), identities,
                tuple(merged.origins[i] for i in keep), list_version(identities),
            )
            view = cached.views[who] = _Merged(cached.parts, shown, cached.expires)
        return view

    async def _current(self, vhost: VirtualHostView, method: str) -> _Merged:
        now = self._clock()
        if now - self._swept > 60.0:
            self._swept = now
            self._sweep_watches(now)
        per_host = self._merged.get(vhost.naming)
        cached = per_host.get(method) if per_host is not None else None
        if cached is not None and cached.expires > now and all(
            self._lists.get((backend, method)) is part
            for backend, part in zip(vhost.mounts.values(), cached.parts, strict=True)
        ):
            self._counters.increment("cache", cache="merged_list", result="hit")
            return cached
        self._counters.increment("cache", cache="merged_list", result="miss")
        parts = await asyncio.gather(*(self._backend_list(backend, method) for backend in vhost.mounts.values()))
        kind = LIST_METHODS[method]
        naming = vhost.naming
        per_backend: dict[str, list[Any]] = {}
        # Said once per configuration (a new one brings a new `Naming`), not on every refresh.
        level = logging.WARNING if cached is None else logging.DEBUG
        for map_key, part in zip(vhost.mounts, parts, strict=True):
            shown, dropped = _expose(naming, kind, map_key, part.items)
            per_backend[map_key] = shown
            for item in dropped:
                log.log(level, "%s of %s/%s: %s %r left out: %s", method, vhost.tenant_slug, vhost.slug,
                        item.kind, item.name, item.reason)
        merged = merge_lists(kind, per_backend)
        for duplicate in merged.dropped:
            log.log(level, "%s of %s/%s: from %s: %s", method, vhost.tenant_slug, vhost.slug, duplicate.map_key,
                    duplicate.reason)
        search = vhost.tool_search if method == "tools/list" else None
        if search is not None and (shown := without(merged, search.name)) is not merged:
            # One name, one tool: the host's own `tool_search` answers calls of that name, so a
            # backend's tool of the same name could never be called; it is not listed either.
            log.log(level, "tools/list of %s/%s: the tool %r of backend %s is hidden by the host's own %r", vhost.tenant_slug,
                    vhost.slug, search.name, merged.origins[merged.identities.index(search.name)], search.name)
            merged = shown
        expires = min((part.expires for part in parts), default=now + self._settings.cache_seconds)
        current = self._merged.setdefault(naming, {})[method] = _Merged(tuple(parts), merged, expires)
        return current

    async def _backend_list(self, backend: BackendView, method: str) -> BackendList:
        cached = self._lists.get((backend, method))
        if cached is not None and cached.expires > self._clock() and cached.source is backend.server:
            self._counters.increment("cache", cache="backend_list", result="hit")
            return cached
        self._counters.increment("cache", cache="backend_list", result="miss")
        generation = self._generations.get(backend.id, 0)
        return await self._flights.run((backend, method, generation), lambda: self._fetch(backend, method, generation))

    async def _fetch(self, backend: BackendView, method: str, generation: int) -> BackendList:
        kind = LIST_METHODS[method]
        timeout = min(self._settings.timeout, backend.timeout)
        started = self._clock()
        try:
            async with asyncio.timeout(timeout):
                items, ttl_ms = await self._fetch_items(backend, method, kind)
        except Exception as exc:  # noqa: BLE001 - any failure of one backend only leaves it out
            reason = f"no answer within {timeout:g} s" if isinstance(exc, TimeoutError) else (
                f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
            log.warning("%s: backend %s left out: %s", method, backend.name, reason)
            cause = "timeout" if isinstance(exc, TimeoutError) else "too_large" if isinstance(exc, ListTooLarge) else "error"
            self._counters.increment("list_backend_omitted", method=method, backend=backend.name, reason=cause)
            entry = BackendList((), started + self._settings.retry_seconds, reason, backend.server)
        else:
            lifetime = self._settings.cache_seconds if ttl_ms is None else min(self._settings.cache_seconds, ttl_ms / 1000)
            entry = BackendList(tuple(items), started + lifetime, None, backend.server)
        if self._generations.get(backend.id, 0) != generation:
            return replace(entry, expires=started)  # answers its callers, but is not kept
        self._lists[(backend, method)] = entry
        return entry

    async def _fetch_items(self, backend: BackendView, method: str, kind: str) -> tuple[list[Any], int | None]:
        if backend.server is not None:
            return (jsonrpc.loads(backend.server.tools_json()) if method == "tools/list" else []), None
        info = await self._client.info(backend)
        if not offers(info, method):
            return [], None
        watched = announces_changes(info) and await self._watch(backend)
        ttl_ms: int | None = None

        async def fetch_page(cursor: str | None, allowance: int | None) -> Page:
            nonlocal ttl_ms
            result, size = await self._client.sized_request(
                backend, method, {"cursor": cursor} if cursor else {}, max_bytes=allowance
            )
            hint = result.get("ttlMs")
            if isinstance(hint, int) and not isinstance(hint, bool) and hint >= 0:
                ttl_ms = hint if ttl_ms is None else min(ttl_ms, hint)
            return result, size

        return await collect_all_pages(fetch_page, kind, self._settings.caps), (None if watched else ttl_ms)

    async def _watch(self, backend: BackendView) -> bool:
        """Whether the gateway holds an acknowledged subscription to the backend's list changes;
        starts one (and waits for its acknowledgement, up to the list timeout) if none runs."""
        key = (backend.id, backend.urls)
        watch = self._watches.get(key)
        if watch is None or watch.task.done():
            watch = self._watches[key] = _Watch(self, backend)
        watch.used = self._clock()
        return await watch.acknowledged(self._settings.timeout)

    def _sweep_watches(self, now: float) -> None:
        """Stop subscriptions to backends no host has listed for a long time (configuration moved on),
        and forget expired lists (a backend renamed, moved or deleted leaves its entries behind)."""
        for key in [key for key, entry in self._lists.items() if entry.expires <= now]:
            del self._lists[key]
        idle = max(self._settings.cache_seconds, 60.0) * 10
        for key, watch in list(self._watches.items()):
            if now - watch.used > idle:
                watch.task.cancel()
                del self._watches[key]


class _Watch:
    """The gateway's `subscriptions/listen` stream with one backend, re-opened while it is used."""

    def __init__(self, lists: HostLists, backend: BackendView) -> None:
        self._lists = lists
        self._backend = backend
        self._live = asyncio.Event()  # acknowledged and not broken since
        self._settled = asyncio.Event()  # the current attempt was acknowledged or failed
        self.used = lists._clock()
        self.task = asyncio.ensure_future(self._run())

    async def acknowledged(self, timeout: float) -> bool:
        """Whether the subscription is up. A backend slow to acknowledge is waited for briefly,
        once: after that its lists are fetched as if unwatched until the acknowledgement comes."""
        if not self._settled.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(timeout / 2, 1.0)):
                    await self._settled.wait()
            self._settled.set()
        return self._live.is_set()

    def _acknowledge(self, _honoured: object) -> None:
        self._live.set()
        self._settled.set()

    def _changed(self, message: dict[str, Any]) -> None:
        self._lists.invalidate(self._backend.id, message["method"])

    async def _run(self) -> None:
        backend = self._backend
        failures = 0  # attempts in a row that were never acknowledged
        while True:
            try:
                await self._lists._client.listen(
                    backend, LIST_CHANGES, on_acknowledged=self._acknowledge, on_message=self._changed
                )
                reason = "the stream ended"
            except Exception as exc:  # noqa: BLE001 - whatever broke it, drop the lists and try again
                reason = f"{type(exc).__name__}: {exc}"
            self._settled.set()
            if self._live.is_set():
                log.info("list subscription to backend %s lost (%s); its lists are dropped", backend.name, reason)
                self._live.clear()
                failures = 0
                for notification in CHANGED_LISTS:  # changes may have been missed meanwhile
                    self._lists.invalidate(backend.id, notification)
            else:
                failures += 1
            await asyncio.sleep(listen_retry_delay(self._lists._settings.retry_seconds, failures))


def listen_retry_delay(base: float, failures: int) -> float:
    """Seconds before subscribing again: `base` after a subscription that worked, doubling with each
    attempt in a row that was never acknowledged (a backend that announces `listChanged` but refuses
    to listen), up to five minutes."""
    return min(base * 2 ** max(failures - 1, 0), 300.0)


def _expose(naming: Naming, kind: str, map_key: str, items: tuple[Mapping[str, Any], ...]) -> tuple[list[Any], list[Any]]:
    if kind == "tools":
        return naming.expose_tools(map_key, items)
    if kind == "prompts":
        return naming.expose_prompts(map_key, items)
    if kind == "resources":
        return naming.expose_resources(map_key, items)
    return naming.expose_resource_templates(map_key, items)
