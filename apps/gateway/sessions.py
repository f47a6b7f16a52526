"""Downstream legacy sessions (ARCHITECTURE §7): ids minted here, state in Redis, a short
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
from apps.gateway.pipeline.ports import StoreUnavailable
from apps.gateway.pipeline.values import BackendSession, SessionState

_KEY = "gw:session:{}"
#: Its backend sessions, one field per map key: instances that open two of them at once never
#: overwrite each other's.
_BACKENDS = "gw:session-backends:{}"
_CLAIM = "gw:session-claim:{}:{}"
#: Sessions by the time of their last use: what an idle expiry sweep reads.
IDLE_INDEX = "gw:session-idle"
#: Each tenant's sessions by the time they were opened: what the console lists. Maintained beside
#: the idle index (added on create, removed on delete); an entry whose state Redis already dropped
#: is skipped and removed by the listing.
TENANT_INDEX = "gw:session-tenant:{}"
#: How long a session's state outlives its idle expiry, so a sweep can still close its backend
#: sessions; past that Redis drops it anyway (no instance swept: the backends time them out).
_GRACE_SECONDS = 600
#: Read a session and push its idle expiry forward, in one round trip; nothing for a session idle
#: past its expiry (a sweep closes it). KEYS: state, backends, idle index; ARGV: id, now, ttl, key ttl.
_TOUCH = """
local score = redis.call('ZSCORE', KEYS[3], ARGV[1])
if score and tonumber(score) < tonumber(ARGV[2]) - tonumber(ARGV[3]) then return false end
local payload = redis.call('GETEX', KEYS[1], 'EX', ARGV[4])
if not payload then return false end
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[4])
return {payload, redis.call('HGETALL', KEYS[2])}
"""
#: Record one backend session of a session that still exists. KEYS: state, backends; ARGV: map
#: key, backend session, key ttl.
_SAVE_BACKEND = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return 1
"""
#: Forget a session: its state, backend sessions, and its entries in the idle and tenant indexes (the
#: tenant is read from the state). KEYS: state, backends, idle index; ARGV: id, tenant index prefix.
_DELETE = """
local payload = redis.call('GET', KEYS[1])
if payload then
  local ok, state = pcall(cjson.decode, payload)
  if ok and state['tenant_id'] then redis.call('ZREM', ARGV[2] .. state['tenant_id'], ARGV[1]) end
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[1])
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
    ) -> None:
        self._counters = counters or Counters()
        self._redis = client
        self._key = hashlib.sha256(b"mcp-gateway session ids|" + secret.encode()).digest()
        self._instance = _INSTANCE_SAFE.sub("-", instance)[:32] or "gw"
        self._ttl = ttl_seconds
        self._cache_seconds = cache_seconds
        self._cache: dict[str, tuple[SessionState, float]] = {}
        self._touch = client.register_script(_TOUCH)
        self._save_backend = client.register_script(_SAVE_BACKEND)
        self._delete = client.register_script(_DELETE)
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
        # Backend sessions are stored one by one (`save_backend`), never with the state.
        payload = orjson.dumps({**dataclasses.asdict(state), "backends": {}})
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.set(_KEY.format(state.id), payload, ex=self._ttl + _GRACE_SECONDS, nx=create, xx=not create)
                pipe.zadd(self._idle, {state.id: self._clock()}, xx=not create)
                if create:
                    pipe.zadd(TENANT_INDEX.format(state.tenant_id), {state.id: self._clock()}, nx=True)
                stored, *_ = await pipe.execute()
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(type(exc).__name__) from None
        if not stored:
            self._cache.pop(state.id, None)
            return False
        self._cache[state.id] = (state, time.monotonic())
        return True

    async def load(self, session_id: str, *, fresh: bool = False) -> SessionState | None:
        cached = self._cache.get(session_id)
        now = time.monotonic()
        if cached is not None and not fresh and now - cached[1] < self._cache_seconds:
            self._counters.increment("cache", cache="session", result="hit")
            return cached[0]
        self._counters.increment("cache", cache="session", result="miss")
        try:
            found = await self._touch(
                keys=[_KEY.format(session_id), _BACKENDS.format(session_id), self._idle],
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
        self._cache.pop(session_id, None)
        try:
            await self._delete(
                keys=[_KEY.format(session_id), _BACKENDS.format(session_id), self._idle],
                args=[session_id, TENANT_INDEX.format("")],
            )
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(type(exc).__name__) from None

    async def take_expired(self, *, limit: int = 100) -> list[SessionState]:
        """Sessions idle for longer than the expiry, each handed to one caller across all instances
        (removing it from the idle index is the claim); their state stays until `delete`."""
        now = self._clock()
        try:
            ids = await self._redis.zrangebyscore(self._idle, 0, now - self._ttl, start=0, num=limit)
            taken: list[SessionState] = []
            for raw_id in ids:
                session_id = raw_id.decode() if isinstance(raw_id, bytes) else raw_id
                if not await self._redis.zrem(self._idle, session_id):
                    continue  # another instance took it
                self._cache.pop(session_id, None)
                payload = await self._redis.get(_KEY.format(session_id))
                if payload is not None:
                    taken.append(self._decode(payload, await self._redis.hgetall(_BACKENDS.format(session_id))))
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(type(exc).__name__) from None
        return taken


@dataclasses.dataclass(frozen=True)
class ActiveSession:
    """A session as the console lists it: its state and its seconds since last use."""

    state: SessionState
    idle_seconds: float

    @property
    def instance(self) -> str:
        """The instance that minted the id (its first part): an owner hint, not a binding."""
        return self.state.id.split(".", 1)[0]


def session_list(
    client: redis.Redis, *, tenant_id: int, offset: int = 0, limit: int = 50, idle_index: str = IDLE_INDEX,
    clock: Callable[[], float] = time.time,
) -> tuple[list[ActiveSession], int]:
    """One page of a tenant's sessions, newest first, and how many it has: two round trips
    whatever the page size (the index page, then each session's state, backends and last use).
    Entries whose state is gone are left off and removed from the index."""
    index = TENANT_INDEX.format(tenant_id)
    with client.pipeline(transaction=False) as pipe:
        pipe.zrevrange(index, offset, offset + limit - 1)
        pipe.zcard(index)
        raw_ids, total = pipe.execute()
    ids = [raw.decode() if isinstance(raw, bytes) else raw for raw in raw_ids]
    if not ids:
        return [], total
    with client.pipeline(transaction=False) as pipe:
        for session_id in ids:
            pipe.get(_KEY.format(session_id))
            pipe.hgetall(_BACKENDS.format(session_id))
        pipe.zmscore(idle_index, ids)
        *found, last_used = pipe.execute()
    now = clock()
    sessions: list[ActiveSession] = []
    gone: list[str] = []
    for i, session_id in enumerate(ids):
        payload, backends = found[2 * i], found[2 * i + 1]
        if payload is None:
            gone.append(session_id)
            continue
        used = last_used[i]
        state = RedisSessionStore._decode(payload, backends)
        sessions.append(ActiveSession(state, max(0.0, now - used) if used is not None else float("inf")))
    if gone:
        client.zrem(index, *gone)
    return sessions, max(0, total - len(gone))
