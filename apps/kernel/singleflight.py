"""Concurrent requests for the same missing thing share one fetch instead of each starting their own."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class SingleFlight(Generic[T]):
    def __init__(self) -> None:
        self._pending: dict[Hashable, asyncio.Future[T]] = {}

    async def run(self, key: Hashable, fetch: Callable[[], Awaitable[T]]) -> T:
        """`fetch()`'s result; callers arriving while it runs get the same result or exception.

        The fetch runs in a task of its own: a caller that is cancelled (its client went away)
        stops waiting, but neither cancels the fetch nor the other callers."""
        pending = self._pending.get(key)
        if pending is None:
            pending = asyncio.ensure_future(fetch())
            self._pending[key] = pending
            pending.add_done_callback(lambda done: self._forget(key, done))
        return await asyncio.shield(pending)

    def _forget(self, key: Hashable, done: asyncio.Future[T]) -> None:
        if self._pending.get(key) is done:
            del self._pending[key]
        if not done.cancelled():
            done.exception()  # retrieved, so an error nobody waited for is not reported as lost
