"""Downstream legacy sessions (docs/sessions.md): ids minted here, state in Redis, a short
in-process cache in front.

A session id is `<instance>.<random>.<tag>`: 144 random bits, the minting instance as an owner
hint, and an HMAC tag under a key derived once at start-up — checking an id is one hash, and an
id no gateway minted is refused before any lookup."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable

import orjson
import redis
import redis.asyncio

from apps.gateway.pipeline.metrics import Counters
from apps.gateway.pipeline.ports import SessionLimitReached, StoreUnavailable
from apps.gateway.pipeline.values import BackendSession, SessionState

_KEY = "gw:session:{}"
#: Its backend sessions, one field per map key: instances that open two of them at once never
#: overwrite each other's.
_BACKENDS = "gw:session-backends:{}"
_CLAIM = "gw:session-claim:{}:{}"
#: Sessions by the time of their last use: what an idle expiry sweep reads.
IDLE_INDEX = "gw:session-idle"
#: Each tenant's sessions by the time of their last use, beside the idle index: what the console
#: lists and counts, a page at a time (only those used within their idle expiry). Added on create,
#: moved on by every read that renews the session; removed by `delete` and by the sweep when it takes
#: a session, even one whose state Redis already dropped.
TENANT_INDEX = "gw:session-tenant:{}"
#: Each key's sessions by the time of their last use (tenant id, key id), moved on with the idle
#: index: what the per-key cap counts when a session is created. Entries idle past the expiry are
#: dropped there before counting, so a session frees its slot the moment clients can no longer
#: use it, whether or not a sweep has taken it yet.
KEY_INDEX = "gw:session-key:{}:{}"
#: Each session's tenant (session id -> tenant id) until a sweep takes it or it is deleted: how the
#: sweep finds a session's tenant index entry when Redis has already dropped its state.
SESSION_TENANTS = "gw:session-tenants"
#: How long a session's state outlives its idle expiry, so a sweep can still close its backend
#: sessions; past that Redis drops it anyway (no instance swept: the backends time them out).
_GRACE_SECONDS = 600
#: Read a session and push its idle expiry forward, in one round trip; nothing for a session idle
#: past its expiry or already taken by a sweep (out of the idle index: being closed), so a session
#: is usable exactly while the idle index holds it within its expiry — what the console lists. The
#: tenant index named is the caller's tenant's: it is moved on only if it holds the session (XX),
#: so an id presented under another tenant never enters that tenant's index.
#: The key index named (when one is) is moved on the same way.
#: KEYS: state, backends, idle index, tenant index[, key index]; ARGV: id, now, ttl, key ttl.
_TOUCH = """
local score = redis.call('ZSCORE', KEYS[3], ARGV[1])
if not score or tonumber(score) < tonumber(ARGV[2]) - tonumber(ARGV[3]) then return false end
local payload = redis.call('GETEX', KEYS[1], 'EX', ARGV[4])
if not payload then return false end
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[4], 'XX', ARGV[2], ARGV[1])
if KEYS[5] then
  redis.call('ZADD', KEYS[5], 'XX', ARGV[2], ARGV[1])
  redis.call('EXPIRE', KEYS[5], ARGV[4])
