"""Rate-limit buckets and budget spending move to keys under their tenant's hash tag
(`gw:bg:{t<id>}:…`, apps/policies/counters.py), so that a day's or a month's spending is not
forgotten by the upgrade. Nothing in the database changes. Redis unreachable: the counters start
again from zero (logged), the migration does not fail; a key already written under its new name
(an instance of this release ran first) is kept."""

from __future__ import annotations

import logging
import re

from django.db import migrations

log = logging.getLogger(__name__)

_OLD = re.compile(rb"^gw:(rl|bg):(\d+):(.*)$", re.DOTALL)


def counters_retag(apps: object, schema_editor: object) -> None:
    import redis

    from apps.common.redis import redis_client

    client = redis_client()
    try:
        if not hasattr(client, "connection_pool"):
            return  # a Redis Cluster: this release is the first to run on one, no old names exist
        moved = 0
        for pattern in ("gw:rl:*", "gw:bg:*"):
            for key in client.scan_iter(match=pattern, count=1000):
                found = _OLD.match(key)
                if found is None:
                    continue  # already tagged
                kind, tenant, rest = found.groups()
                moved += bool(client.renamenx(key, b"gw:%s:{t%s}:%s" % (kind, tenant, rest)))
        if moved:
            log.info("rate limit and budget counters moved under their tenant's tag: %d", moved)
    except (redis.RedisError, OSError) as exc:
        log.warning("rate limit and budget counters not moved (they start again from zero): %s", exc)


class Migration(migrations.Migration):
    dependencies = [("policies", "0004_interceptor")]

    operations = [migrations.RunPython(counters_retag, migrations.RunPython.noop, elidable=True)]
