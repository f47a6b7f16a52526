"""Per-backend concurrency limits: at most `BackendView.max_concurrency` calls forwarded to one
backend at once by this process (over all its replicas); the next ones wait their turn, first come
first served, for at most the queue time, then are refused (`BackendBusy`, -32004).

The count is per gateway instance, not per deployment: N instances let up to N × the limit through."""

from __future__ import annotations

import asyncio
from collections import deque

from apps.gateway.pipeline.values import BackendView


class BackendBusy(Exception):
    """The backend had no free slot within the queue time; the message says why (the reason of a -32004)."""


class Gate:
    """The slots of one backend. `limit` may change while calls hold slots (a new configuration):
    a lower one lets no new call in until enough have left, a higher one lets waiters in at once."""

    __slots__ = ("limit", "active", "_waiters")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.active = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def enter(self, queue_seconds: float) -> None:
        """Take a slot, waiting up to `queue_seconds` for one; TimeoutError when none came."""
        if self.active < self.limit and not self._waiters:
            self.active += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(queue_seconds):
                await waiter  # `leave` hands its slot over: `active` already counts this call
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.leave()  # handed a slot as the wait ended: pass it on
            else:
                waiter.cancel()
                self._waiters.remove(waiter)
            raise

    def leave(self) -> None:
        """Give the slot back, to the longest waiter if there is room for one."""
        self.active -= 1
        self._admit()

    def resize(self, limit: int) -> None:
        if limit != self.limit:
            self.limit = limit
            self._admit()

    def _admit(self) -> None:
        while self._waiters and self.active < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.active += 1
                waiter.set_result(None)

    @property
    def waiting(self) -> int:
        return len(self._waiters)


class BackendGates:
    """One `Gate` per backend (by id), made on a backend's first limited call."""

    def __init__(self, *, queue_seconds: float) -> None:
        self.queue_seconds = queue_seconds
        self._gates: dict[int, Gate] = {}

    async def enter(self, backend: BackendView) -> Gate | None:
        """A slot of `backend`'s gate, to `leave()` once the call is over (None: the backend has no
        limit). Raises BackendBusy when no slot came within the queue time."""
        limit = backend.max_concurrency
        if limit <= 0:
            return None
        gate = self._gates.get(backend.id)
        if gate is None:
            gate = self._gates[backend.id] = Gate(limit)
        else:
            gate.resize(limit)
        try:
            await gate.enter(self.queue_seconds)
        except TimeoutError:
            raise BackendBusy(
                f"backend busy: {gate.limit} calls to it are running on this gateway instance (its limit) "
                f"and none finished within {self.queue_seconds:g} s; try again later"
            ) from None
        return gate
