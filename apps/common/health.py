"""Readiness of a gateway process (docs/observability.md, "Health"): the database, Redis, and the
heartbeat that Celery workers write when beat schedules it.

Each check runs on a worker thread under a deadline (GATEWAY_READYZ_TIMEOUT_SECONDS), so a
dependency that hangs makes the probe answer "not ready" in about that time instead of hanging
it; a database check still stuck from an earlier probe is not started again.

The probe answers anyone (under any Host), so a failure's reason names its kind only; the error
itself — which names hosts, ports and addresses — goes to the server log."""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import socket
import threading
import time
from dataclasses import dataclass, field

import redis
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, connection

from apps.common.redis import redis_client, sync_client

log = logging.getLogger(__name__)

#: Unix time a Celery worker last ran `apps.common.tasks.worker_heartbeat`.
WORKER_HEARTBEAT_KEY = "gw:worker-heartbeat"
#: Kept long past any sensible threshold, then dropped: a deployment whose workers are long gone
#: reads "never" rather than a heartbeat from months ago.
_HEARTBEAT_TTL_SECONDS = 7 * 24 * 3600

@dataclass(frozen=True, slots=True)
class Readiness:
    #: Why the process must not get traffic (HTTP 503), by dependency.
    problems: dict[str, str] = field(default_factory=dict)
    #: What an operator should know that does not stop this process serving (HTTP 200).
    warnings: dict[str, str] = field(default_factory=dict)

    @property
    def status(self) -> str:
        return "unavailable" if self.problems else "degraded" if self.warnings else "ok"


def worker_heartbeat_record() -> None:
    """Note that a worker is alive now (run by a worker, scheduled by beat)."""
    redis_client().set(WORKER_HEARTBEAT_KEY, repr(time.time()), ex=_HEARTBEAT_TTL_SECONDS)


def heartbeat_age(raw: bytes | str | None, *, now: float) -> float:
    """Seconds since the heartbeat `raw` (as read from WORKER_HEARTBEAT_KEY); +Inf if there is none."""
    if raw is None:
        return math.inf
    try:
        return max(0.0, now - float(raw))
    except ValueError:
        return math.inf


class _Busy(Exception):
    pass


_database_check_running = threading.Lock()


def _database_check() -> None:
    if not _database_check_running.acquire(blocking=False):
        raise _Busy
    try:
        close_old_connections()
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
        except Exception:
            connection.close()  # a broken connection is not kept for the next check
            raise
    finally:
        _database_check_running.release()


@functools.cache
def _probe_redis() -> redis.Redis:
    timeout = settings.GATEWAY_READYZ_TIMEOUT_SECONDS
    return sync_client(settings.REDIS_URL, socket_timeout=timeout, socket_connect_timeout=timeout)


def _redis_check() -> bytes | None:
    """The worker heartbeat (reading it is the check that Redis answers): one round trip."""
    return _probe_redis().get(WORKER_HEARTBEAT_KEY)


def _reason(exc: BaseException, timeout: float, dependency: str) -> str:
    """What the probe says of a failed check; the exception's own text is logged, not answered."""
    if isinstance(exc, _Busy):
        return "no answer: the previous check has not finished"
    if isinstance(exc, TimeoutError | socket.timeout | redis.TimeoutError):
        return f"no answer within {timeout:g} s"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    log.warning("readiness: the %s check failed: %s%s", dependency, type(exc).__name__, f": {text}" if text else "")
    return f"{type(exc).__name__} (the error is in the server log)"


def _heartbeat_problem(beat: bytes | None, *, now: float, max_age: float) -> str | None:
    age = heartbeat_age(beat, now=now)
    if age == math.inf:
        return ("no heartbeat recorded: no Celery worker has run the heartbeat task that beat schedules "
                "(is a worker and beat running on this Redis?)")
    if age > max_age:
        return (f"last heartbeat {age:.0f} s ago (limit {max_age:g} s): no Celery worker is running, "
                "or beat is not scheduling tasks")
    return None


async def readiness_check() -> Readiness:
    """Check the database and Redis concurrently, each within GATEWAY_READYZ_TIMEOUT_SECONDS, and
    the worker heartbeat read from Redis against GATEWAY_WORKER_HEARTBEAT_MAX_AGE_SECONDS."""
    timeout = settings.GATEWAY_READYZ_TIMEOUT_SECONDS
    database = asyncio.wait_for(sync_to_async(_database_check, thread_sensitive=False)(), timeout)
    store = asyncio.wait_for(sync_to_async(_redis_check, thread_sensitive=False)(), timeout)
    db_result, redis_result = await asyncio.gather(database, store, return_exceptions=True)
    problems: dict[str, str] = {}
    warnings: dict[str, str] = {}
    if isinstance(db_result, BaseException):
        problems["database"] = _reason(db_result, timeout, "database")
    if isinstance(redis_result, BaseException):
        problems["redis"] = _reason(redis_result, timeout, "redis")
        # Unknown without Redis; said so, where the worker's state would be.
        (problems if settings.GATEWAY_READYZ_WORKER == "fail" else warnings)["worker"] = (
            "unknown: the heartbeat is kept in Redis, which cannot be read")
    else:
        stale = _heartbeat_problem(redis_result, now=time.time(), max_age=settings.GATEWAY_WORKER_HEARTBEAT_MAX_AGE_SECONDS)
        if stale is not None:
            (problems if settings.GATEWAY_READYZ_WORKER == "fail" else warnings)["worker"] = stale
    return Readiness(problems, warnings)
