"""The `RateLimiter` port on Redis: GCRA (generic cell rate algorithm), every limit of a call checked
and charged in one Lua script, so any number of gateway instances together never admit more than a
limit allows. Time is Redis's own clock, the same for every instance.

A limit of L calls per W seconds lets a burst of L through at once and then one every W/L seconds;
each bucket is one Redis string (its "theoretical arrival time") that expires when it is full again."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import redis
import redis.asyncio

from apps.gateway.pipeline.ports import Admission
from apps.gateway.pipeline.values import Limit

log = logging.getLogger(__name__)

# KEYS: one bucket per limit. ARGV: per limit, how many calls and its window in microseconds; the
# emission interval (window / limit) is a fraction of a microsecond for very high limits, so it is
# not rounded, and arrival times are kept to a thousandth of a microsecond.
# Returns {1} when admitted, else {0, index of the refusing limit (1-based), microseconds to wait}.
_GCRA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local arrivals = {}
for i, key in ipairs(KEYS) do
  local window = tonumber(ARGV[2 * i])
  local interval = window / tonumber(ARGV[2 * i - 1])
  local tat = tonumber(redis.call('GET', key) or '0')
  if tat < now then tat = now end
  local wait = tat + interval - window - now
  if wait > 0 then return {0, i, math.ceil(wait)} end
  arrivals[i] = tat + interval
end
for i, key in ipairs(KEYS) do
  redis.call('SET', key, string.format('%.3f', arrivals[i]), 'PX', math.ceil((arrivals[i] - now) / 1000) + 1)
end
return {1}
"""


def bucket_key(limit: Limit) -> str:
    return f"gw:rl:{limit.tenant_id}:{limit.scope}:{limit.name}"


class RedisRateLimiter:
    """`fail_open`: when Redis cannot be reached, admit (True, the default) or refuse; either way the
    admission says it was not checked. After a failure Redis is left alone for `retry_seconds`, so
    an outage costs calls no connection timeout each."""

    def __init__(self, client: redis.asyncio.Redis, *, fail_open: bool = True, retry_seconds: float = 1.0) -> None:
        self._script = client.register_script(_GCRA)
        self._fail_open = fail_open
        self._retry_seconds = retry_seconds
        self._down_until = 0.0

    async def admit(self, limits: Sequence[Limit]) -> Admission:
        if time.monotonic() < self._down_until:
            return self._unchecked(limits)
        arguments: list[int] = []
        for limit in limits:
            arguments += [limit.limit, limit.window_seconds * 1_000_000]
        try:
            answer = await self._script(keys=[bucket_key(limit) for limit in limits], args=arguments)
        except (redis.RedisError, OSError) as exc:
            log.warning("rate limits unchecked, Redis unreachable (%s); failing %s", exc,
                        "open" if self._fail_open else "closed")
            self._down_until = time.monotonic() + self._retry_seconds
            return self._unchecked(limits)
        if int(answer[0]) == 1:
            return Admission()
        return Admission(refused_by=limits[int(answer[1]) - 1], retry_after=int(answer[2]) / 1_000_000)

    def _unchecked(self, limits: Sequence[Limit]) -> Admission:
        if self._fail_open:
            return Admission(checked=False)
        return Admission(refused_by=limits[0], retry_after=self._retry_seconds, checked=False)
