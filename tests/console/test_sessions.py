"""The sessions page and the session store's per-tenant index: a tenant's open sessions, listed
from Redis a page at a time, with their owner instance, protocol, transport, key, host, backend
sessions and idle time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import redis.asyncio
from django.conf import settings
from django.test import Client

from apps.common.redis import redis_client
from apps.gateway.adapters.redis_session_store import TENANT_INDEX, RedisSessionStore, session_list
from apps.gateway.pipeline.values import BackendSession, SessionState
from tests.factories import api_key_factory, tenant_factory

pytestmark = pytest.mark.django_db


TTL = 3600


class Clock:
    now = 2_000_000_000.0

    def __call__(self) -> float:
        return self.now


def _run(work: Any, *, clock: Callable[[], float] | None = None) -> Any:
    """Runs `work(store)` on a store with a client of its own loop."""

    async def go() -> Any:
        client = redis.asyncio.Redis.from_url(settings.REDIS_URL)
        try:
            store = RedisSessionStore(client, secret=settings.SECRET_KEY, instance="gw-2", ttl_seconds=TTL,
                                      cache_seconds=0, clock=clock or Clock())
            return await work(store)
        finally:
            await client.aclose()

    return asyncio.run(go())


def _open(tenant_id: int, count: int, *, key_id: int = 7, backends: bool = False) -> list[str]:
    async def work(store: RedisSessionStore) -> list[str]:
        ids = []
        for _ in range(count):
            state = SessionState(id=store.new_id(), tenant_id=tenant_id, vhost="main", key_id=key_id,
                                 protocol_version="2025-06-18", client_capabilities={}, client_info={},
                                 transport="sse", tenant_slug="x")
            assert await store.save(state, create=True)
            if backends:
                await store.save_backend(state.id, "demo", BackendSession("b-1", "2025-11-25", "http://r1/mcp"))
            ids.append(state.id)
        return ids

    return _run(work)


@pytest.fixture(autouse=True)
def _clean() -> None:
    client = redis_client()
    for key in client.scan_iter("gw:session*"):
        client.delete(key)


def test_the_store_keeps_each_tenants_sessions_indexed() -> None:
    a = _open(101, 3, backends=True)
    b = _open(102, 1)
    sessions, total = session_list(redis_client(), tenant_id=101, ttl_seconds=TTL, clock=Clock())
    assert total == 3
    assert {s.state.id for s in sessions} == set(a) and b[0] not in {s.state.id for s in sessions}
    first = sessions[0]
    assert first.instance == "gw-2" and first.state.transport == "sse" and first.idle_seconds == 0
    assert first.state.backends["demo"].replica == "http://r1/mcp"
    # A deleted session leaves the index; one a sweep took leaves it too (and is no longer listed,
    # as no client can use it).
    _run(lambda store: store.delete(a[0]))
    taken = Clock.now + TTL + 1
    _run(lambda store: store.take_expired(), clock=lambda: taken)
    assert redis_client().zcard(TENANT_INDEX.format(101)) == 0
    assert session_list(redis_client(), tenant_id=101, ttl_seconds=TTL, clock=Clock()) == ([], 0)


def test_a_session_whose_state_is_gone_is_left_off_and_leftovers_are_trimmed() -> None:
    a = _open(105, 2)
    redis_client().delete(f"gw:session:{{{a[1]}}}")  # evicted
    sessions, total = session_list(redis_client(), tenant_id=105, ttl_seconds=TTL, clock=Clock())
    assert [s.state.id for s in sessions] == [a[0]] and total == 1
    assert redis_client().zscore(TENANT_INDEX.format(105), a[1]) is None
    # An entry a sweep left behind when it died half-way is neither listed nor counted, and goes
    # once it is long past its expiry (a margin for instances whose clocks run behind).
    past = Clock.now + TTL + 1
    assert session_list(redis_client(), tenant_id=105, ttl_seconds=TTL, clock=lambda: past) == ([], 0)
    assert redis_client().zcard(TENANT_INDEX.format(105)) == 1
    long_past = Clock.now + TTL + 601
    assert session_list(redis_client(), tenant_id=105, ttl_seconds=TTL, clock=lambda: long_past) == ([], 0)
    assert redis_client().zcard(TENANT_INDEX.format(105)) == 0


def test_only_sessions_still_usable_are_listed_and_counted() -> None:
    """A session idle past its expiry is unusable at once, before any sweep takes it: it is neither
    listed nor counted, on any page."""
    ids = _open(104, 4)
    half_hour = Clock.now + TTL / 2
    _run(lambda store: asyncio.gather(store.load(ids[0], tenant_id=104), store.load(ids[2], tenant_id=104)), clock=lambda: half_hour)
    past_the_others = Clock.now + TTL + 60
    pages = [session_list(redis_client(), tenant_id=104, ttl_seconds=TTL, offset=offset, limit=1,
                          clock=lambda: past_the_others) for offset in (0, 1, 2)]
    assert [total for _, total in pages] == [2, 2, 2]
    assert [len(page) for page, _ in pages] == [1, 1, 0]
    assert {page[0].state.id for page, _ in pages[:2]} == {ids[0], ids[2]}
    assert pages[0][0][0].idle_seconds == TTL / 2 + 60


def test_a_listing_reads_one_page() -> None:
    ids = _open(103, 7)
    page, total = session_list(redis_client(), tenant_id=103, ttl_seconds=TTL, offset=5, limit=5, clock=Clock())
    assert total == 7 and len(page) == 2 and {s.state.id for s in page} <= set(ids)


def test_the_page_lists_the_tenants_sessions_a_page_at_a_time(
    client: Client, acme: Any, django_assert_max_num_queries: Any
) -> None:
    key = api_key_factory(tenant=acme, name="robot").api_key
    _open(acme.pk, 55, key_id=key.pk, backends=True)
    other = tenant_factory(slug="other")
    foreign = _open(other.pk, 2)
    with django_assert_max_num_queries(7):
        page = client.get("/console/t/acme/sessions/").content.decode()
    assert page.count("<code title=\"gw-2.") == 50 and "robot" in page and "http://r1/mcp" in page
    assert "2025-06-18" in page and "sse" in page and "Page 1 of 2 (55 sessions)" in page
    assert foreign[0][:20] not in page
    second = client.get("/console/t/acme/sessions/?page=2").content.decode()
    assert second.count("<code title=\"gw-2.") == 5
    assert client.get("/console/t/other/sessions/").status_code == 404
