import asyncio
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from apps.gateway.pipeline.ports import ReplicaState, ReplicaUnreachable, UpstreamUnavailable
from apps.gateway.pipeline.replicas import NoReplicaAvailable, ReplicaHealth, routing_hash
from apps.gateway.pipeline.values import BackendView

URLS = tuple(f"http://10.0.0.{i}/mcp" for i in range(1, 5))


def _backend(urls: tuple[str, ...] = URLS) -> BackendView:
    return BackendView(id=1, name="b", transport="streamable-http", urls=urls, timeout=5)


class _Reply:
    status = 406

    def close(self) -> None:
        pass


class Replicas:
    """An upstream whose replicas are up or down as the test says."""

    def __init__(self) -> None:
        self.down: set[str] = set()
        self.sent: list[tuple[str, str]] = []

    async def send(self, backend: BackendView, replica: str, method: str, headers: Any, body: bytes = b"", *, timeout: float,
                   long_lived: bool | None = None) -> _Reply:
        self.sent.append((replica, method))
        if replica in self.down:
            raise ReplicaUnreachable("cannot connect (ConnectionRefusedError)")
        return _Reply()


def test_a_session_always_lands_on_the_same_replica_and_load_spreads() -> None:
    health = ReplicaHealth(Replicas(), check_seconds=None)
    picks = {f"s{i}": health.pick(_backend(), f"s{i}") for i in range(400)}
    assert all(health.pick(_backend(), session) == url for session, url in picks.items())
    assert min(Counter(picks.values()).values()) > 50


async def test_a_replica_that_cannot_be_reached_moves_only_its_sessions() -> None:
    upstream = Replicas()
    health = ReplicaHealth(upstream, check_seconds=None)
    before = {f"s{i}": health.pick(_backend(), f"s{i}") for i in range(400)}
    upstream.down.add(URLS[0])
    with pytest.raises(ReplicaUnreachable):
        await health.send(_backend(), URLS[0], "POST", [], b"{}", timeout=1)
    assert not health.is_up(URLS[0])
    after = {s: health.pick(_backend(), s) for s in before}
    moved = [s for s in before if before[s] != after[s]]
    assert moved and all(before[s] == URLS[0] for s in moved)
    assert URLS[0] not in after.values()


async def test_checks_mark_replicas_down_and_up_again() -> None:
    upstream = Replicas()
    health = ReplicaHealth(upstream, check_seconds=None)
    health.pick(_backend(), "s")  # in use: now checked
    upstream.down.add(URLS[1])
    assert not await health.check(URLS[1])
    assert health.down() == (URLS[1],)
    upstream.down.clear()
    assert await health.check(URLS[1])  # any HTTP answer (here 406) means it serves
    assert health.down() == ()


async def test_all_replicas_down_is_a_clear_error() -> None:
    upstream = Replicas()
    health = ReplicaHealth(upstream, check_seconds=None)
    health.pick(_backend(), "s")
    upstream.down.update(URLS)
    for url in URLS:
        await health.check(url)
    with pytest.raises(NoReplicaAvailable, match="all 4 replicas are down") as raised:
        health.pick(_backend(), "s")
    assert isinstance(raised.value, UpstreamUnavailable)  # callers answer it as backend unavailable


async def test_a_single_replica_is_never_marked_down() -> None:
    """Nowhere else to go: every request tries it (and says why it failed)."""
    upstream = Replicas()
    health = ReplicaHealth(upstream, check_seconds=None)
    single = _backend(URLS[:1])
    assert health.pick(single, "s") == URLS[0]
    upstream.down.add(URLS[0])
    with pytest.raises(ReplicaUnreachable):
        await health.send(single, URLS[0], "POST", [], timeout=1)
    assert health.pick(single, "s") == URLS[0]


def test_the_routing_hash_is_stable_and_does_not_reveal_the_session() -> None:
    session = "gw1.abcdefghijklmnopqrstuvwx.tag"
    assert routing_hash(session) == routing_hash(session)
    assert routing_hash(session) != routing_hash(session + "x")
    assert session not in routing_hash(session) and len(routing_hash(session)) == 32


class Feed:
    """A `HealthFeed` that records what the instance shares."""

    def __init__(self) -> None:
        self.published: list[ReplicaState] = []
        self.confirmed: list[tuple[str, ...]] = []

    def publish(self, state: ReplicaState) -> None:
        self.published.append(state)

    def confirm(self, states: Sequence[ReplicaState]) -> None:
        self.confirmed.append(tuple(state.url for state in states))

    def start(self, on_state: Any) -> None:
        pass


