"""The configuration version counters in Redis, one per tenant.

Gateway instances cache a snapshot of each tenant's configuration (keys, virtual hosts, backends) and
re-read it only when that tenant's counter moves, so the hot path makes no database query and one
tenant's edit reloads no other tenant's snapshot. Every service that changes what a snapshot holds
calls `config_version_bump` (it takes effect after commit).

The counters are fields of one Redis hash (one key, so that an instance reads the counters of every
tenant it holds in one command, on a Redis Cluster too): one field per tenant id, and one per slug
(`s:<slug>`), moved when a tenant of that slug is created or deleted — what instances watch for a
slug they found no tenant for, or whose tenant may have been replaced by another of the same slug."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction

from apps.common.redis import redis_client

CONFIG_VERSIONS_KEY = "gw:config-versions"
#: The one counter of the previous release's instances, moved as well while a rolling upgrade may
#: still run them beside this release's (docs/deploy.md, "Upgrades").
_PREVIOUS_RELEASE_KEY = "gw:config-version"
_BUMP = """
for i, field in ipairs(ARGV) do redis.call('HINCRBY', KEYS[1], field, 1) end
"""


def slug_field(slug: str) -> str:
    """The counter field of a tenant slug (created, deleted, or naming another tenant now)."""
    return f"s:{slug}"


def config_version_get(*, tenant_id: int) -> int:
    """The tenant's counter."""
    return int(redis_client().hget(CONFIG_VERSIONS_KEY, str(tenant_id)) or 0)


def config_version_bump(*, tenant_id: int, slugs: Iterable[str] = ()) -> None:
    """Move the tenant's counter once the current transaction commits (at once outside one);
    `slugs`: the tenant was created or deleted under them (or its slug changed from one to the other)."""
    fields = [str(tenant_id), *(slug_field(slug) for slug in slugs)]

    def bump() -> None:
        client = redis_client()
        client.eval(_BUMP, 1, CONFIG_VERSIONS_KEY, *fields)
        client.incr(_PREVIOUS_RELEASE_KEY)

    transaction.on_commit(bump)
