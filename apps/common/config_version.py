"""The configuration version counters in Redis, one per tenant.

Gateway instances cache a snapshot of each tenant's configuration (keys, virtual hosts, backends) and
re-read it only when that tenant's counter moves, so the hot path makes no database query and one
tenant's edit reloads no other tenant's snapshot. Every service that changes what a snapshot holds
calls `config_version_bump` (it takes effect after commit).

The counters are fields of one Redis hash (one key, so that an instance reads the counters of every
tenant it holds in one command, on a Redis Cluster too): one field per tenant id, and the field `*`,
which every bump moves as well — what instances watch for slugs they found no tenant for (the edit
may have created it)."""

from __future__ import annotations

from django.db import transaction

from apps.common.redis import redis_client

CONFIG_VERSIONS_KEY = "gw:config-versions"
#: The one counter of the previous release's instances, moved as well while a rolling upgrade may
#: still run them beside this release's (docs/scale.md, "Upgrading").
_PREVIOUS_RELEASE_KEY = "gw:config-version"
#: The field every bump moves.
ANY_TENANT = "*"
_BUMP = """
redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
return redis.call('HINCRBY', KEYS[1], ARGV[2], 1)
"""


def config_version_get(*, tenant_id: int | None = None) -> int:
    """The tenant's counter (every tenant's, `*`, when None)."""
    field = ANY_TENANT if tenant_id is None else str(tenant_id)
    return int(redis_client().hget(CONFIG_VERSIONS_KEY, field) or 0)


def config_version_bump(*, tenant_id: int) -> None:
    """Move the tenant's counter (and `*`) once the current transaction commits (at once outside one)."""

    def bump() -> None:
        client = redis_client()
        client.eval(_BUMP, 1, CONFIG_VERSIONS_KEY, str(tenant_id), ANY_TENANT)
        client.incr(_PREVIOUS_RELEASE_KEY)

    transaction.on_commit(bump)
