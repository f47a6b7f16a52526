"""Per-backend concurrency gates: slots, the queue in arrival order, the queue timeout, a limit
changed by new configuration, and waiters that give up."""

from __future__ import annotations

import asyncio

import pytest

from apps.gateway.pipeline.concurrency import BackendBusy, BackendGates
from apps.gateway.pipeline.values import BackendView


def backend(limit: int, backend_id: int = 1) -> BackendView:
    return BackendView(id=backend_id, name="slow", transport="streamable-http", urls=("http://x/mcp",), timeout=5.0,
                       max_concurrency=limit)


async def test_a_backend_without_a_limit_takes_no_slot() -> None:
    gates = BackendGates(queue_seconds=0.01)
    assert await gates.enter(backend(0)) is None


async def test_calls_over_the_limit_wait_their_turn_in_arrival_order() -> None:
    gates = BackendGates(queue_seconds=5.0)
    two = backend(2)
    first, second = await gates.enter(two), await gates.enter(two)
    assert first is second is not None and first.active == 2
    admitted: list[int] = []

    async def call(n: int) -> None:
        gate = await gates.enter(two)
        admitted.append(n)
        assert gate is not None
        gate.leave()

    waiting = [asyncio.ensure_future(call(n)) for n in (3, 4)]
    await asyncio.sleep(0.01)
    assert admitted == [] and first.waiting == 2
    first.leave()
    await asyncio.sleep(0.01)
    assert admitted[0] == 3
    second.leave()
    await asyncio.gather(*waiting)
    assert admitted == [3, 4] and first.active == 0 and first.waiting == 0


async def test_a_call_that_gets_no_slot_within_the_queue_time_is_refused_clearly() -> None:
    gates = BackendGates(queue_seconds=0.05)
    one = backend(1)
    held = await gates.enter(one)
    with pytest.raises(BackendBusy, match=r"backend busy: 1 calls .* this gateway instance .* within 0.05 s"):
        await gates.enter(one)
    assert held is not None and held.waiting == 0 and held.active == 1
    held.leave()
    assert await gates.enter(one) is held  # the slot is free again


async def test_a_waiter_that_is_cancelled_leaves_the_queue_and_takes_no_slot() -> None:
    gates = BackendGates(queue_seconds=5.0)
    one = backend(1)
    held = await gates.enter(one)
    assert held is not None
    waiter = asyncio.ensure_future(gates.enter(one))
    await asyncio.sleep(0.01)
    waiter.cancel()
    await asyncio.sleep(0)
    assert held.waiting == 0
    held.leave()
    assert held.active == 0


async def test_a_raised_limit_lets_waiters_in_and_a_lowered_one_lets_no_new_call_in() -> None:
    gates = BackendGates(queue_seconds=0.05)
    held = await gates.enter(backend(1))
    assert held is not None
    waiter = asyncio.ensure_future(gates.enter(backend(1)))
    await asyncio.sleep(0.01)
    assert held.waiting == 1
    third = asyncio.ensure_future(gates.enter(backend(2)))  # new configuration: 2 at once
    assert await waiter is held and held.active == 2
    with pytest.raises(BackendBusy):
        await third  # both slots are taken
    held.leave()
    with pytest.raises(BackendBusy):
        await gates.enter(backend(1))  # lowered to 1: the call still running fills it
    held.leave()
    assert held.active == 0 and await gates.enter(backend(1)) is held


async def test_backends_have_separate_gates() -> None:
    gates = BackendGates(queue_seconds=0.01)
    a = await gates.enter(backend(1, backend_id=1))
    b = await gates.enter(backend(1, backend_id=2))
    assert a is not None and b is not None and a is not b
