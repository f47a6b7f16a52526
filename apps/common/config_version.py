"""The configuration version counter in Redis.

Gateway instances cache a snapshot of each tenant's configuration (keys, virtual hosts, backends) and
re-read it only when the counter moves, so the hot path makes no database query. Every service that
changes what a snapshot holds calls `config_version_bump` (it takes effect after commit).

One counter serves all tenants: configuration changes are rare, and a single counter also
invalidates what instances cached about tenants that did not exist yet."""

from __future__ import annotations

from django.db import transaction

from apps.common.redis import redis_client

CONFIG_VERSION_KEY = "gw:config-version"


def config_version_key(tenant_id: int | None = None) -> str:
    """The Redis key whose value moves when `tenant_id`'s configuration changes."""
    return CONFIG_VERSION_KEY


def config_version_bump(*, tenant_id: int) -> None:
    """Move the counter once the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: redis_client().incr(config_version_key(tenant_id)))
