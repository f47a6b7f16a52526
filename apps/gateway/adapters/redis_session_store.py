"""Downstream legacy sessions (docs/sessions.md): ids minted here, state in Redis, a short
in-process cache in front.

A session id is `<instance>.<random>.<tag>`: 144 random bits, the minting instance as an owner
hint, and an HMAC tag under a key derived once at start-up — checking an id is one hash, and an
id no gateway minted is refused before any lookup.

Every key is safe on a Redis Cluster (docs/scale.md): a session is one hash under its own hash tag
(its state, its last use, its backend sessions), so that reading, renewing and taking it are each
one script on one slot; a tenant's indexes share the tenant's tag; the idle index is split in
`IDLE_BUCKETS` buckets, each a tag of its own, so that no one node holds every session's entry. The
session's hash decides whether it is usable; the indexes are kept up to date beside it (moved on
after each use) and are only where the console, the per-key cap and the sweep look first."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import hmac
import re
import secrets
import time
import zlib
from collections.abc import Callable

import orjson
import redis
import redis.asyncio

from apps.gateway.pipeline.metrics import Counters
from apps.gateway.pipeline.ports import SessionLimitReached, StoreUnavailable
from apps.gateway.pipeline.values import BackendSession, SessionState

#: One hash per session: `state` (JSON), `used` (unix time of its last use), `taken` (once a sweep
#: took it) and `b:<map key>` per backend session — instances that open two of them at once never
#: overwrite each other's.
_SESSION = "gw:session:{{{}}}"
_CLAIM = "gw:session:{{{}}}:claim:{}"
#: The idle index's buckets (sessions by the time of their last use, what an idle expiry sweep
#: reads): `<prefix>:{<n>}`. Sixteen spread its writes over a cluster's nodes; a sweep reads each.
IDLE_INDEX = "gw:session-idle"
IDLE_BUCKETS = 16
#: Each tenant's sessions by the time of their last use: what the console lists and counts, a page
#: at a time (only those used within their idle expiry). Added on create, moved on after each use
#: that renews the session; removed by `delete` and by the sweep when it takes a session. Entries of
#: sessions Redis dropped unswept are trimmed by age (when the tenant's next session is created, and
#: when the console lists them), and the whole index expires when none of its sessions is used.
TENANT_INDEX = "gw:sessions:{{t{}}}"
#: Each key's sessions by the time of their last use (same tag as its tenant's index): what the
#: per-key cap counts when a session is created. Entries idle past the expiry are dropped there
#: before counting, so a session frees its slot the moment clients can no longer use it, whether or
#: not a sweep has taken it yet.
KEY_INDEX = "gw:sessions:{{t{}}}:key:{}"
#: How long a session's state outlives its idle expiry, so a sweep can still close its backend
#: sessions; past that Redis drops it anyway (no instance swept: the backends time them out).
_GRACE_SECONDS = 600
#: Read a session and push its idle expiry forward; nothing for a session idle past its expiry or
#: already taken by a sweep (being closed). KEYS: the session; ARGV: now, ttl, key ttl.
_TOUCH = """
local used = redis.call('HGET', KEYS[1], 'used')
if not used or tonumber(used) < tonumber(ARGV[1]) - tonumber(ARGV[2]) then return false end
if redis.call('HEXISTS', KEYS[1], 'taken') == 1 then return false end
redis.call('HSET', KEYS[1], 'used', ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return redis.call('HGETALL', KEYS[1])
"""
#: Create a session unless its id exists (1 created, 0 not). KEYS: the session; ARGV: state, now, key ttl.
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'used', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
"""
#: Enter a new session in its tenant's and key's indexes unless the key already holds `cap` usable
#: sessions (0: no cap): the count and the entry are one step, so instances creating sessions of one
#: key at once never overshoot. Returns 1, or -1 at the cap. KEYS: tenant index, key index; ARGV: id,
#: now, ttl, key ttl, cap.
_ENTER = """
local now, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. (now - ttl))
local cap = tonumber(ARGV[5])
if cap > 0 and redis.call('ZCARD', KEYS[2]) >= cap then return -1 end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - tonumber(ARGV[4])))
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZADD', KEYS[2], now, ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[4])
return 1
"""
#: Replace the state of a session that exists and was not taken. KEYS: the session; ARGV: state,
#: now, key ttl.
_UPDATE = """
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'taken') == 1 then return 0 end
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'used', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
"""
#: Record one backend session of a session that still exists. KEYS: the session; ARGV: field,
#: backend session, key ttl.
_SAVE_BACKEND = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
"""
#: Take a session idle past its expiry for closing: its fields, or false when Redis already dropped
#: it, or {used} when it was used meanwhile (the idle index was behind). KEYS: the session; ARGV: now, ttl.
_TAKE = """
local used = redis.call('HGET', KEYS[1], 'used')
if not used then return false end
if tonumber(used) >= tonumber(ARGV[1]) - tonumber(ARGV[2]) then return {used} end
redis.call('HSET', KEYS[1], 'taken', '1')
return redis.call('HGETALL', KEYS[1])
"""
#: How many sessions a sweep takes at once (one script each, in parallel).
_TAKE_AT_ONCE = 16
_INSTANCE_SAFE = re.compile(r"[^A-Za-z0-9-]")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def idle_buckets(prefix: str = IDLE_INDEX) -> list[str]:
    """The keys of the idle index's buckets."""
    return [f"{prefix}:{{{n}}}" for n in range(IDLE_BUCKETS)]


def _bucket(prefix: str, session_id: str) -> str:
    return f"{prefix}:{{{zlib.crc32(session_id.encode()) % IDLE_BUCKETS}}}"


class RedisSessionStore:
    def __init__(
        self,
        client: redis.asyncio.Redis,
        *,
        secret: str,
        instance: str,
        ttl_seconds: int,
        cache_seconds: float = 5.0,
        clock: Callable[[], float] = time.time,
        idle_index: str = IDLE_INDEX,
        counters: Counters | None = None,
        max_sessions_per_key: int = 0,
    ) -> None:
        """`max_sessions_per_key`: how many usable sessions one key (of one tenant) may hold at
        once, across every instance; 0: no cap. `idle_index`: the prefix of the idle index's buckets."""
        self._counters = counters or Counters()
        self._max_per_key = max(0, max_sessions_per_key)
        self._redis = client
        self._key = hashlib.sha256(b"mcp-gateway session ids|" + secret.encode()).digest()
        self._instance = _INSTANCE_SAFE.sub("-", instance)[:32] or "gw"
        self._ttl = ttl_seconds
        self._cache_seconds = cache_seconds
        self._cache: dict[str, tuple[SessionState, float]] = {}
        self._touch = client.register_script(_TOUCH)
        self._create = client.register_script(_CREATE)
        self._enter = client.register_script(_ENTER)
        self._update = client.register_script(_UPDATE)
        self._save_backend = client.register_script(_SAVE_BACKEND)
        self._take = client.register_script(_TAKE)
        self._clock = clock  # wall time: instances compare each other's idle times
        self._idle = idle_index

    def _tag(self, body: str) -> str:
        return _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest()[:16])

    def new_id(self) -> str:
        body = f"{self._instance}.{_b64(secrets.token_bytes(18))}"
        return f"{body}.{self._tag(body)}"

    def is_well_formed(self, session_id: str) -> bool:
        if not session_id.isascii() or len(session_id) >= 200:
            return False
        body, _, tag = session_id.rpartition(".")
        return bool(body) and hmac.compare_digest(tag, self._tag(body))

    async def save(self, state: SessionState, *, create: bool) -> bool:
        """Raises SessionLimitReached when `create` finds the state's key at its session cap."""
        # Backend sessions are stored one by one (`save_backend`), never with the state.
        payload = orjson.dumps({**dataclasses.asdict(state), "backends": {}})
        now = self._clock()
        session = _SESSION.format(state.id)
        key_ttl = self._ttl + _GRACE_SECONDS
        try:
            if create:
                stored = await self._create(keys=[session], args=[payload, now, key_ttl]) == 1
                if stored:
                    entered = await self._enter(
                        keys=[TENANT_INDEX.format(state.tenant_id), KEY_INDEX.format(state.tenant_id, state.key_id)],
                        args=[state.id, now, self._ttl, key_ttl, self._max_per_key],
                    )
                    if entered == -1:
                        await self._redis.delete(session)
                        raise SessionLimitReached(self._max_per_key)
                    await self._redis.zadd(_bucket(self._idle, state.id), {state.id: now})
            else:
                stored = await self._update(keys=[session], args=[payload, now, key_ttl]) == 1
                if stored:
                    await self._indexes_move(state.id, state.tenant_id, state.key_id, now)
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(type(exc).__name__) from None
        if not stored:
            self._cache.pop(state.id, None)
            return False
        self._cache[state.id] = (state, time.monotonic())
        return True

    async def _indexes_move(self, session_id: str, tenant_id: int, key_id: int | None, now: float) -> None:
        """Move a session just used up its indexes (XX: never re-entering one it left)."""
        key_ttl = self._ttl + _GRACE_SECONDS
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.zadd(_bucket(self._idle, session_id), {session_id: now}, xx=True)
            pipe.zadd(TENANT_INDEX.format(tenant_id), {session_id: now}, xx=True)
            pipe.expire(TENANT_INDEX.format(tenant_id), key_ttl)
            if key_id is not None:
                pipe.zadd(KEY_INDEX.format(tenant_id, key_id), {session_id: now}, xx=True)
                pipe.expire(KEY_INDEX.format(tenant_id, key_id), key_ttl)
            await pipe.execute()

    async def load(
        self, session_id: str, *, tenant_id: int, key_id: int | None = None, fresh: bool = False
    ) -> SessionState | None:
        cached = self._cache.get(session_id)
        now = time.monotonic()
        if cached is not None and not fresh and now - cached[1] < self._cache_seconds:
            self._counters.increment("cache", cache="session", result="hit")
            return cached[0]
        self._counters.increment("cache", cache="session", result="miss")
        used = self._clock()
        try:
            found = await self._touch(
                keys=[_SESSION.format(session_id)], args=[used, self._ttl, self._ttl + _GRACE_SECONDS])
            if found:
                # The tenant's and key's indexes named are the caller's: an id presented under
                # another tenant is not in them, and XX keeps it out.
                await self._indexes_move(session_id, tenant_id, key_id, used)
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(type(exc).__name__) from None
        if not found:
            self._cache.pop(session_id, None)
            return None
        state = _decode(_fields(found))
        if len(self._cache) > 100_000:
            self._cache.clear()  # crude bound; entries are cheap to reload
        self._cache[session_id] = (state, now)
        return state

    async def save_backend(self, session_id: str, map_key: str, session: BackendSession) -> bool:
        try:
            stored = await self._save_backend(
                keys=[_SESSION.format(session_id)],
                args=[f"b:{map_key}", orjson.dumps(dataclasses.asdict(session)), self._ttl + _GRACE_SECONDS],
            )
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(type(exc).__name__) from None
        cached = self._cache.get(session_id)
        if not stored:
            self._cache.pop(session_id, None)
        elif cached is not None:
            cached[0].backends[map_key] = session
        return bool(stored)

    async def claim(self, session_id: str, part: str, *, seconds: float) -> bool:
        try:
            return bool(await self._redis.set(_CLAIM.format(session_id, part), b"1", nx=True, px=int(seconds * 1000)))
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(type(exc).__name__) from None

    async def release(self, session_id: str, part: str) -> None:
        try:
            await self._redis.delete(_CLAIM.format(session_id, part))
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(type(exc).__name__) from None

    async def delete(self, session_id: str) -> None:
        """Forget a session: its state, backend sessions and index entries. Two round trips (its
        tenant and key first, from its state), plain commands: every key is named, whatever slot
        it lives in. Without its state its tenant's index entry is left to be trimmed by age."""
        self._cache.pop(session_id, None)
        try:
            payload = await self._redis.hget(_SESSION.format(session_id), "state")
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.delete(_SESSION.format(session_id))
                pipe.zrem(_bucket(self._idle, session_id), session_id)
                if payload is not None:
                    _forget(pipe, session_id, orjson.loads(payload))
                await pipe.execute()
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(type(exc).__name__) from None

    async def take_expired(self, *, limit: int = 100) -> list[SessionState]:
        """Sessions idle for longer than the expiry, each handed to one caller across all instances
        (removing it from its idle bucket is the claim; marking its hash taken makes it unusable
        for clients, and a session used meanwhile goes back to its bucket). A taken session leaves
        its tenant's index at once (it is no longer listed); its state stays until `delete`."""
        now = self._clock()
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for bucket in idle_buckets(self._idle):
                    pipe.zrangebyscore(bucket, 0, now - self._ttl, start=0, num=limit)
                found = await pipe.execute()
            ids = [raw.decode() if isinstance(raw, bytes) else raw for ids in found for raw in ids][:limit]
            if not ids:
                return []
            async with self._redis.pipeline(transaction=False) as pipe:
                for session_id in ids:
                    pipe.zrem(_bucket(self._idle, session_id), session_id)
                claimed = [session_id for session_id, won in zip(ids, await pipe.execute(), strict=True) if won]
            answers: list[object] = []
            for start in range(0, len(claimed), _TAKE_AT_ONCE):
                answers += await asyncio.gather(*(
                    self._take(keys=[_SESSION.format(session_id)], args=[now, self._ttl])
                    for session_id in claimed[start : start + _TAKE_AT_ONCE]
                ))
            taken: list[SessionState] = []
            async with self._redis.pipeline(transaction=False) as pipe:
                for session_id, answer in zip(claimed, answers, strict=True):
                    self._cache.pop(session_id, None)
                    if not answer:
                        continue  # Redis dropped it: its tenant's index entry is trimmed by age
                    if len(answer) == 1:  # used meanwhile: back in its bucket
                        pipe.zadd(_bucket(self._idle, session_id), {session_id: float(answer[0])})
                        continue
                    state = _decode(_fields(answer))
                    _forget(pipe, session_id, {"tenant_id": state.tenant_id, "key_id": state.key_id})
                    taken.append(state)
                await pipe.execute()
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(type(exc).__name__) from None
        return taken


