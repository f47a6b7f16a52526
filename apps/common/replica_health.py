"""Which backend replicas the gateway instances have found down, shared over Redis (docs/sessions.md).

An instance that finds a replica down or up again tells the others on `REPLICA_HEALTH_CHANNEL`
(apps/gateway/adapters/redis_health_feed.py) and keeps the current state in the hash `REPLICA_HEALTH_KEY`: replica URL
-> since when it is down, which instance found it, and when a check last found it still down. Up
again, its entry is deleted. A newly started instance reads the hash; the console, the REST API and
the metrics show it.

Every instance that uses a replica checks it every few seconds and confirms the entry while it is
still down. An entry nobody confirmed for `STALE_SECONDS` was left by instances that are gone (or
no longer use the replica): readers ignore it, so it cannot keep a replica down."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import orjson

from apps.common.redis import message_object, redis_client

REPLICA_HEALTH_KEY = "gw:replica-health"
REPLICA_HEALTH_CHANNEL = "gw:replica-health-changes"
#: Many check periods (5 s each): live instances that use a replica confirm it far more often.
STALE_SECONDS = 60.0


@dataclass(frozen=True)
class ReplicaDown:
    """A replica the gateways found down: since when (Unix time), by which instance, and when an
    instance's check last found it still down (`checked`)."""

    url: str
    since: float
    instance: str
    checked: float

    def is_current(self, now: float) -> bool:
        return now - self.checked <= STALE_SECONDS

    @property
    def since_datetime(self) -> datetime:
        return datetime.fromtimestamp(self.since, tz=UTC)


def replica_down_record(*, since: float, instance: str, checked: float) -> bytes:
    return orjson.dumps({"since": since, "instance": instance, "checked": checked})


def replica_down_parse(url: str | bytes, data: bytes | str) -> ReplicaDown | None:
    """The entry of one replica; None for anything malformed."""
    record = message_object(data)
    if record is None:
        return None
    since, instance, checked = record.get("since"), record.get("instance"), record.get("checked")
    if not isinstance(since, int | float) or not isinstance(checked, int | float) or not isinstance(instance, str):
        return None
    return ReplicaDown(url.decode() if isinstance(url, bytes) else url, float(since), instance, float(checked))


def replicas_down(records: Mapping[bytes, bytes], *, now: float) -> list[ReplicaDown]:
    """The current entries of the hash as read (`HGETALL`), stale and malformed ones left out."""
    parsed = (replica_down_parse(url, data) for url, data in records.items())
    return [entry for entry in parsed if entry is not None and entry.is_current(now)]


def replica_change_payload(*, url: str, up: bool, since: float, instance: str, origin: str) -> bytes:
    return orjson.dumps({"url": url, "up": up, "since": since, "instance": instance, "origin": origin})


def replica_change_parse(data: bytes) -> tuple[str, bool, float, str, str] | None:
    """(url, up, since, instance, origin) of a message; None for anything malformed."""
    message = message_object(data)
    if message is None:
        return None
    url, up, since = message.get("url"), message.get("up"), message.get("since")
    instance, origin = message.get("instance"), message.get("origin")
    if not (isinstance(url, str) and isinstance(up, bool) and isinstance(since, int | float)
            and isinstance(instance, str) and isinstance(origin, str)):
        return None
    return url, up, float(since), instance, origin


def replicas_down_read(*, urls: Sequence[str]) -> dict[str, ReplicaDown]:
    """Of `urls`, the replicas the gateways currently have down (stale entries left out)."""
    if not urls:
        return {}
    now = time.time()
    found = redis_client().hmget(REPLICA_HEALTH_KEY, list(urls))
    entries = (replica_down_parse(url, data) for url, data in zip(urls, found, strict=True) if data is not None)
    return {entry.url: entry for entry in entries if entry is not None and entry.is_current(now)}
