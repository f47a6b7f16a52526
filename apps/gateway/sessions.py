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

import orjson
import redis
import redis.asyncio

from apps.gateway.pipeline.ports import StoreUnavailable
from apps.gateway.pipeline.values import BackendSession, SessionState

_KEY = "gw:session:{}"
_CLAIM = "gw:session-claim:{}:{}"
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
    ) -> None:
        self._redis = client
        self._key = hashlib.sha256(b"mcp-gateway session ids|" + secret.encode()).digest()
        self._instance = _INSTANCE_SAFE.sub("-", instance)[:32] or "gw"
        self._ttl = ttl_seconds
        self._cache_seconds = cache_seconds
        self._cache: dict[str, tuple[SessionState, float]] = {}

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
        payload = orjson.dumps(dataclasses.asdict(state))
        try:
            stored = await self._redis.set(
                _KEY.format(state.id), payload, ex=self._ttl, nx=create, xx=not create
            )
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
            return cached[0]
        # Reading also pushes the idle expiry forward.
        try:
            payload = await self._redis.getex(_KEY.format(session_id), ex=self._ttl)
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(type(exc).__name__) from None
        if payload is None:
            self._cache.pop(session_id, None)
            return None
        data = orjson.loads(payload)
        data["backends"] = {key: BackendSession(**value) for key, value in data["backends"].items()}
        state = SessionState(**data)
        if len(self._cache) > 100_000:
            self._cache.clear()  # crude bound; entries are cheap to reload
        self._cache[session_id] = (state, now)
        return state

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
            await self._redis.delete(_KEY.format(session_id))
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(type(exc).__name__) from None
