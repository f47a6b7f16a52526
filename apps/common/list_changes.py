"""List changes every gateway instance must hear, over Redis pub/sub.

Each instance learns that a backend's tools, prompts or resources changed in its own way (a
`list_changed` on a stream it relays, its subscription to a stateless backend, a new spec version
published by a worker). It drops its cached copy and tells its connected clients; through this
channel the other instances do the same. Delivery is best effort: an instance that misses a message
still refreshes within its list cache lifetime."""

from __future__ import annotations

import logging

import orjson
import redis
from django.db import transaction

from apps.common.redis import message_object, pubsub_channel, redis_client

log = logging.getLogger(__name__)

LIST_CHANGES_CHANNEL = "gw:list-changes"


def list_change_payload(*, backend_id: int, notification: str, origin: str) -> bytes:
    return orjson.dumps({"backend": backend_id, "notification": notification, "origin": origin})


def list_change_parse(data: bytes) -> tuple[int, str, str] | None:
    """(backend id, notification, origin instance) of a message; None for anything malformed."""
    message = message_object(data)
    if message is None:
        return None
    backend, notification, origin = message.get("backend"), message.get("notification"), message.get("origin")
    if not isinstance(backend, int) or not isinstance(notification, str) or not isinstance(origin, str):
        return None
    return backend, notification, origin


def list_changed_announce(*, backend_id: int, notification: str) -> None:
    """Tell every gateway instance, once the current transaction commits (at once outside one)."""

    def publish() -> None:
        payload = list_change_payload(backend_id=backend_id, notification=notification, origin="control-plane")
        try:
            client = redis_client()
            client.publish(pubsub_channel(client, LIST_CHANGES_CHANNEL), payload)
        except (redis.RedisError, OSError) as exc:
            log.warning("could not announce a list change of backend %s: %s", backend_id, exc)

    transaction.on_commit(publish)
