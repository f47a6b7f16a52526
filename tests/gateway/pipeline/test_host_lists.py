"""`HostLists`: the merged, cached, paged lists of a multi-backend virtual host, with a fake backend
client (what each backend lists, how it answers) and a hand-driven clock."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import pytest

from apps.gateway.pipeline.cursors import CursorCodec
from apps.gateway.pipeline.host_lists import HostLists, ListSettings
from apps.gateway.pipeline.listing import ListCaps, PageLimits
from apps.gateway.pipeline.metrics import Counters
from apps.gateway.pipeline.ports import ResponseTooLarge
from apps.gateway.pipeline.values import BackendInfo, BackendView, ToolSearchConfig, VirtualHostView
from apps.gateway.protocol.errors import InvalidParams
from tests.gateway.pipeline.test_gateway import PRINCIPAL
from tests.gateway.pipeline.test_local import FakeTools

LEGACY = BackendInfo("2025-11-25", {"tools": {}, "prompts": {}}, (), {}, {}, None)
MODERN = BackendInfo(None, {}, ("2026-07-28",), {"tools": {"listChanged": True}}, {}, None)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeClient:
    """Backends by id: what they list (in pages of `page_size`), and how they misbehave."""

    def __init__(self) -> None:
        self.tools: dict[int, list[str]] = {}
        self.infos: dict[int, BackendInfo] = {}
        self.failing: set[int] = set()
        self.delay: dict[int, float] = {}
        self.ttl_ms: dict[int, int] = {}
        self.page_size = 2
        self.requests: list[tuple[int, str, Any]] = []
        self.listening: dict[int, Callable[[str], object]] = {}
        self.refuse_listen = False

    async def info(self, backend: BackendView, principal: object = None) -> BackendInfo:
        return self.infos.get(backend.id, LEGACY)

    async def request(self, backend: BackendView, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.requests.append((backend.id, method, params.get("cursor")))
        await asyncio.sleep(self.delay.get(backend.id, 0))
        if backend.id in self.failing:
            raise ConnectionError("refused")
        names = self.tools.get(backend.id, []) if method == "tools/list" else []
        start = int(params.get("cursor") or 0)
        page = names[start : start + self.page_size]
        result: dict[str, Any] = {method.split("/")[0]: [{"name": n, "inputSchema": {"type": "object"}} for n in page]}
        if start + self.page_size < len(names):
            result["nextCursor"] = str(start + self.page_size)
        if backend.id in self.ttl_ms:
            result["ttlMs"] = self.ttl_ms[backend.id]
        return result

    async def sized_request(
        self, backend: BackendView, method: str, params: dict[str, Any], *, max_bytes: int | None = None
    ) -> tuple[dict[str, Any], int]:
        result = await self.request(backend, method, params)
        size = len(json.dumps(result))
        if max_bytes is not None and size > max_bytes:
            raise ResponseTooLarge(f"response over {max_bytes} bytes", max_bytes)
        return result, size

    async def listen(self, backend: BackendView, notifications: dict[str, Any], *,
                     on_acknowledged: Callable[[dict[str, Any]], object],
                     on_message: Callable[[dict[str, Any]], object]) -> None:
        if self.refuse_listen:
            raise ConnectionError("no listen")
        self.listening[backend.id] = lambda method: on_message({"jsonrpc": "2.0", "method": method})
        on_acknowledged({"notifications": notifications})
        await asyncio.Event().wait()  # held until cancelled


def backend(backend_id: int, server: Any = None) -> BackendView:
    return BackendView(backend_id, f"b{backend_id}", "streamable-http", (f"http://b{backend_id}",), 10.0,
                       kind="openapi" if server else "mcp", server=server)


def host(mounts: Mapping[str, BackendView], anonymous: bool = False) -> VirtualHostView:
    return VirtualHostView(1, "acme", "main", MappingProxyType(dict(mounts)), MappingProxyType({}),
                           anonymous_key_id=7 if anonymous else None)


def make(
    client: FakeClient, clock: Clock, *, search_listed: Callable[[], object] | None = None, **settings: Any
) -> tuple[HostLists, Counters]:
    counters = Counters()
    options = {"pages": PageLimits(items=3), "timeout": 0.2, "cache_seconds": 60.0, "retry_seconds": 5.0, **settings}
    lists = HostLists(client, CursorCodec(b"s" * 32), ListSettings(**options), counters, clock=clock,  # type: ignore[arg-type]
                      search_listed=search_listed)
    return lists, counters


async def names(lists: HostLists, vhost: VirtualHostView, *, modern: bool = False) -> list[str]:
    found, cursor = [], None
    while True:
        result = await lists.result(vhost, PRINCIPAL, "tools/list", {"cursor": cursor} if cursor else {}, modern=modern)
        found += [tool["name"] for tool in _items(result["tools"])]
        cursor = result.get("nextCursor")
        if cursor is None:
            return found


def _items(placed: Any) -> list[dict[str, Any]]:
    import orjson

    return orjson.loads(orjson.dumps(placed))


async def test_lists_of_every_backend_are_merged_paged_and_cached() -> None:
    client, clock = FakeClient(), Clock()
    client.tools = {1: ["zeta", "alpha", "mid"], 2: ["beta"]}
    lists, _ = make(client, clock)
    vhost = host({"one": backend(1), "two": backend(2)})
    assert await names(lists, vhost) == ["one-alpha", "one-mid", "one-zeta", "two-beta"]
    fetched = len(client.requests)
    assert fetched == 3  # backend 1 in two upstream pages, backend 2 in one
    assert await names(lists, vhost) == ["one-alpha", "one-mid", "one-zeta", "two-beta"]
    assert len(client.requests) == fetched  # served from the cache
    clock.now += 61
    await names(lists, vhost)
    assert len(client.requests) == fetched * 2  # expired: asked again


async def test_merged_pages_are_cut_to_the_byte_limit_and_read_whole() -> None:
    client, clock = FakeClient(), Clock()
    client.page_size = 1000
    client.tools = {1: [f"tool{i:03d}" for i in range(300)], 2: [f"op{i:03d}" for i in range(300)]}
    lists, _ = make(client, clock, pages=PageLimits(items=1000, bytes=8000))
    vhost = host({"one": backend(1), "two": backend(2)})
    found, cursor, pages = [], None, 0
    while True:
        result = await lists.result(vhost, PRINCIPAL, "tools/list", {"cursor": cursor} if cursor else {}, modern=True)
        response = json.dumps({"jsonrpc": "2.0", "id": 1, "result": _items(result)})
        assert len(response) <= 8000
        found += [tool["name"] for tool in _items(result["tools"])]
        pages += 1
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert found == sorted(f"one-tool{i:03d}" for i in range(300)) + sorted(f"two-op{i:03d}" for i in range(300))
    assert pages >= 600 * 45 // 8000


async def test_a_failing_or_slow_backend_is_left_out_counted_and_retried_later() -> None:
    client, clock = FakeClient(), Clock()
    client.tools = {1: ["a"], 2: ["b"], 3: ["c"]}
    client.failing = {2}
    client.delay = {3: 5.0}
    lists, counters = make(client, clock)
    vhost = host({"one": backend(1), "two": backend(2), "three": backend(3)})
    assert await names(lists, vhost) == ["one-a"]
    assert counters.value("list_backend_omitted", backend="b2") == 1
    assert counters.value("list_backend_omitted", backend="b3") == 1
    asked = len(client.requests)
    await names(lists, vhost)
    assert len(client.requests) == asked  # the failures are remembered for a while
    client.failing, client.delay = set(), {}
    clock.now += 6
    assert await names(lists, vhost) == ["one-a", "three-c", "two-b"]


@pytest.mark.parametrize("caps", [ListCaps(max_items=4), ListCaps(max_bytes=400)])
async def test_a_backend_over_a_list_cap_is_left_out_with_the_reason(caps: ListCaps, caplog: Any) -> None:
    client, clock = FakeClient(), Clock()
    client.tools = {1: [f"t{i}" for i in range(9)], 2: ["b"]}
    lists, counters = make(client, clock, caps=caps)
    vhost = host({"one": backend(1), "two": backend(2)})
    assert await names(lists, vhost) == ["two-b"]
    assert counters.value("list_backend_omitted", backend="b1", reason="too_large") == 1
    assert "backend b1 left out: ListTooLarge: the tools list" in caplog.text
    assert len([r for r in client.requests if r[0] == 1]) < 5  # reading stopped at the cap, not at the end
    assert await lists.tool_listed(vhost, PRINCIPAL, "one-t0", "one") is None  # its list could not be had


async def test_a_backend_tool_named_like_the_hosts_tool_search_is_hidden() -> None:
    client, clock = FakeClient(), Clock()
    client.tools = {1: ["alpha", "tool_search", "zeta"]}
    lists, _ = make(client, clock)
    vhost = replace(host({"one": backend(1)}), tool_search=ToolSearchConfig())
    result = _items((await lists.result(vhost, PRINCIPAL, "tools/list", {}, modern=False))["tools"])
    assert [tool["name"] for tool in result] == ["tool_search", "alpha", "zeta"]
    assert result[0]["title"] == "Find tools"  # the gateway's own, the one a call of that name reaches
    assert await lists.tool_listed(vhost, PRINCIPAL, "alpha", "one") is True


async def test_list_changed_invalidates_one_backend_and_reaches_subscribers() -> None:
    client, clock = FakeClient(), Clock()
    client.tools = {1: ["a"], 2: ["b"]}
    lists, _ = make(client, clock)
    vhost = host({"one": backend(1), "two": backend(2)})
    await names(lists, vhost)
    subscription = lists.changes.subscribe(frozenset({1}))
    other = lists.changes.subscribe(frozenset({3}))
    client.tools[1] = ["a", "new"]
    assert lists.invalidate(1, "notifications/tools/list_changed") is True
    assert lists.invalidate(1, "notifications/tools/list_changed") is True  # coalesced for the subscriber
    assert lists.invalidate(1, "notifications/message") is False
    assert await names(lists, vhost) == ["one-a", "one-new", "two-b"]
    assert [r for r in client.requests if r[0] == 2] == [(2, "tools/list", None)]  # backend 2 kept its list
    assert await asyncio.wait_for(subscription.next(), 1) == "notifications/tools/list_changed"
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(subscription.next(), 0.05)  # the second one was coalesced
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(other.next(), 0.05)
    subscription.close()
    other.close()


async def test_a_backend_ttl_hint_shortens_the_cache_unless_the_gateway_is_subscribed() -> None:
    client, clock = FakeClient(), Clock()
    client.tools = {1: ["a"], 2: ["b"]}
    client.ttl_ms = {1: 0, 2: 0}
    client.infos = {2: MODERN}  # announces listChanged: the gateway subscribes
    lists, _ = make(client, clock)
    vhost = host({"one": backend(1), "two": backend(2)})
    await names(lists, vhost)
    await names(lists, vhost)
    assert [r[0] for r in client.requests].count(1) == 2  # ttlMs 0 and no subscription: asked every time
    assert [r[0] for r in client.requests].count(2) == 1  # subscribed: kept
    client.tools[2] = ["b", "c"]
    client.listening[2]("notifications/tools/list_changed")
    assert await names(lists, vhost) == ["one-a", "two-b", "two-c"]


async def test_a_broken_subscription_drops_the_lists_and_falls_back_to_the_hint() -> None:
    client, clock = FakeClient(), Clock()
    client.tools = {1: ["a"]}
    client.ttl_ms = {1: 0}
    client.infos = {1: MODERN}
    client.refuse_listen = True
    lists, _ = make(client, clock)
    vhost = host({"one": backend(1), "two": backend(2)})
    await names(lists, vhost)
    await names(lists, vhost)
    assert [r[0] for r in client.requests].count(1) == 2  # no subscription: the hint rules


async def test_cursors_bind_to_the_list_and_pages_carry_caching_hints() -> None:
    client, clock = FakeClient(), Clock()
    client.tools = {1: ["a", "b", "c", "d"], 2: ["e"]}
    lists, _ = make(client, clock)
    vhost = host({"one": backend(1), "two": backend(2)})
    first = await lists.result(vhost, PRINCIPAL, "tools/list", {}, modern=True)
    assert (first["ttlMs"], first["cacheScope"], first["resultType"]) == (60000, "private", "complete")
    public = await lists.result(host({"one": backend(1), "two": backend(2)}, anonymous=True), PRINCIPAL,
                                "tools/list", {}, modern=True)
    assert public["cacheScope"] == "public"
    with pytest.raises(InvalidParams):
        await lists.result(vhost, PRINCIPAL, "prompts/list", {"cursor": first["nextCursor"]}, modern=False)
    client.tools[1] = ["a", "b", "x", "c", "d"]
    lists.invalidate(1, "notifications/tools/list_changed")
    with pytest.raises(InvalidParams) as stale:
        await lists.result(vhost, PRINCIPAL, "tools/list", {"cursor": first["nextCursor"]}, modern=False)
    assert stale.value.data == {"cursor": "stale"}


async def test_a_new_spec_version_of_an_openapi_backend_is_listed_at_once() -> None:
    client, clock = FakeClient(), Clock()
    client.tools = {2: ["b"]}
    lists, _ = make(client, clock)
    assert await names(lists, host({"api": backend(1, FakeTools()), "two": backend(2)})) == ["api-add", "two-b"]
    newer = FakeTools()
    newer.tools_json = lambda: b'[{"name":"sub","inputSchema":{"type":"object"}}]'  # type: ignore[method-assign]
    assert await names(lists, host({"api": backend(1, newer), "two": backend(2)})) == ["api-sub", "two-b"]


async def test_a_list_fetched_across_a_change_is_not_kept() -> None:
    client, clock = FakeClient(), Clock()
    client.tools = {1: ["old"], 2: ["b"]}
    client.delay = {1: 0.05}
    lists, _ = make(client, clock)
    vhost = host({"one": backend(1), "two": backend(2)})
    first = asyncio.ensure_future(names(lists, vhost))
    await asyncio.sleep(0.01)  # backend 1's fetch is in flight
    client.tools[1] = ["new"]
    lists.invalidate(1, "notifications/tools/list_changed")
    await first
    assert await names(lists, vhost) == ["one-new", "two-b"]  # asked again: the answer in flight was stale


async def test_policy_views_follow_everything_a_rule_can_read() -> None:
    from apps.kernel.identity import Principal
    from apps.kernel.policy import RuleSpec, policy_compile

    client, clock = FakeClient(), Clock()
    client.tools = {1: ["admin", "read"], 2: ["b"]}
    lists, _ = make(client, clock)
    policy = policy_compile("deny", [RuleSpec("r", "tenant", "acme", "allow", ["read"]),
                                     RuleSpec("a", "tenant", "acme", "allow", ["admin"], '"admin" in principal.scopes')])
    vhost = VirtualHostView(1, "acme", "main", MappingProxyType({"one": backend(1), "two": backend(2)}),
                            MappingProxyType({}), policy=policy)
    # One token subject, two tokens: the same key id, other scopes.
    plain = Principal(1, "acme", -5, "alice", None, issuer="https://i/")
    admin = Principal(1, "acme", -5, "alice", None, issuer="https://i/", scopes=("admin",))

    async def listed(principal: Principal) -> list[str]:
        result = await lists.result(vhost, principal, "tools/list", {}, modern=False)
        return [tool["name"] for tool in _items(result["tools"])]

    assert await listed(plain) == ["one-read"]
    assert await listed(admin) == ["one-admin", "one-read"]
    assert await lists.tool_listed(vhost, admin, "one-admin", "one") is True
    assert await lists.tool_listed(vhost, plain, "one-admin", "one") is False


def test_refused_subscriptions_are_retried_less_and_less_often() -> None:
    from apps.gateway.pipeline.host_lists import listen_retry_delay

    assert [listen_retry_delay(5.0, n) for n in range(0, 8)] == [5.0, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 300.0]
    assert listen_retry_delay(5.0, 50) == 300.0
