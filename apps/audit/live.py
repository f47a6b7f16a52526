"""The audit log's live tail: each batch the writer has written is published to a channel-layer
group per tenant, where the console's tails (apps.console.consumers) pick it up — only for the
tenants someone is watching.

Watching: a tail marks its tenant as watched in Redis (`audit_live_watch`, a key that lives
`WATCH_TTL_SECONDS`) *before* its websocket is accepted, and renews the mark every
`WATCH_REFRESH_SECONDS` while it is open (`audit_live_watching`); the mark is left to expire. A
batch is published to the tenants whose mark is present when its publish starts, which is after
the batch is written: so a tail is sent every batch written after its connect returned, and
batches are published to nobody for at most `WATCH_TTL_SECONDS` after the last tail closed.

Publishing never touches a call: it starts after the batch is in the database and runs as one task
per event loop, with a time limit per attempt (one Redis round trip to read the clock and the marks
of the batch's tenants, then one group_send per watched tenant). Batches written while an attempt
runs wait for the next one; a failed attempt is retried after `RETRY_SECONDS`. What waits is bounded:
each tenant's newest `MAX_ROWS` rows (a tail is read by people) and `MAX_PENDING_TENANTS` tenants.

Nothing is lost silently. Every message names its writer (`WRITER_ID`, one per process) and the
range of that writer's batches for the tenant it carries (`first`..`last`, counted per tenant,
whether published or not), how many rows it leaves out (`omitted`), and when the attempt that carried
the batch before `first` ran (`prev_at`, on Redis' clock). A tail (`TailSequence`) knows it missed
rows when a writer's range skips a number, when a writer's first message follows an attempt made
after the tail opened, or when rows were left out; it then reloads the table from the database and
says so (apps.console.consumers).

Revocation: a tail is also in its user's group (`apps.tenants.access_changes`), told whenever that
user's access may have shrunk; it then checks its access again and closes when it is gone. Telling
is best effort, so a tail also checks again before it sends rows when its last check is older than
`ACCESS_RECHECK_SECONDS` (a lost message, or a change made around the services)."""

from __future__ import annotations

import asyncio
import datetime
import logging
import math
import secrets
from dataclasses import dataclass
from typing import Any, Literal

from channels.layers import get_channel_layer

from apps.audit.models import AuditRecord
from apps.common.redis import async_redis_client
from apps.kernel.audit_entry import AuditEntry

log = logging.getLogger(__name__)

MESSAGE_TYPE = "audit.rows"
ACCESS_RECHECK_SECONDS = 60.0
MAX_ROWS = 100
MAX_PENDING_TENANTS = 1000
RETRY_SECONDS = 1.0
TIMEOUT_SECONDS = 2.0
WATCH_TTL_SECONDS = 30.0
WATCH_REFRESH_SECONDS = 10.0

#: This process, as the tails tell writers apart: their batch numbers are counted per process.
WRITER_ID = secrets.token_hex(8)


def audit_live_group(*, tenant_id: int) -> str:
    """The channel-layer group of a tenant's live tails."""
    return f"audit-live.{tenant_id}"


def _watched_key(tenant_id: int) -> str:
    # One hash tag for every tenant's mark: a writer reads the marks of all its tenants and the
    # clock in one script, on one node (a Redis Cluster slot), whose clock set the marks.
    return f"gw:{{audit-live}}:watched:{tenant_id}"


#: Mark KEYS[1] watched for ARGV[1] ms; returns the time it was marked (Redis's clock).
_WATCH = """
redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
return redis.call('TIME')
"""
#: Redis's clock, then whether each KEY is marked; the clock is read first: a mark set before it is seen.
_MARKS = """
local out = {redis.call('TIME')}
for i, key in ipairs(KEYS) do out[i + 1] = redis.call('EXISTS', key) end
return out
"""


def _redis_seconds(time: list[bytes]) -> float:
    """TIME's answer (seconds, microseconds) as returned by a script."""
    return int(time[0]) + int(time[1]) / 1_000_000


async def audit_live_watch(*, tenant_id: int) -> float:
    """Mark the tenant as watched for `WATCH_TTL_SECONDS`; return when (on Redis' clock), which is
    what `TailSequence` compares writers' attempts with. Raises when Redis cannot be reached."""
    now = await async_redis_client().eval(_WATCH, 1, _watched_key(tenant_id), int(WATCH_TTL_SECONDS * 1000))
    return _redis_seconds(now)


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
        "api_key_id": entry.api_key_id, "team": principal.team or "",
        "virtual_host": entry.virtual_host, "backend": entry.backend, "method": entry.method,
        "exposed_name": entry.exposed_name, "outcome": entry.outcome, "error_code": entry.error_code,
        "latency_ms": entry.latency_ms, "session_id": entry.session_id, "trace_id": entry.trace_id,
        "rule": entry.rule, "limit_state": entry.limit_state, "cost": entry.cost, "task_id": entry.task_id,
        "origin": entry.origin, "console_user": principal.console_user,
    }


def audit_live_record(values: dict[str, Any]) -> AuditRecord:
    """A published row as an (unsaved) AuditRecord, so the tail renders it as the log does."""
    fields = dict(values)
    fields["created_at"] = datetime.datetime.fromtimestamp(fields["created_at"], tz=datetime.UTC)
    return AuditRecord(**fields)


