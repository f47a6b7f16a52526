"""How often one address may make the authorization server do work for anyone (register a client,
fetch a client metadata document): counted in Redis per address and window, so it holds across
gateway instances. When Redis cannot be reached the request is allowed: an outage must not stop
people signing in."""

from __future__ import annotations

import logging

from redis.exceptions import RedisError

from apps.common.redis import redis_client

log = logging.getLogger(__name__)

REGISTRATIONS_PER_HOUR = 30
DOCUMENT_FETCHES_PER_MINUTE = 20
#: Sign-ins started through a tenant's identity provider (each reads its metadata).
PROVIDER_SIGN_INS_PER_MINUTE = 20


def attempt_allowed(*, kind: str, address: str, limit: int, window_seconds: int) -> bool:
    """Count one attempt of `kind` from `address`; False once there were `limit` in the window."""
    key = f"gw:oauth-{kind}:{address}"
    try:
        with redis_client().pipeline() as pipe:
            pipe.set(key, 0, ex=window_seconds, nx=True)  # the window starts at the first attempt
            pipe.incr(key)
            _, count = pipe.execute()
    except RedisError as exc:
        log.warning("authorization server throttle unavailable, allowing: %s", exc)
        return True
    return int(count) <= limit