end
redis.call('EXPIRE', KEYS[2], ARGV[4])
return {payload, redis.call('HGETALL', KEYS[2])}
"""
#: Create a session unless its key already holds `cap` usable ones (0: no cap): the count and the
#: creation are one step, so instances creating sessions of one key at once never overshoot.
#: Returns 1 when created, 0 when the id exists, -1 when the key is at its cap.
#: KEYS: state, idle index, tenant index, session tenants, key index; ARGV: id, now, ttl, key ttl,
#: payload, cap, tenant id.
_CREATE = """
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', '(' .. (tonumber(ARGV[2]) - tonumber(ARGV[3])))
local cap = tonumber(ARGV[6])
if cap > 0 and redis.call('ZCARD', KEYS[5]) >= cap then return -1 end
if not redis.call('SET', KEYS[1], ARGV[5], 'EX', ARGV[4], 'NX') then return 0 end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[4], ARGV[1], ARGV[7])
redis.call('ZADD', KEYS[5], ARGV[2], ARGV[1])
redis.call('EXPIRE', KEYS[5], ARGV[4])
return 1
"""
#: Record one backend session of a session that still exists. KEYS: state, backends; ARGV: map
#: key, backend session, key ttl.
_SAVE_BACKEND = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return 1
"""
_INSTANCE_SAFE = re.compile(r"[^A-Za-z0-9-]")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


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
        once, across every instance; 0: no cap."""
        self._counters = counters or Counters()
        self._max_per_key = max(0, max_sessions_per_key)
        self._redis = client
        self._key = hashlib.sha256(b"mcp-gateway session ids|" + secret.encode()).digest()
        self._instance = _INSTANCE_SAFE.sub("-", instance)[:32] or "gw"
        self._ttl = ttl_seconds
        self._cache_seconds = cache_seconds
        self._cache: dict[str, tuple[SessionState, float]] = {}
        self._touch = client.register_script(_TOUCH)
        self._save_backend = client.register_script(_SAVE_BACKEND)
        self._create = client.register_script(_CREATE)
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
        key_index = KEY_INDEX.format(state.tenant_id, state.key_id)
        now = self._clock()
        try:
            if create:
                created = await self._create(
                    keys=[_KEY.format(state.id), self._idle, TENANT_INDEX.format(state.tenant_id), SESSION_TENANTS,
                          key_index],
                    args=[state.id, now, self._ttl, self._ttl + _GRACE_SECONDS, payload, self._max_per_key,
                          state.tenant_id],
                )
                if created == -1:
                    raise SessionLimitReached(self._max_per_key)
                stored = created == 1
            else:
                async with self._redis.pipeline(transaction=False) as pipe:
                    pipe.set(_KEY.format(state.id), payload, ex=self._ttl + _GRACE_SECONDS, xx=True)
                    pipe.zadd(self._idle, {state.id: now}, xx=True)
                    pipe.zadd(TENANT_INDEX.format(state.tenant_id), {state.id: now}, xx=True)
                    pipe.zadd(key_index, {state.id: now}, xx=True)
                    stored, *_ = await pipe.execute()
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(type(exc).__name__) from None
        if not stored:
            self._cache.pop(state.id, None)
            return False
        self._cache[state.id] = (state, time.monotonic())
        return True

    async def load(
        self, session_id: str, *, tenant_id: int, key_id: int | None = None, fresh: bool = False
    ) -> SessionState | None:
        cached = self._cache.get(session_id)
        now = time.monotonic()
        if cached is not None and not fresh and now - cached[1] < self._cache_seconds:
            self._counters.increment("cache", cache="session", result="hit")
            return cached[0]
        self._counters.increment("cache", cache="session", result="miss")
        try:
            keys = [_KEY.format(session_id), _BACKENDS.format(session_id), self._idle, TENANT_INDEX.format(tenant_id)]
            if key_id is not None:
                keys.append(KEY_INDEX.format(tenant_id, key_id))
            found = await self._touch(
                keys=keys,
                args=[session_id, self._clock(), self._ttl, self._ttl + _GRACE_SECONDS],
            )
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(type(exc).__name__) from None
        if not found:
            self._cache.pop(session_id, None)
            return None
        payload, flat = found
        state = self._decode(payload, dict(zip(flat[::2], flat[1::2], strict=True)))
        if len(self._cache) > 100_000:
            self._cache.clear()  # crude bound; entries are cheap to reload
        self._cache[session_id] = (state, now)
        return state

    async def save_backend(self, session_id: str, map_key: str, session: BackendSession) -> bool:
        try:
            stored = await self._save_backend(
                keys=[_KEY.format(session_id), _BACKENDS.format(session_id)],
                args=[map_key, orjson.dumps(dataclasses.asdict(session)), self._ttl + _GRACE_SECONDS],
            )
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(type(exc).__name__) from None
        cached = self._cache.get(session_id)
        if not stored:
            self._cache.pop(session_id, None)
        elif cached is not None:
            cached[0].backends[map_key] = session
        return bool(stored)

    @staticmethod
    def _decode(payload: bytes, backends: dict[bytes, bytes]) -> SessionState:
        data = orjson.loads(payload)
        data["backends"] = {
            (key.decode() if isinstance(key, bytes) else key): BackendSession(**orjson.loads(value))
            for key, value in backends.items()
        }
        return SessionState(**data)

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
        tenant first), plain commands: every key is named, whatever slot it lives in."""
        self._cache.pop(session_id, None)
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.hget(SESSION_TENANTS, session_id)
                pipe.get(_KEY.format(session_id))
                recorded, payload = await pipe.execute()
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.delete(_KEY.format(session_id))
                pipe.delete(_BACKENDS.format(session_id))
                pipe.zrem(self._idle, session_id)
                self._forget_tenant(pipe, session_id, _tenant_of(recorded, payload))
                self._forget_key(pipe, session_id, payload)
                await pipe.execute()
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(type(exc).__name__) from None

    async def take_expired(self, *, limit: int = 100) -> list[SessionState]:
        """Sessions idle for longer than the expiry, each handed to one caller across all instances
        (removing it from the idle index is the claim). A taken session leaves its tenant's index
        at once (it is no longer listed); its state stays until `delete`. One whose state Redis
        already dropped is forgotten here. At most four round trips, whatever the count."""
        now = self._clock()
        try:
            raw_ids = await self._redis.zrangebyscore(self._idle, 0, now - self._ttl, start=0, num=limit)
            ids = [raw.decode() if isinstance(raw, bytes) else raw for raw in raw_ids]
            if not ids:
                return []
            async with self._redis.pipeline(transaction=False) as pipe:
                for session_id in ids:
                    pipe.zrem(self._idle, session_id)
                claimed = [session_id for session_id, won in zip(ids, await pipe.execute(), strict=True) if won]
            if not claimed:
                return []  # other instances took them
            async with self._redis.pipeline(transaction=False) as pipe:
                for session_id in claimed:
                    pipe.get(_KEY.format(session_id))
                    pipe.hgetall(_BACKENDS.format(session_id))
                    pipe.hget(SESSION_TENANTS, session_id)
                found = await pipe.execute()
            taken: list[SessionState] = []
            async with self._redis.pipeline(transaction=False) as pipe:
                for i, session_id in enumerate(claimed):
                    payload, backends, recorded = found[3 * i : 3 * i + 3]
                    self._cache.pop(session_id, None)
                    self._forget_tenant(pipe, session_id, _tenant_of(recorded, payload))
                    self._forget_key(pipe, session_id, payload)
                    if payload is None:
                        pipe.delete(_BACKENDS.format(session_id))
                    else:
                        taken.append(self._decode(payload, backends))
                await pipe.execute()
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(type(exc).__name__) from None
        return taken

    @staticmethod
    def _forget_tenant(pipe: redis.asyncio.client.Pipeline, session_id: str, tenant_id: str | None) -> None:
        if tenant_id is not None:
            pipe.zrem(TENANT_INDEX.format(tenant_id), session_id)
        pipe.hdel(SESSION_TENANTS, session_id)

    @staticmethod
    def _forget_key(pipe: redis.asyncio.client.Pipeline, session_id: str, payload: bytes | None) -> None:
        # Without its state the session is long past its expiry: the next creation of its key
        # drops the entry by its age anyway.
        if payload is not None:
            data = orjson.loads(payload)
            pipe.zrem(KEY_INDEX.format(data["tenant_id"], data["key_id"]), session_id)


def _tenant_of(recorded: bytes | None, payload: bytes | None) -> str | None:
    """A session's tenant id: as recorded at creation, else (a session opened before it was
    recorded) from its state; None when neither is left."""
    if recorded is not None:
        return recorded.decode()
    if payload is not None:
        return str(orjson.loads(payload)["tenant_id"])
    return None


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
            pipe.get(_KEY.format(session_id))
            pipe.hgetall(_BACKENDS.format(session_id))
        found = pipe.execute()
    now = clock()
    sessions: list[ActiveSession] = []
    gone: list[str] = []
    for i, (session_id, (_, used)) in enumerate(zip(ids, entries, strict=True)):
        payload, backends = found[2 * i], found[2 * i + 1]
        if payload is None:
            gone.append(session_id)
            continue
        sessions.append(ActiveSession(RedisSessionStore._decode(payload, backends), max(0.0, now - used)))
    if gone:
        client.zrem(index, *gone)
    return sessions, max(0, total - len(gone))