def _forget(pipe: redis.asyncio.client.Pipeline, session_id: str, state: dict[str, object]) -> None:
    pipe.zrem(TENANT_INDEX.format(state["tenant_id"]), session_id)
    pipe.zrem(KEY_INDEX.format(state["tenant_id"], state["key_id"]), session_id)


def _fields(flat: list[bytes]) -> dict[bytes, bytes]:
    return dict(zip(flat[::2], flat[1::2], strict=True))


def _decode(fields: dict[bytes, bytes]) -> SessionState:
    """A session's state from its hash's fields."""
    data = orjson.loads(fields[b"state"])
    data["backends"] = {
        key[2:].decode(): BackendSession(**orjson.loads(value)) for key, value in fields.items() if key.startswith(b"b:")
    }
    return SessionState(**data)


@dataclasses.dataclass(frozen=True)
class ActiveSession:
    """A session as the console lists it: its state and its seconds since last use."""

    state: SessionState
    idle_seconds: float

    @property
    def instance(self) -> str:
        """The instance that minted the id (its first part): an owner hint, not a binding."""
        return self.state.id.split(".", 1)[0]


def session_count(
    client: redis.Redis, *, tenant_id: int, ttl_seconds: int, clock: Callable[[], float] = time.time
) -> int:
    """How many sessions of the tenant are usable (used within their idle expiry): one round trip."""
    return int(client.zcount(TENANT_INDEX.format(tenant_id), clock() - ttl_seconds, "+inf"))


