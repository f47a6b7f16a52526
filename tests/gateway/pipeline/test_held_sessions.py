"""The backend sessions the gateway holds for itself (`backends.HeldSessions`): one `initialize`
for concurrent first users, and a session whose replica went down opened again elsewhere."""

from __future__ import annotations

import asyncio
import itertools

from apps.gateway.pipeline.backends import HeldSessions
from apps.gateway.pipeline.values import BackendSession

REPLICAS = ("http://a/mcp", "http://b/mcp")


def _opener() -> tuple[list[BackendSession], object]:
    opened: list[BackendSession] = []
    replicas = itertools.cycle(REPLICAS)

    async def open_one() -> BackendSession:
        await asyncio.sleep(0.01)  # concurrent callers arrive while it opens
        session = BackendSession(f"s{len(opened)}", "2025-11-25", next(replicas))
        opened.append(session)
        return session

    return opened, open_one


async def test_concurrent_first_users_share_one_opening() -> None:
    held, (opened, open_one) = HeldSessions(), _opener()
    sessions = await asyncio.gather(*(held.get("key", open_one) for _ in range(5)))  # type: ignore[arg-type]
    assert len(opened) == 1 and all(session is opened[0] for session in sessions)


async def test_a_session_on_a_replica_that_went_down_is_opened_again() -> None:
    held, (opened, open_one) = HeldSessions(), _opener()
    down: set[str] = set()
    first = await held.get("key", open_one, is_up=lambda replica: replica not in down)  # type: ignore[arg-type]
    assert await held.get("key", open_one, is_up=lambda replica: replica not in down) is first  # type: ignore[arg-type]
    down.add(first.replica)
    again = await held.get("key", open_one, is_up=lambda replica: replica not in down)  # type: ignore[arg-type]
    assert again is not first and again.replica != first.replica and len(opened) == 2
    # Without `is_up` the held session is kept, whatever its replica.
    assert await held.get("key", open_one) is again  # type: ignore[arg-type]
