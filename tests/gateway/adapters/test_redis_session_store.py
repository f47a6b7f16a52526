"""The session store on the real (test) Redis: ids, idle expiry, and the sweep's hand-over."""

from __future__ import annotations

import asyncio

import pytest
from django.conf import settings

from apps.common.redis import async_redis_client, redis_client
from apps.gateway.adapters.redis_session_store import TENANT_INDEX, RedisSessionStore, session_count, session_list
from apps.gateway.pipeline.ports import SessionLimitReached
from apps.gateway.pipeline.values import BackendSession, SessionState

pytestmark = pytest.mark.usefixtures("clean_redis")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _store(ttl: int = 60, instance: str = "gw-a", clock: Clock | None = None) -> RedisSessionStore:
    # An idle index of its own: the gateways other tests run sweep theirs on the real clock.
    return RedisSessionStore(async_redis_client(), secret=settings.SECRET_KEY, instance=instance,
                             ttl_seconds=ttl, cache_seconds=0, clock=clock or Clock(), idle_index="test:session-idle")


def _state(store: RedisSessionStore, tenant_id: int = 1) -> SessionState:
    return SessionState(id=store.new_id(), tenant_id=tenant_id, vhost="main", key_id=7, protocol_version="2025-11-25",
                        client_capabilities={"sampling": {}}, client_info={"name": "c"}, tenant_slug="acme")


DEMO = BackendSession("b-1", "2025-11-25", "http://r1/mcp", "abc")


async def _saved(store: RedisSessionStore) -> SessionState:
    state = _state(store)
    assert await store.save(state, create=True)
    assert await store.save_backend(state.id, "demo", DEMO)
    state.backends["demo"] = DEMO
    return state


async def test_a_session_round_trips_and_ids_are_checked_without_a_lookup() -> None:
    store = _store()
    state = await _saved(store)
    assert await store.load(state.id, tenant_id=state.tenant_id) == state
    assert store.is_well_formed(state.id)
    assert not store.is_well_formed(state.id[:-2] + "xx")  # tag does not match
    assert _store(instance="gw-b").is_well_formed(state.id)  # any instance of the deployment


async def test_a_session_idle_past_its_expiry_is_gone_and_handed_to_one_sweeper() -> None:
    clock = Clock()
    store = _store(ttl=60, clock=clock)
    idle, busy = await _saved(store), await _saved(store)
    clock.now += 40
    assert await store.load(busy.id, tenant_id=busy.tenant_id) is not None  # used: its idle time starts again
    clock.now += 40
    assert await store.load(idle.id, tenant_id=idle.tenant_id) is None  # clients see it gone at once
    sweepers = (_store(ttl=60, clock=clock), _store(ttl=60, clock=clock, instance="gw-b"))
    first, second = await asyncio.gather(*(sweeper.take_expired() for sweeper in sweepers))
    taken = [s.id for s in first + second]
    assert idle.id in taken and taken.count(idle.id) == 1
    assert busy.id not in taken
    [swept] = [s for s in first + second if s.id == idle.id]
    assert swept.backends["demo"].session_id == "b-1"  # what the sweep needs to close it
    assert await store.load(idle.id, tenant_id=idle.tenant_id) is None  # nor does a client get it back while it is being closed
    await store.delete(idle.id)
    assert idle.id not in [s.id for s in await sweepers[0].take_expired()]


async def test_an_update_never_resurrects_an_ended_session() -> None:
    store = _store()
    state = _state(store)
    await store.save(state, create=True)
    await store.delete(state.id)
    assert not await store.save(state, create=False)
    assert await store.load(state.id, tenant_id=state.tenant_id) is None


async def test_backend_sessions_opened_at_once_by_two_instances_are_both_kept() -> None:
    """Each instance records its own backend session; neither overwrites the other's, nor does a
    later save of the session's state."""
    first, second = _store(instance="gw-a"), _store(instance="gw-b")
    state = _state(first)
    await first.save(state, create=True)
    alpha = BackendSession("a-1", "2025-11-25", "http://a/mcp", "h")
    beta = BackendSession("b-1", "2025-11-25", "http://b/mcp", "h")
    assert all(await asyncio.gather(first.save_backend(state.id, "alpha", alpha), second.save_backend(state.id, "beta", beta)))
    await first.save(state, create=False)
    assert (await _store().load(state.id, tenant_id=state.tenant_id)).backends == {"alpha": alpha, "beta": beta}  # type: ignore[union-attr]


