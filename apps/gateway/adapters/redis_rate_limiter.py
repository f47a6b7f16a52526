"""The `RateLimiter` port on Redis: rate limits (GCRA, the generic cell rate algorithm) and budgets
(cost units per UTC day and month), every limit and budget of a call checked and charged in one Lua
script — one round trip — so any number of gateway instances together never admit more than a limit
or a budget allows. Time is Redis's own clock, the same for every instance.

A rate limit of L calls per W seconds lets a burst of L through at once and then one every W/L
seconds; each bucket is one Redis string (its "theoretical arrival time") that expires when it is
full again. A budget is one Redis hash per key, team or token subject: the UTC day and month it last
spent in and what it spent in each; a new day or month starts from zero, so nothing has to reset
them, and the hash expires after its month.

Every routed call under a limit or a budget makes this one round trip, so it is sent lean: all
numbers in one argument, over connections of the limiter's own (`_Lane`).

Limits are checked again the moment Redis answers after an outage: a kept connection that turns out
broken (Redis restarted under it) is dropped with every other kept one and the call retried once on a
fresh connection, and while Redis is unreachable one background probe reconnects every
`probe_seconds`, so calls never wait for it and none is admitted unchecked once it is back."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Sequence
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.connection
import redis.exceptions

from apps.gateway.pipeline.ports import Admission
from apps.kernel.identity import Budget, Limit
from apps.policies.counters import bucket_key, budget_key

log = logging.getLogger(__name__)

# ARGV[1]: whole numbers separated by commas (one argument: encoding each number as an argument of
# its own cost more than the script): the time in microseconds, or 0 for Redis's own clock (tests
# pass one to cross periods); how many KEYS are rate-limit buckets (n); the call's cost in budget
# units. Then per rate limit its calls and its window in microseconds; the emission interval
# (window / calls) is a fraction of a microsecond for very high limits, so it is not rounded, and
# arrival times are kept to a thousandth of a microsecond. Then per budget its daily and monthly
# cap (-1: none). KEYS: the n buckets, then one hash per budget: d/du (UTC day number, units spent that day)
# and m/mu (the month, as the day number it starts on, and units spent that month). Both periods
# are always counted, so a cap added mid-month sees the month's spending.
# Returns {1} when admitted, else {0, index of the refusing KEY (1-based), microseconds to wait,
# 0 (a rate limit) | 1 (a daily cap) | 2 (a monthly cap)}.
_ADMIT = """
local a = {}
for v in string.gmatch(ARGV[1], '[^,]+') do a[#a + 1] = tonumber(v) end
local now, n, cost = a[1], a[2], a[3]
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local arrivals = {}
for i = 1, n do
  local calls, window = a[2 + 2 * i], a[3 + 2 * i]
  local interval = window / calls
  local tat = tonumber(redis.call('GET', KEYS[i]) or '0')
  if tat < now then tat = now end
  local wait = tat + interval - window - now
  if wait > 0 then return {0, i, math.ceil(wait), 0} end
  arrivals[i] = tat + interval
end
local spent = {}
if #KEYS > n then
  local DAY = 86400000000
  -- The first day of the UTC month holding `d` (days since 1970-01-01), after H. Hinnant's
  -- civil_from_days: `doy` counts from March 1st, so February's leap day is the year's last.
  local function month_of(d)
    local z = d + 719468
    local era = math.floor(z / 146097)
    local doe = z - era * 146097
    local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
    local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
    return d - doy + math.floor((153 * math.floor((5 * doy + 2) / 153) + 2) / 5)
  end
  local day = math.floor(now / DAY)
  local month = month_of(day)
  local day_end, month_end = (day + 1) * DAY, month_of(month + 31) * DAY
  for j = n + 1, #KEYS do
    local daily, monthly = a[2 * j + 2], a[2 * j + 3]
    local state = redis.call('HMGET', KEYS[j], 'd', 'du', 'm', 'mu')
    local du, mu = 0, 0
    if tonumber(state[1]) == day then du = tonumber(state[2]) end
    if tonumber(state[3]) == month then mu = tonumber(state[4]) end
    -- A spent month outlasts a spent day: the call cannot pass before the later reset.
    if monthly >= 0 and mu + cost > monthly then return {0, j, month_end - now, 2} end
    if daily >= 0 and du + cost > daily then return {0, j, day_end - now, 1} end
    spent[j] = {day, du + cost, month, mu + cost, math.ceil((month_end - now) / 1000) + 3600000}
  end
end
for i = 1, n do
  redis.call('SET', KEYS[i], string.format('%.3f', arrivals[i]), 'PX', math.ceil((arrivals[i] - now) / 1000) + 1)
end
for j = n + 1, #KEYS do
  local s = spent[j]
  redis.call('HSET', KEYS[j], 'd', s[1], 'du', s[2], 'm', s[3], 'mu', s[4])
  redis.call('PEXPIRE', KEYS[j], s[5])
end
return {1}
"""
_ADMIT_SHA = hashlib.sha1(_ADMIT.encode()).hexdigest().encode()
_PERIODS = {1: "day", 2: "month"}


class _ClusterLane:
    """On a Redis Cluster: the client's own path, which routes each command to the node serving its
    keys' slot (a call's counters share their tenant's tag: one slot) and follows the cluster
    through resharding and failover."""

    def __init__(self, client: redis.asyncio.RedisCluster) -> None:
        self._client = client

    async def send(self, command: bytes, parts: Sequence[bytes]) -> Any:
        name, *rest = parts
        return await self._client.execute_command(name.decode(), *rest)  # the client looks its name up


class _Lane:
    """Connections taken from the client's pool (so made like its others: address, database,
    password, TLS, timeouts, and closed with it) and kept by the limiter, each sending one command
    at a time — without the client's per-command path (pool bookkeeping, argument encoding,
    retries), which costs about twice the CPU of the exchange itself (BENCHMARKS.md, policy path).

    A kept connection is not checked before use (that would be a system call per command). One that
    fails to carry a command was most likely cut by a Redis restart, and so were the others kept
    beside it: all of them are dropped and the command is sent once more on a connection the pool
    checks and opens afresh. Only a connection error is retried so: after a timeout the command may
    have run, and sending it again could charge a call twice."""

    _IDLE_MAX = 64

    def __init__(self, client: redis.asyncio.Redis) -> None:
        self._pool = client.connection_pool
        self._idle: list[redis.asyncio.connection.AbstractConnection] = []

    async def send(self, command: bytes, parts: Sequence[bytes] = ()) -> Any:
        """`command`, packed in the Redis protocol (`parts` unpacked: what a cluster lane sends)."""
        if self._idle:
            try:
                return await self._exchange(self._idle.pop(), command)
            except (redis.ConnectionError, OSError):
                await self._drop_idle()
        return await self._exchange(await self._pool.get_connection(), command)

    async def _exchange(self, connection: redis.asyncio.connection.AbstractConnection, command: bytes) -> Any:
        try:
            await connection.send_packed_command(command, check_health=False)  # reconnects when needed
            answer: Any = await connection.read_response()
        except redis.ResponseError as error:
            answer = error  # an error reply, read whole: the connection is fine
        except BaseException:
            # Cut mid-exchange (cancelled, timed out, broken): a late reply must not answer the
            # next command sent on it.
            await connection.disconnect()
            await self._pool.release(connection)
            raise
        if len(self._idle) < self._IDLE_MAX:
            self._idle.append(connection)
        else:
            await self._pool.release(connection)
        if isinstance(answer, redis.ResponseError):
            raise answer
        return answer

    async def _drop_idle(self) -> None:
        dropped, self._idle = self._idle, []
        for connection in dropped:
            await connection.disconnect()
            await self._pool.release(connection)


_PING = (b"*1\r\n$4\r\nPING\r\n", (b"PING",))


def _packed(keys: Sequence[str], argument: str, *, script: bytes | None = None) -> tuple[bytes, list[bytes]]:
    """EVALSHA of the admission script, in the Redis protocol and as its parts; EVAL of `script` when given."""
    head = [b"EVALSHA", _ADMIT_SHA] if script is None else [b"EVAL", script]
    parts = [*head, str(len(keys)).encode(), *(key.encode() for key in keys), argument.encode()]
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(part), part) for part in parts), parts


class RedisRateLimiter:
    """`fail_open`: when Redis cannot be reached, admit (True, the default) or refuse (saying to
    retry after `retry_seconds`); either way the admission says it was not checked. While Redis is
    unreachable calls do not try it (an outage costs them no connection timeout each): one probe
    tries every `probe_seconds`, and the first answer puts every call back on Redis."""

    def __init__(
        self, client: redis.asyncio.Redis, *, fail_open: bool = True, retry_seconds: float = 1.0,
        probe_seconds: float = 0.05,
    ) -> None:
        self._client = client
        self._lane = _ClusterLane(client) if isinstance(client, redis.asyncio.RedisCluster) else _Lane(client)
        self._fail_open = fail_open
        self._retry_seconds = retry_seconds
        self._probe_seconds = probe_seconds
        self._probe: asyncio.Task[None] | None = None  # running while Redis is unreachable

    async def admit(
        self, limits: Sequence[Limit], budgets: Sequence[Budget] = (), cost: int = 1, *, now: float | None = None
    ) -> Admission:
        """See the port. `now` (unix seconds) replaces Redis's clock: for tests that cross a day
        or a month."""
        if self._probe is not None:
            return self._unchecked(limits, budgets)
        numbers = [0 if now is None else round(now * 1_000_000), len(limits), cost]
        for limit in limits:
            numbers += [limit.limit, limit.window_seconds * 1_000_000]
        for budget in budgets:
            numbers += [-1 if budget.daily is None else budget.daily, -1 if budget.monthly is None else budget.monthly]
        keys = [bucket_key(limit) for limit in limits] + [budget_key(budget) for budget in budgets]
        argument = ",".join(map(str, numbers))
        try:
            try:
                answer = await self._lane.send(*_packed(keys, argument))
            except redis.exceptions.NoScriptError:  # a Redis restarted or flushed since: EVAL loads it
                answer = await self._lane.send(*_packed(keys, argument, script=_ADMIT.encode()))
        except (redis.RedisError, OSError) as exc:
            self._outage_begin(exc)
            return self._unchecked(limits, budgets)
        if int(answer[0]) == 1:
            return Admission()
        index, wait, period = int(answer[1]) - 1, int(answer[2]) / 1_000_000, int(answer[3])
        if index < len(limits):
            return Admission(refused_by=limits[index], retry_after=wait)
        return Admission(refused_by=budgets[index - len(limits)], retry_after=wait, period=_PERIODS[period])

    def _outage_begin(self, error: BaseException) -> None:
        if self._probe is not None:
            return  # another call of this outage already started the probe
        log.warning(
            "rate limits and budgets unchecked, Redis unreachable (%s); failing %s until it answers",
            error, "open" if self._fail_open else "closed",
        )
        self._probe = asyncio.get_running_loop().create_task(self._probe_until_answered())

    async def _probe_until_answered(self) -> None:
        try:
            while True:
                await asyncio.sleep(self._probe_seconds)
                try:
                    await self._lane.send(*_PING)
                except (redis.RedisError, OSError):
                    continue
                log.warning("rate limits and budgets checked again: Redis answers")
                return
        finally:
            self._probe = None

    def _unchecked(self, limits: Sequence[Limit], budgets: Sequence[Budget]) -> Admission:
        if self._fail_open:
            return Admission(checked=False)
        refused = limits[0] if limits else budgets[0]
        return Admission(refused_by=refused, retry_after=self._retry_seconds, checked=False)