def sessions_usable_count(pipe: redis.client.Pipeline, *, now: float, ttl_seconds: int) -> int:
    """Queue on `pipe` the counts whose sum (the next `IDLE_BUCKETS` answers) is how many
    sessions of every tenant are usable; returns how many answers that is."""
    for bucket in idle_buckets():
        pipe.zcount(bucket, now - ttl_seconds, "+inf")
    return IDLE_BUCKETS


def session_list(
    client: redis.Redis, *, tenant_id: int, ttl_seconds: int, offset: int = 0, limit: int = 50,
    clock: Callable[[], float] = time.time,
) -> tuple[list[ActiveSession], int]:
    """One page of a tenant's usable sessions (used within their idle expiry, as `load` serves
    them), most recently used first, and how many there are: two round trips, whatever the
    tenant's number of sessions (the page and the count from the tenant index, then the page's
    states). A session whose state is gone meanwhile (deleted, or evicted) is left off its page
    and out of the index; entries long past their expiry (left by a sweep that died half-way) are
    trimmed, with a margin for instances whose clocks run behind."""
    index = TENANT_INDEX.format(tenant_id)
    cutoff = clock() - ttl_seconds
    with client.pipeline(transaction=False) as pipe:
        pipe.zrevrangebyscore(index, "+inf", cutoff, start=offset, num=limit, withscores=True)
        pipe.zcount(index, cutoff, "+inf")
        pipe.zremrangebyscore(index, "-inf", f"({cutoff - _GRACE_SECONDS}")
        entries, total, _ = pipe.execute()
    if not entries:
        return [], total
    ids = [raw.decode() if isinstance(raw, bytes) else raw for raw, _ in entries]
    with client.pipeline(transaction=False) as pipe:
        for session_id in ids:
            pipe.hgetall(_SESSION.format(session_id))
        found = pipe.execute()
    now = clock()
    sessions: list[ActiveSession] = []
    gone: list[str] = []
    for session_id, fields in zip(ids, found, strict=True):
        if b"state" not in fields or b"taken" in fields:
            gone.append(session_id)
            continue
        sessions.append(ActiveSession(_decode(fields), max(0.0, now - float(fields[b"used"]))))
    if gone:
        client.zrem(index, *gone)
    return sessions, max(0, total - len(gone))
