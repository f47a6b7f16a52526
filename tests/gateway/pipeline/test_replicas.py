from collections import Counter
from typing import Any

import pytest

from apps.gateway.pipeline.ports import ReplicaUnreachable, UpstreamUnavailable
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

    async def send(self, backend: BackendView, replica: str, method: str, headers: Any, body: bytes = b"", *, timeout: float) -> _Reply:
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