async def test_this_instance_shares_each_transition_once() -> None:
    upstream, feed = Replicas(), Feed()
    health = ReplicaHealth(upstream, check_seconds=None, clock=lambda: 1000.0, feed=feed)
    health.pick(_backend(), "s")
    upstream.down.add(URLS[0])
    for _ in range(2):
        with pytest.raises(ReplicaUnreachable):
            await health.send(_backend(), URLS[0], "POST", [], timeout=1)
    await health.check(URLS[0])
    assert feed.published == [ReplicaState(URLS[0], False, 1000.0)]  # not again while it stays down
    upstream.down.clear()
    await health.check(URLS[0])
    await health.check(URLS[0])
    assert feed.published[1:] == [ReplicaState(URLS[0], True, 1000.0)]


async def test_another_instance_s_findings_apply_here_and_are_not_shared_again() -> None:
    upstream, feed = Replicas(), Feed()
    health = ReplicaHealth(upstream, check_seconds=None, feed=feed)
    before = {f"s{i}": health.pick(_backend(), f"s{i}") for i in range(100)}
    health.apply(ReplicaState(URLS[2], False, 5.0, "gw-b"))
    assert not health.is_up(URLS[2])
    after = {s: health.pick(_backend(), s) for s in before}
    assert URLS[2] not in after.values()
    assert all(after[s] == before[s] for s in before if before[s] != URLS[2])
    assert upstream.sent == []  # nobody here tried it
    health.apply(ReplicaState(URLS[2], True, 6.0, "gw-c"))  # up, found by any instance: up here
    assert health.is_up(URLS[2]) and {s: health.pick(_backend(), s) for s in before} == before
    assert feed.published == []


async def test_a_record_of_a_replica_not_yet_used_here_holds_when_it_is_first_used() -> None:
    upstream, feed = Replicas(), Feed()
    health = ReplicaHealth(upstream, check_seconds=60, feed=feed)
    upstream.down.add(URLS[3])
    health.apply(ReplicaState(URLS[3], False, 5.0, "gw-b"))  # read at start, before any request
    assert URLS[3] not in {health.pick(_backend(), f"s{i}") for i in range(100)}
    await asyncio.sleep(0.01)  # ... and checked at once, the record may be old: still down
    assert upstream.sent == [(URLS[3], "GET")] and not health.is_up(URLS[3]) and feed.published == []


async def test_an_old_record_of_a_replica_that_answers_is_cleared_at_first_use() -> None:
    upstream, feed = Replicas(), Feed()
    health = ReplicaHealth(upstream, check_seconds=60, clock=lambda: 7.0, feed=feed)
    health.apply(ReplicaState(URLS[3], False, 5.0, "gw-gone"))
    health.pick(_backend(), "s")
    await asyncio.sleep(0.01)
    assert health.is_up(URLS[3])
    assert feed.published == [ReplicaState(URLS[3], True, 7.0)]  # up for every instance


async def test_periodic_checks_confirm_the_replicas_still_down() -> None:
    upstream, feed = Replicas(), Feed()
    health = ReplicaHealth(upstream, check_seconds=0.01, feed=feed)
    upstream.down.add(URLS[1])
    health.apply(ReplicaState(URLS[1], False, 5.0, "gw-b"))
    health.pick(_backend(), "s")
    await asyncio.sleep(0.1)
    assert feed.confirmed and all(urls == (URLS[1],) for urls in feed.confirmed)
    assert health.down() == (URLS[1],) and feed.published == []


async def test_a_replica_found_down_here_stays_down_until_its_own_check_answers() -> None:
    upstream, feed = Replicas(), Feed()
    health = ReplicaHealth(upstream, check_seconds=60, clock=lambda: 9.0, feed=feed)
    health.pick(_backend(), "s")
    upstream.down.add(URLS[0])  # unreachable from here, reachable from another instance
    with pytest.raises(ReplicaUnreachable):
        await health.send(_backend(), URLS[0], "POST", [], timeout=1)
    health.apply(ReplicaState(URLS[0], True, 10.0, "gw-b"))
    assert not health.is_up(URLS[0])
    upstream.down.clear()
    await health.check(URLS[0])
    assert health.is_up(URLS[0])
    assert feed.published == [ReplicaState(URLS[0], False, 9.0), ReplicaState(URLS[0], True, 9.0)]
