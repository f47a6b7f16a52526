from collections import Counter

from apps.gateway.pipeline.mounts import merge_capabilities, pick_replica
from apps.gateway.pipeline.values import BackendView

URLS = tuple(f"http://10.0.0.{i}/mcp" for i in range(1, 5))


def _backend(urls: tuple[str, ...]) -> BackendView:
    return BackendView(id=1, name="b", transport="streamable-http", urls=urls, timeout=5)


def test_a_session_always_lands_on_the_same_replica_and_load_spreads() -> None:
    backend = _backend(URLS)
    picks = {f"s{i}": pick_replica(backend, f"s{i}") for i in range(400)}
    assert all(pick_replica(backend, session) == url for session, url in picks.items())
    assert min(Counter(picks.values()).values()) > 50


def test_removing_a_replica_moves_only_its_sessions() -> None:
    before = {f"s{i}": pick_replica(_backend(URLS), f"s{i}") for i in range(400)}
    after = {s: pick_replica(_backend(URLS[1:]), s) for s in before}
    moved = [s for s in before if before[s] != after[s]]
    assert moved and all(before[s] == URLS[0] for s in moved)


def test_capabilities_are_the_union() -> None:
    merged = merge_capabilities([
        {"tools": {"listChanged": False}, "logging": {}},
        {"tools": {"listChanged": True}, "resources": {"subscribe": True}},
    ])
    assert merged == {"tools": {"listChanged": True}, "logging": {}, "resources": {"subscribe": True}}
