"""The audit log's live tail: each batch the writer has written is published to a channel-layer
group per tenant, where the console's tails (apps.console.consumers) pick it up — only for the
tenants someone is watching.

Watching: a tail marks its tenant as watched in Redis (`audit_live_watch`, a key that lives
`WATCH_TTL_SECONDS`) *before* its websocket is accepted, and renews the mark every
`WATCH_REFRESH_SECONDS` while it is open (`audit_live_watching`); the mark is left to expire. A
batch is published to the tenants whose mark is present when its publish starts, which is after
the batch is written: so a tail is sent every batch written after its connect returned (as far as
publishing is not skipped, below), and batches are published to nobody for at most
`WATCH_TTL_SECONDS` after the last tail closed.

Publishing is best effort and never touches a call: it starts after the batch is in the
database, runs as its own task with a time limit (one Redis round trip to read the marks of all
the batch's tenants, then one group_send per watched tenant), and is skipped while the previous
one is still going (a slow or absent Redis costs a log line, not a queue). A tail is read by
people: a burst sends only each tenant's newest `MAX_ROWS` rows of a batch.

Revocation: a tail is also in its user's group (`apps.tenants.access_changes`), told whenever that
user's access may have shrunk; it then checks its access again and closes when it is gone. Telling
is best effort, so a tail also checks again before it sends rows when its last check is older than
`ACCESS_RECHECK_SECONDS` (a lost message, or a change made around the services)."""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import Any

from channels.layers import get_channel_layer

from apps.audit.models import AuditRecord
from apps.common.redis import async_redis_client
from apps.kernel.audit_entry import AuditEntry

log = logging.getLogger(__name__)

MESSAGE_TYPE = "audit.rows"
ACCESS_RECHECK_SECONDS = 60.0
MAX_ROWS = 100
TIMEOUT_SECONDS = 2.0
WATCH_TTL_SECONDS = 30.0
WATCH_REFRESH_SECONDS = 10.0

#: The publish in flight, per event loop.
_publishing: dict[int, asyncio.Task[None]] = {}


def audit_live_group(*, tenant_id: int) -> str:
    """The channel-layer group of a tenant's live tails."""
    return f"audit-live.{tenant_id}"


def _watched_key(tenant_id: int) -> str:
    return f"gw:audit-live-watched:{tenant_id}"


async def audit_live_watch(*, tenant_id: int) -> None:
    """Mark the tenant as watched for `WATCH_TTL_SECONDS`. Raises when Redis cannot be reached."""
    await async_redis_client().set(_watched_key(tenant_id), b"1", px=int(WATCH_TTL_SECONDS * 1000))


async def audit_live_watching(*, tenant_id: int) -> None:
    """Keep the tenant's mark alive until cancelled (run as a task while a tail is open)."""
    while True:
        await asyncio.sleep(WATCH_REFRESH_SECONDS)
        try:
            await audit_live_watch(tenant_id=tenant_id)
        except Exception:
            log.warning("renewing the live tail's watch mark failed", exc_info=True)


def _values(entry: AuditEntry) -> dict[str, Any]:
    """What a tail shows of a row, in types the channel layer carries (msgpack)."""
    principal = entry.principal
    return {
        "created_at": entry.at, "principal": principal.label,
        "api_key_id": None if principal.issuer is not None else principal.key_id, "team": principal.team or "",
        "virtual_host": entry.virtual_host, "backend": entry.backend, "method": entry.method,
        "exposed_name": entry.exposed_name, "outcome": entry.outcome, "error_code": entry.error_code,
        "latency_ms": entry.latency_ms, "session_id": entry.session_id, "trace_id": entry.trace_id,
        "rule": entry.rule, "limit_state": entry.limit_state, "cost": entry.cost,
    }


def audit_live_record(values: dict[str, Any]) -> AuditRecord:
    """A published row as an (unsaved) AuditRecord, so the tail renders it as the log does."""
    fields = dict(values)
    fields["created_at"] = datetime.datetime.fromtimestamp(fields["created_at"], tz=datetime.UTC)
    return AuditRecord(**fields)


def audit_batch_publish(entries: list[AuditEntry]) -> None:
    """Send a written batch to its tenants' tails, without waiting. Call from the event loop."""
    loop = asyncio.get_running_loop()
    running = _publishing.get(id(loop))
    if running is not None and running.get_loop() is loop and not running.done():
        log.debug("live tail still publishing; %d rows not shown live", len(entries))
        return
    by_tenant: dict[int, list[AuditEntry]] = {}
    for entry in entries:
        by_tenant.setdefault(entry.principal.tenant_id, []).append(entry)
    _publishing[id(loop)] = loop.create_task(_send({tenant_id: rows[-MAX_ROWS:] for tenant_id, rows in by_tenant.items()}))


async def _send(by_tenant: dict[int, list[AuditEntry]]) -> None:
    try:
        async with asyncio.timeout(TIMEOUT_SECONDS):
            async with async_redis_client().pipeline(transaction=False) as pipe:
                for tenant_id in by_tenant:
                    pipe.exists(_watched_key(tenant_id))
                watched = [tenant_id for tenant_id, n in zip(by_tenant, await pipe.execute(), strict=True) if n]
            if not watched:
                return
            layer = get_channel_layer()
            for tenant_id in watched:
                rows = [_values(e) for e in by_tenant[tenant_id]]
                await layer.group_send(audit_live_group(tenant_id=tenant_id), {"type": MESSAGE_TYPE, "rows": rows})
    except Exception:
        log.warning("publishing audit rows to the live tail failed", exc_info=True)
