"""Each person's access token for the backends that take their own account (`per_person`
credentials; docs/identity.md, "Connected accounts"), on the hot path.

A token is read from this process's memory (for a few seconds: that is how long a disconnected
account may still be used here), else from Redis, where `apps.connections` keeps each current token
encrypted, else from the database, which refreshes it first when it is near its end (one instance
at a time). A person with no connection is remembered as such for the same few seconds."""

from __future__ import annotations

import logging
import time

import redis
import redis.asyncio
from channels.db import database_sync_to_async
from django.db import DatabaseError

from apps.connections.services import (
    REFRESH_AHEAD_SECONDS,
    ConnectionUnavailable,
    NotConnected,
    PersonToken,
    connection_token_get,
    token_cache_key,
    token_cache_read,
)
from apps.gateway.pipeline.ports import CredentialUnavailable
from apps.kernel.singleflight import SingleFlight

log = logging.getLogger(__name__)

_KEPT_MAX = 10_000


class PersonTokens:
    """Access tokens per (backend, person); `person` "" is the gateway's own account."""

    def __init__(self, client: redis.asyncio.Redis | None, *, fresh_seconds: float = 5.0) -> None:
        self._redis = client
        self._fresh = fresh_seconds
        #: (backend id, person) -> (token or None for "not connected", why, until when it is used)
        self._kept: dict[tuple[int, str], tuple[str | None, str, float]] = {}
        self._flights: SingleFlight[PersonToken | None] = SingleFlight()
        #: (backend id, person) -> (why no token can be had now, until when that is answered)
        self._failed: dict[tuple[int, str], tuple[str, float]] = {}

    async def token(self, backend_id: int, person: str) -> tuple[str | None, str]:
        """(the person's current access token, or None when they have no connection; why it ended,
        when it did). Raises CredentialUnavailable when the connection stands but no token can be had."""
        key = (backend_id, person)
        kept = self._kept.get(key)
        now = time.time()
        if kept is not None and now < kept[2]:
            return kept[0], kept[1]
        failed = self._failed.get(key)
        if failed is not None and now < failed[1]:
            raise CredentialUnavailable(failed[0])  # the server failing: not asked again at once
        reason = ""
        try:
            token = await self._flights.run(key, lambda: self._shared(backend_id, person))
        except NotConnected as exc:
            token, reason = None, exc.reason
        except ConnectionUnavailable as exc:
            if len(self._failed) >= _KEPT_MAX:
                self._failed.clear()
            self._failed[key] = (str(exc), now + self._fresh)
            raise CredentialUnavailable(str(exc)) from None
        except DatabaseError as exc:
            raise CredentialUnavailable(f"connected accounts cannot be read now ({type(exc).__name__})") from None
        if len(self._kept) >= _KEPT_MAX:
            self._kept = {k: v for k, v in self._kept.items() if v[2] > now}
            if len(self._kept) >= _KEPT_MAX:
                self._kept.clear()
        until = now + self._fresh
        if token is not None:
            until = min(until, token.expires_at - REFRESH_AHEAD_SECONDS)
        self._kept[key] = (token.value if token is not None else None, reason, until)
        return self._kept[key][0], reason

    async def _shared(self, backend_id: int, person: str) -> PersonToken:
        if self._redis is not None:
            try:
                token = token_cache_read(await self._redis.get(token_cache_key(backend_id=backend_id, person=person)))
            except (redis.RedisError, OSError) as exc:
                log.warning("person token cache unreachable (%s); reading the database", exc)
            else:
                if token is not None:
                    return token
        # Not thread-sensitive: a refresh may take seconds, and must not hold up other calls' reads.
        return await database_sync_to_async(connection_token_get, thread_sensitive=False)(
            backend_id=backend_id, person=person)
