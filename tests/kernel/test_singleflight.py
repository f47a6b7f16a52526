import asyncio

import pytest

from apps.kernel.singleflight import SingleFlight


async def test_concurrent_callers_share_one_fetch() -> None:
    flights: SingleFlight[int] = SingleFlight()
    calls = 0

    async def fetch() -> int:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.01)
        return 42

    assert await asyncio.gather(*(flights.run("k", fetch) for _ in range(5))) == [42] * 5
    assert calls == 1
    assert await flights.run("k", fetch) == 42 and calls == 2  # a finished flight is not a cache


async def test_a_cancelled_caller_does_not_cancel_the_others() -> None:
    flights: SingleFlight[str] = SingleFlight()
    release = asyncio.Event()

    async def fetch() -> str:
        await release.wait()
        return "done"

    first = asyncio.ensure_future(flights.run("k", fetch))
    second = asyncio.ensure_future(flights.run("k", fetch))
    await asyncio.sleep(0)
    first.cancel()
    await asyncio.sleep(0)
    release.set()
    assert await second == "done"
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_errors_reach_every_caller() -> None:
    flights: SingleFlight[None] = SingleFlight()

    async def fetch() -> None:
        await asyncio.sleep(0.01)
        raise ValueError("boom")

    results = await asyncio.gather(*(flights.run("k", fetch) for _ in range(3)), return_exceptions=True)
    assert all(isinstance(r, ValueError) for r in results)
