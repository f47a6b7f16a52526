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
        """`fetch()`'s result; callers arriving while it runs get the same result or exception."""
        pending = self._pending.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        try:
            result = await fetch()
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: the waiters get it, nobody else has to
            raise
        finally:
            del self._pending[key]
        future.set_result(result)
        return result