async def test_a_backend_session_of_an_ended_session_is_not_recorded() -> None:
    store = _store()
    state = _state(store)
    await store.save(state, create=True)
    await store.delete(state.id)
    assert not await store.save_backend(state.id, "demo", DEMO)
    assert await store.load(state.id, tenant_id=state.tenant_id) is None


async def test_a_sweep_forgets_a_session_whose_state_redis_already_dropped() -> None:
    """No instance swept while its state lived (state TTL = expiry + grace): the sweep has nothing
    to close and takes nothing; its tenant's index entry no longer counts, and goes with the age
    trim when the tenant's next session is created."""
    clock = Clock()
    store = _store(ttl=60, clock=clock)
    state = _state(store, tenant_id=9001)
    assert await store.save(state, create=True)
    client = async_redis_client()
    await client.delete(f"gw:session:{{{state.id}}}")  # as Redis does
    clock.now += 661
    assert state.id not in [s.id for s in await store.take_expired()]
    assert session_count(redis_client(), tenant_id=9001, ttl_seconds=60, clock=clock) == 0
    assert await store.save(_state(store, tenant_id=9001), create=True)
    assert await client.zscore(TENANT_INDEX.format(9001), state.id) is None


async def test_deleting_a_session_takes_it_out_of_its_tenants_index_even_without_its_state() -> None:
    store = _store()
    client = async_redis_client()
    for drop_state in (False, True):
        state = _state(store, tenant_id=9002)
        assert await store.save(state, create=True)
        if drop_state:
            await client.delete(f"gw:session:{{{state.id}}}")
        await store.delete(state.id)
        # Without its state the entry is left off the first listing, and out of the index after it.
        assert session_list(redis_client(), tenant_id=9002, ttl_seconds=60, clock=Clock()) == ([], 0)
        assert await client.zscore(TENANT_INDEX.format(9002), state.id) is None


async def test_each_use_moves_the_session_up_its_tenants_index_and_only_its_own_tenants() -> None:
    """The tenant index is ordered by last use (what the console pages through); a session id
    presented under another tenant is refused by the caller and never enters that tenant's index."""
    clock = Clock()
    store = _store(ttl=60, clock=clock)
    older, newer = _state(store, tenant_id=9003), _state(store, tenant_id=9003)
    for state in (older, newer):
        assert await store.save(state, create=True)
        clock.now += 1
    client = async_redis_client()
    assert await client.zrevrange(TENANT_INDEX.format(9003), 0, -1) == [newer.id.encode(), older.id.encode()]
    clock.now += 10
    assert await store.load(older.id, tenant_id=9003) is not None
    assert await client.zrevrange(TENANT_INDEX.format(9003), 0, -1) == [older.id.encode(), newer.id.encode()]
    assert await client.zscore(TENANT_INDEX.format(9003), older.id) == clock.now
    assert await store.load(newer.id, tenant_id=9004) is not None  # the caller refuses it (a 404)
    assert await client.zcard(TENANT_INDEX.format(9004)) == 0


async def test_a_key_holds_at_most_its_cap_of_usable_sessions() -> None:
    clock = Clock()
    store = RedisSessionStore(async_redis_client(), secret=settings.SECRET_KEY, instance="gw-a", ttl_seconds=60,
                              cache_seconds=0, clock=clock, idle_index="test:session-idle", max_sessions_per_key=2)

    async def create() -> SessionState | None:
        state = _state(store, tenant_id=9101)
        try:
            await store.save(state, create=True)
        except SessionLimitReached as reached:
            assert reached.limit == 2
            return None
        return state

    created = [s for s in await asyncio.gather(*(create() for _ in range(10))) if s is not None]
    assert len(created) == 2  # counted and created in one step: ten at once never overshoot
    used, idle = created
    clock.now += 50
    assert await store.load(used.id, tenant_id=9101, key_id=used.key_id) is not None  # renews its slot too
    clock.now += 50
    assert await create() is not None  # `idle` expired and freed its slot; `used` still holds one
    assert await create() is None
    await store.delete(used.id)
    assert await create() is not None
