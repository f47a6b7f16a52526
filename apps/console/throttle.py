"""Login throttling: after too many failed sign-ins for one username from one address, or from one
address for any username, further attempts are refused for a while, without even checking the
password (so guessing costs the attacker time, not us CPU). Counted in Redis, so it holds across
gateway instances. When Redis cannot be reached, sign-ins are allowed: an outage must not lock
every admin out."""

from __future__ import annotations

import hashlib
import logging

from django.conf import settings
from redis.exceptions import RedisError

from apps.common.redis import redis_client

log = logging.getLogger(__name__)


def _keys(username: str, address: str) -> tuple[str, str]:
    user = hashlib.blake2b(username.strip().lower().encode(), digest_size=12).hexdigest()
    # Both under the address's hash tag: counted together by one script, on one Redis Cluster slot.
    return f"gw:login-fail:{{a{address}}}:{user}", f"gw:login-fail-addr:{{a{address}}}"


def login_wait_seconds(*, username: str, address: str) -> int:
    """Seconds until this username may try again from this address (0: now)."""
    pair, by_address = _keys(username, address)
    try:
        counts = redis_client().mget([pair, by_address])
        if int(counts[0] or 0) >= settings.CONSOLE_LOGIN_FAILURES_PER_USER:
            return max(int(redis_client().ttl(pair)), 1)
        if int(counts[1] or 0) >= settings.CONSOLE_LOGIN_FAILURES_PER_ADDRESS:
            return max(int(redis_client().ttl(by_address)), 1)
    except RedisError as exc:
        log.warning("login throttle unavailable, allowing the attempt: %s", exc)
    return 0


# The window starts at the first failure and is not extended by later ones (EXPIRE NX needs Redis 7).
_COUNT = """
for _, key in ipairs(KEYS) do
  redis.call('INCR', key)
  if redis.call('TTL', key) < 0 then redis.call('EXPIRE', key, ARGV[1]) end
end
"""


def login_failure_record(*, username: str, address: str) -> None:
    try:
        redis_client().eval(_COUNT, 2, *_keys(username, address), settings.CONSOLE_LOGIN_LOCKOUT_SECONDS)
    except RedisError as exc:
        log.warning("login throttle unavailable, failure not counted: %s", exc)


def login_success_record(*, username: str, address: str) -> None:
    try:
        redis_client().delete(_keys(username, address)[0])
    except RedisError as exc:
        log.warning("login throttle unavailable: %s", exc)
