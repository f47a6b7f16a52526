"""Per-tenant configuration version counters in Redis.

Gateway instances cache a snapshot of each tenant's configuration (keys, virtual hosts, backends) and
re-read it only when the tenant's counter moves, so the hot path makes no database query. Every
service that changes what a snapshot holds calls `config_version_bump` (after commit)."""

from __future__ import annotations

from django.db import transaction

from apps.common.redis import redis_client

_KEY = "gw:config-version:{tenant_id}"


def config_version_key(tenant_id: int) -> str:
    return _KEY.format(tenant_id=tenant_id)


def config_version_bump(*, tenant_id: int) -> None:
    """Move the tenant's counter once the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: redis_client().incr(config_version_key(tenant_id)))