@dataclass
class _Pending:
    """One tenant's rows waiting to be published: its batches `first`..`last` of this writer."""

    first: int
    last: int
    prev_at: float | None
    rows: list[AuditEntry]
    omitted: int = 0

    def add(self, rows: list[AuditEntry], last: int) -> None:
        self.rows.extend(rows)
        self.last = last
        if (over := len(self.rows) - MAX_ROWS) > 0:
            del self.rows[:over]
            self.omitted += over

    def then(self, later: _Pending) -> _Pending:
        """These rows followed by `later`'s (what arrived while these were being sent)."""
        self.add(later.rows, later.last)
        self.omitted += later.omitted
        return self

    def message(self) -> dict[str, Any]:
        return {
            "type": MESSAGE_TYPE, "rows": [_values(e) for e in self.rows], "writer": WRITER_ID,
            "first": self.first, "last": self.last, "prev_at": self.prev_at, "omitted": self.omitted,
        }


class _Publisher:
    """The publishing of one event loop: batch numbers per tenant, the rows waiting, and the task
    that sends them."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.numbers: dict[int, int] = {}
        self.attempted_at: dict[int, float] = {}  # per tenant: the last attempt that carried its rows
        self.pending: dict[int, _Pending] = {}
        self.task: asyncio.Task[None] | None = None

    def add(self, entries: list[AuditEntry]) -> None:
        by_tenant: dict[int, list[AuditEntry]] = {}
        for entry in entries:
            by_tenant.setdefault(entry.principal.tenant_id, []).append(entry)
        for tenant_id, rows in by_tenant.items():
            number = self.numbers[tenant_id] = self.numbers.get(tenant_id, 0) + 1
            waiting = self.pending.get(tenant_id)
            if waiting is None:
                waiting = self.pending[tenant_id] = _Pending(number, number, self.attempted_at.get(tenant_id), [])
            waiting.add(rows, number)
        self._bound()
        if self.task is None or self.task.done():
            self.task = self.loop.create_task(self._drain())

    def _bound(self) -> None:
        while len(self.pending) > MAX_PENDING_TENANTS:
            dropped = next(iter(self.pending))
            del self.pending[dropped]
            # When those batches were written is not known: a tail that sees this writer first
            # after now counts them as missed (a reload too many rather than rows lost unsaid).
            self.attempted_at[dropped] = math.inf
            log.warning("live tail: too many tenants waiting; rows of tenant %d not shown live", dropped)

    async def _drain(self) -> None:
        while self.pending:
            attempt, self.pending = self.pending, {}
            unsent = await self._send(attempt)
            if not unsent:
                continue
            for tenant_id, later in self.pending.items():
                unsent[tenant_id] = unsent.pop(tenant_id).then(later) if tenant_id in unsent else later
            self.pending = unsent
            self._bound()
            await asyncio.sleep(RETRY_SECONDS)

    async def _send(self, attempt: dict[int, _Pending]) -> dict[int, _Pending]:
        """Send one attempt; return what is still to be sent."""
        done: set[int] = set()
        try:
            async with asyncio.timeout(TIMEOUT_SECONDS):
                keys = [_watched_key(tenant_id) for tenant_id in attempt]
                now, *marks = await async_redis_client().eval(_MARKS, len(keys), *keys)
                for tenant_id, marked in zip(attempt, marks, strict=True):
                    self.attempted_at[tenant_id] = _redis_seconds(now)
                    if not marked:
                        done.add(tenant_id)  # nobody watches
                layer = get_channel_layer()
                for tenant_id, waiting in attempt.items():
                    if tenant_id not in done:
                        await layer.group_send(audit_live_group(tenant_id=tenant_id), waiting.message())
                        done.add(tenant_id)
        except Exception:
            log.warning("publishing audit rows to the live tail failed; trying again in %.0f s", RETRY_SECONDS,
                        exc_info=True)
        return {tenant_id: waiting for tenant_id, waiting in attempt.items() if tenant_id not in done}


#: Per event loop (the writer flushes on the loop that recorded last).
_publishers: dict[int, _Publisher] = {}


def audit_batch_publish(entries: list[AuditEntry]) -> None:
    """Send a written batch to its tenants' tails, without waiting. Call from the event loop."""
    loop = asyncio.get_running_loop()
    publisher = _publishers.get(id(loop))
    if publisher is None or publisher.loop is not loop:
        publisher = _publishers[id(loop)] = _Publisher(loop)
    publisher.add(entries)


async def audit_live_settled() -> None:
    """Wait until this loop's publisher has nothing left to send (for tests and shutdown)."""
    publisher = _publishers.get(id(asyncio.get_running_loop()))
    while publisher is not None and publisher.task is not None and not publisher.task.done():
        await asyncio.shield(publisher.task)


Verdict = Literal["show", "old", "missed"]


class TailSequence:
    """What one tail has received, per writer; judges each message it gets (see the module's
    docstring): "show" its rows, drop an "old" one already shown, or reload because rows were
    "missed". `opened_at` is what `audit_live_watch` returned when the tail opened."""

    def __init__(self, opened_at: float) -> None:
        self.opened_at = opened_at
        self._last: dict[str, int] = {}

    def judge(self, message: dict[str, Any]) -> Verdict:
        writer, first, last = message["writer"], message["first"], message["last"]
        seen = self._last.get(writer)
        if seen is not None and last <= seen:
            return "old"  # sent again after an attempt that timed out once it had been delivered
        self._last[writer] = last
        prev_at = message["prev_at"]
        if seen is not None:
            missed = first != seen + 1
        else:
            missed = prev_at is not None and prev_at >= self.opened_at
        return "missed" if missed or message["omitted"] else "show"
