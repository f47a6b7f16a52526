"""Merging the lists of several backends, paging them downstream, following upstream pages, fan-out."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from apps.gateway.pipeline.cursors import CursorCodec
from apps.gateway.pipeline.listing import (
    Dropped,
    ListCaps,
    ListTooLarge,
    MergedList,
    PageLimits,
    PaginationError,
    collect_all_pages,
    encode_page,
    fan_out,
    list_result,
    merge_lists,
    paged,
    start_of,
)
from apps.gateway.pipeline.ports import ResponseTooLarge
from apps.gateway.protocol import jsonrpc
from apps.gateway.protocol.errors import InvalidParams

CODEC = CursorCodec(b"k" * 32)


def listed(merged: MergedList, cursor: object, *, page_size: int, page_bytes: int = 1_000_000,
           **options: Any) -> dict[str, Any]:
    """`list_result` of pages of `page_size` items and `page_bytes` bytes, as the client reads it."""
    result = list_result(merged, cursor, pages=paged(merged, PageLimits(page_size, page_bytes)), **options)
    return json.loads(jsonrpc.dumps(result))


def tools(map_key: str, count: int) -> list[dict[str, Any]]:
    return [{"name": f"{map_key}-tool{i:04d}", "description": f"Tool {i}."} for i in range(count)]


def read_all(merged: MergedList, page_size: int, codec: CursorCodec = CODEC) -> list[Mapping[str, Any]]:
    """What a client following `nextCursor` to the end receives."""
    seen: list[Mapping[str, Any]] = []
    cursor: str | None = None
    while True:
        result = listed(merged, cursor, codec=codec, tenant_id=1, vhost="main", page_size=page_size)
        assert set(result) <= {merged.kind, "nextCursor"}
        seen.extend(result[merged.kind])
        cursor = result.get("nextCursor")
        if cursor is None:
            return seen


def test_merge_is_sorted_and_independent_of_backend_order() -> None:
    per_backend = {"gateway-one": tools("gateway-one", 30), "gateway": tools("gateway", 30), "a": tools("a", 30)}
    expected = merge_lists("tools", per_backend)
    assert list(expected.identities) == sorted(item["name"] for items in per_backend.values() for item in items)
    assert expected.origins[0] == "a" and expected.dropped == ()
    rng = random.Random(4)
    for _ in range(10):
        keys = list(per_backend)
        rng.shuffle(keys)
        shuffled = {key: rng.sample(per_backend[key], len(per_backend[key])) for key in keys}
        assert merge_lists("tools", shuffled) == expected


def test_duplicates_keep_the_first_map_key_and_are_reported() -> None:
    merged = merge_lists(
        "tools",
        {
            "b": [{"name": "search", "from": "b"}, {"name": "b-only"}],
            "a": [{"name": "search", "from": "a"}, {"name": "search", "from": "a again"}, {"title": "no name"}],
            "c": [{"name": "search", "from": "c"}, {"name": 7}],
        },
    )
    assert merged.identities == ("b-only", "search")
    assert merged.items[1] == {"name": "search", "from": "a"}
    assert merged.origins == ("b", "a")
    assert set(merged.dropped) == {
        Dropped("a", None, None),
        Dropped("c", None, None),
        Dropped("a", "search", "a"),
        Dropped("b", "search", "a"),
        Dropped("c", "search", "a"),
    }
    assert Dropped("b", "search", "a").reason == "duplicate of 'search' from backend 'a'"


def test_resources_are_identified_by_uri() -> None:
    merged = merge_lists(
        "resources",
        {
            "x": [{"uri": "x-file:///b", "name": "Z"}, {"uri": "x-file:///a", "name": "Y"}],
            "y": [{"uri": "x-file:///a", "name": "A"}],
        },
    )
    assert merged.identities == ("x-file:///a", "x-file:///b")
    assert merged.items[0]["name"] == "Y" and merged.dropped == (Dropped("y", "x-file:///a", "x"),)


def test_version_follows_identities_only() -> None:
    base = merge_lists("prompts", {"a": [{"name": "p1", "description": "one"}, {"name": "p2"}]})
    edited = merge_lists("prompts", {"a": [{"name": "p1", "description": "edited"}, {"name": "p2"}]})
    grown = merge_lists("prompts", {"a": [{"name": "p1"}, {"name": "p2"}, {"name": "p3"}]})
    assert base.version == edited.version != grown.version


def test_a_page_holds_what_fits_its_items_and_bytes() -> None:
    items = [{"name": f"t{i:02d}", "description": "x" * 100} for i in range(50)]
    size = len(jsonrpc.dumps(items[0]))
    encoded, end = encode_page(items, 0, PageLimits(items=7))
    assert end == 7 and json.loads(encoded) == items[:7]
    assert encode_page(items, 48, PageLimits(items=7))[1] == 50
    assert encode_page([], 0, PageLimits()) == (b"[]", 0)
    budget = 2048 + 2 + 10 * (size + 1)  # the envelope, the brackets and ten items with commas
    encoded, end = encode_page(items, 5, PageLimits(bytes=budget * 2), reserved=budget)
    assert end == 15 and len(encoded) <= budget - 2048 and json.loads(encoded) == items[5:15]
    lead = [{"name": "tool_search"}]
    encoded, end = encode_page(items, 0, PageLimits(bytes=budget * 2), lead=lead, reserved=budget)
    assert json.loads(encoded) == [*lead, *items[:end]] and end == 9
    encoded, end = encode_page(items, 0, PageLimits(items=7), lead=lead)  # the lead counts as an entry
    assert end == 6 and len(json.loads(encoded)) == 7


def test_an_entry_bigger_than_a_page_is_a_page_by_itself() -> None:
    items = [{"name": "small"}, {"name": "big", "description": "x" * 10_000}, {"name": "after"}]
    limits = PageLimits(bytes=4096 + 100)
    assert [json.loads(encode_page(items, start, limits)[0]) for start in (0, 1, 2)] == [[items[0]], [items[1]], [items[2]]]
    with pytest.raises(ValueError):
        PageLimits(items=0)
    with pytest.raises(ValueError):
        PageLimits(bytes=1000)


@pytest.mark.parametrize("page_bytes", [5000, 20_000, 1_000_000])
def test_pages_cut_by_bytes_yield_every_item_once_and_stay_under_the_size(page_bytes: int) -> None:
    rng = random.Random(7)
    per_backend = {key: [{"name": f"{key}{i}", "description": "é" * rng.randrange(0, 2000)} for i in range(40)]
                   for key in "abc"}
    merged = merge_lists("tools", per_backend)
    seen: list[Any] = []
    cursor = None
    while True:
        result = list_result(merged, cursor, codec=CODEC, tenant_id=1, vhost="main",
                             pages=paged(merged, PageLimits(1000, page_bytes)))
        response = jsonrpc.dumps({"jsonrpc": "2.0", "id": 2**53, "result": {**result, "ttlMs": 60000}})
        assert len(response) <= page_bytes
        seen.extend(json.loads(jsonrpc.dumps(result["tools"])))
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert seen == json.loads(jsonrpc.dumps(list(merged.items)))


@pytest.mark.parametrize("page_size", [1, 2, 7, 1000, 5000])
def test_paging_yields_every_item_once_in_order(page_size: int) -> None:
    merged = merge_lists("tools", {key: tools(key, 100) for key in "abcdefghij"})
    assert len(merged.items) == 1000
    assert read_all(merged, page_size) == list(merged.items)


def test_single_page_has_no_cursor() -> None:
    merged = merge_lists("prompts", {"a": [{"name": "p"}]})
    assert listed(merged, None, codec=CODEC, tenant_id=1, vhost="main", page_size=10) == {
        "prompts": [{"name": "p"}]
    }


def test_a_cursor_from_another_gateway_instance_works() -> None:
    merged = merge_lists("tools", {"a": tools("a", 10)})
    first = listed(merged, None, codec=CODEC, tenant_id=1, vhost="main", page_size=4)
    other = CursorCodec(b"k" * 32)
    second = listed(merged, first["nextCursor"], codec=other, tenant_id=1, vhost="main", page_size=4)
    assert [t["name"] for t in second["tools"]] == [f"a-tool{i:04d}" for i in range(4, 8)]


def test_a_cursor_for_another_list_or_vhost_is_refused() -> None:
    merged = merge_lists("tools", {"a": tools("a", 10)})
    cursor = listed(merged, None, codec=CODEC, tenant_id=1, vhost="main", page_size=4)["nextCursor"]
    prompts = merge_lists("prompts", {"a": tools("a", 10)})
    with pytest.raises(InvalidParams):
        listed(prompts, cursor, codec=CODEC, tenant_id=1, vhost="main", page_size=4)
    with pytest.raises(InvalidParams):
        listed(merged, cursor, codec=CODEC, tenant_id=1, vhost="other", page_size=4)
    with pytest.raises(InvalidParams):
        listed(merged, "tampered" + cursor, codec=CODEC, tenant_id=1, vhost="main", page_size=4)


@pytest.mark.parametrize("change", ["insert_before", "insert_after", "remove_before", "remove_served"])
def test_a_list_changed_between_pages(change: str) -> None:
    """Default: the cursor is stale (-32602, the client lists again). With `resume_stale`, paging
    resumes after the last item served: nothing served twice, no surviving item skipped."""
    items = tools("a", 20)
    before = merge_lists("tools", {"a": items})
    first = listed(before, None, codec=CODEC, tenant_id=1, vhost="main", page_size=8)
    served = first["tools"]
    changed = {
        "insert_before": [*items, {"name": "a-tool0003x"}],
        "insert_after": [*items, {"name": "a-tool0015x"}],
        "remove_before": items[1:],
        "remove_served": [item for item in items if item["name"] != "a-tool0007"],
    }[change]
    after = merge_lists("tools", {"a": changed})
    with pytest.raises(InvalidParams) as caught:
        listed(after, first["nextCursor"], codec=CODEC, tenant_id=1, vhost="main", page_size=8)
    assert caught.value.data == {"cursor": "stale"} and "changed" in caught.value.message

    rest: list[Mapping[str, Any]] = []
    cursor = first["nextCursor"]
    while cursor is not None:
        result = listed(after, cursor, codec=CODEC, tenant_id=1, vhost="main", page_size=8, resume_stale=True)
        rest.extend(result["tools"])
        cursor = result.get("nextCursor")
    names = [t["name"] for t in served + rest]
    assert len(names) == len(set(names)) and names == sorted(names)
    survivors = {t["name"] for t in changed}
    assert survivors - {"a-tool0003x"} <= set(names)  # only an item inserted before the cursor is missed


def test_start_of() -> None:
    merged = merge_lists("tools", {"a": tools("a", 10)})
    assert start_of(None, merged, CODEC, 1, "main") == 0
    cursor = listed(merged, None, codec=CODEC, tenant_id=1, vhost="main", page_size=3)["nextCursor"]
    assert start_of(cursor, merged, CODEC, 1, "main") == 3


class PagedServer:
    """An upstream list served `size` items per page with opaque cursors."""

    def __init__(self, items: Sequence[Any], size: int) -> None:
        self.items = list(items)
        self.size = size
        self.requests: list[str | None] = []

    async def fetch(self, cursor: str | None, allowance: int | None) -> tuple[dict[str, Any], int]:
        self.requests.append(cursor)
        start = int(cursor.removeprefix("at-")) if cursor else 0
        result: dict[str, Any] = {"tools": self.items[start : start + self.size]}
        if start + self.size < len(self.items):
            result["nextCursor"] = f"at-{start + self.size}"
        size = len(json.dumps(result))
        if allowance is not None and size > allowance:
            raise ResponseTooLarge(f"over {allowance}", allowance)
        return result, size


async def test_collect_all_pages_follows_every_page() -> None:
    server = PagedServer([{"name": f"t{i}"} for i in range(5)], size=2)
    assert await collect_all_pages(server.fetch, "tools") == server.items
    assert server.requests == [None, "at-2", "at-4"]


@pytest.mark.parametrize("last", [{}, {"nextCursor": None}, {"nextCursor": ""}])
async def test_collect_all_pages_ends_without_a_cursor(last: dict[str, Any]) -> None:
    pages = iter([{"prompts": [1], "nextCursor": "c"}, {"prompts": [2], **last}])

    async def fetch(cursor: str | None, allowance: int | None) -> tuple[dict[str, Any], int]:
        return next(pages), 10

    assert await collect_all_pages(fetch, "prompts") == [1, 2]


async def test_collect_all_pages_detects_a_loop() -> None:
    async def fetch(cursor: str | None, allowance: int | None) -> tuple[dict[str, Any], int]:
        return {"tools": [1], "nextCursor": {None: "c1", "c1": "c2", "c2": "c1"}[cursor]}, 10

    with pytest.raises(PaginationError, match="loop"):
        await collect_all_pages(fetch, "tools")


async def test_collect_all_pages_stops_after_max_pages() -> None:
    server = PagedServer(list(range(100)), size=1)
    with pytest.raises(PaginationError, match="more than 10 pages"):
        await collect_all_pages(server.fetch, "tools", ListCaps(max_pages=10))
    assert len(server.requests) == 10


async def test_collect_all_pages_stops_at_the_entry_cap() -> None:
    server = PagedServer([{"name": f"t{i}"} for i in range(50)], size=10)
    assert len(await collect_all_pages(server.fetch, "tools", ListCaps(max_items=50))) == 50
    server.requests.clear()
    with pytest.raises(ListTooLarge, match="more than 25 entries"):
        await collect_all_pages(server.fetch, "tools", ListCaps(max_items=25))
    assert len(server.requests) == 3  # no page is asked for after the one that went over


async def test_collect_all_pages_stops_at_the_byte_cap() -> None:
    server = PagedServer([{"name": f"t{i}"} for i in range(50)], size=10)
    with pytest.raises(ListTooLarge, match="over 300 bytes"):
        await collect_all_pages(server.fetch, "tools", ListCaps(max_bytes=300))
    assert len(server.requests) == 2  # a page of about 180 bytes fits once, not twice


async def test_collect_all_pages_passes_on_a_response_over_the_clients_own_cap() -> None:
    async def fetch(cursor: str | None, allowance: int | None) -> tuple[dict[str, Any], int]:
        raise ResponseTooLarge("response body over 100 bytes", 100)

    with pytest.raises(ResponseTooLarge):
        await collect_all_pages(fetch, "tools", ListCaps(max_bytes=1000))


@pytest.mark.parametrize(
    "result", [{}, {"tools": {"a": 1}}, {"tools": [], "nextCursor": 3}, ["not", "an", "object"]]
)
async def test_collect_all_pages_refuses_malformed_pages(result: Any) -> None:
    async def fetch(cursor: str | None, allowance: int | None) -> Any:
        return result, 10

    with pytest.raises(PaginationError):
        await collect_all_pages(fetch, "tools")


async def test_fan_out_omits_slow_and_failing_backends() -> None:
    cancelled: list[str] = []

    async def fetch(map_key: str, delay: float) -> list[str]:
        try:
            await asyncio.sleep(delay)
        except asyncio.CancelledError:
            cancelled.append(map_key)
            raise
        if map_key == "broken":
            raise ConnectionError("connection refused")
        if map_key == "bare":
            raise RuntimeError
        return [map_key]

    backends = {"fast": 0.0, "slow": 10.0, "broken": 0.01, "bare": 0.0, "ok": 0.05}
    started = time.perf_counter()
    results, omitted = await fan_out(backends, fetch, timeout=0.2)
    elapsed = time.perf_counter() - started
    assert results == {"fast": ["fast"], "ok": ["ok"]}
    assert omitted == {
        "slow": "no answer within 0.2 s",
        "broken": "ConnectionError: connection refused",
        "bare": "RuntimeError",
    }
    assert cancelled == ["slow"]
    assert 0.19 <= elapsed < 1.0  # the timeout, not the sum of the delays (10 s)


async def test_fan_out_returns_early_when_all_answer() -> None:
    async def fetch(map_key: str, delay: float) -> str:
        await asyncio.sleep(delay)
        return map_key

    started = time.perf_counter()
    results, omitted = await fan_out({"b": 0.02, "a": 0.01}, fetch, timeout=5)
    assert results == {"b": "b", "a": "a"} and omitted == {}
    assert time.perf_counter() - started < 1
    assert await fan_out({}, fetch, timeout=1) == ({}, {})


async def test_merge_does_not_depend_on_which_backend_answers_first() -> None:
    lists = {key: tools(key, 5) for key in ("a", "b", "c")}

    async def fetch(map_key: str, delay: float) -> list[dict[str, Any]]:
        await asyncio.sleep(delay)
        return lists[map_key]

    one, _ = await fan_out({"a": 0.0, "b": 0.01, "c": 0.02}, fetch, timeout=1)
    other, _ = await fan_out({"a": 0.02, "b": 0.01, "c": 0.0}, fetch, timeout=1)
    assert merge_lists("tools", one) == merge_lists("tools", other)


async def test_cancelling_fan_out_cancels_every_fetch() -> None:
    cancelled: list[str] = []
    started = asyncio.Event()

    async def fetch(map_key: str, _: None) -> None:
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(map_key)
            raise

    task = asyncio.ensure_future(fan_out({"a": None, "b": None}, fetch, timeout=10))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(cancelled) == ["a", "b"]
