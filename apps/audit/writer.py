"""The audit sink: rows are queued in memory on the request path and written in batches by a
background task, so a call never waits for the database. What is still queued when the process
exits is written before it goes (graceful shutdown loses nothing).

Each batch also updates the per-minute counts the dashboard reads (a second statement), and once it
is written it is published to the console's live tails of the tenants someone is watching
(`apps.audit.live`), fire and forget.

The ends of tasks the gateway saw are queued the same way and written after the rows: each gives the
row of the call that created the task (`working`) its final outcome. That row may not be written yet
(another instance made the call and flushes on its own clock), so an end that finds no row is tried
again with the next batches for a while."""

from __future__ import annotations

import asyncio
import atexit
import bisect
import datetime
import logging
import threading
import time
from collections import OrderedDict, deque
from dataclasses import replace

import orjson
from asgiref.sync import sync_to_async
from django.db import DatabaseError, close_old_connections, connection, transaction
from django.db.backends.utils import CursorWrapper

from apps.audit import live
from apps.audit.models import LATENCY_BOUNDS, AuditMinute, AuditRecord
from apps.kernel.audit_entry import AuditEntry, TaskEnd

log = logging.getLogger(__name__)

_MAX_QUEUED = 200_000
#: Flushes an end waits for the row it ends (~10 s at the default interval), then it is dropped.
_TASK_END_TRIES = 40
#: Ends written lately, remembered so that polls of an ended task write nothing more: how many, how long.
_SEEN_ENDS = 10_000
_WRITTEN_SECONDS = 60.0


_COLUMNS = (
    "created_at", "tenant_id", "tenant_slug", "virtual_host", "principal", "api_key_id", "backend", "method",
    "exposed_name", "upstream_name", "outcome", "error_code", "latency_ms", "bytes_in", "bytes_out",
    "session_id", "trace_id", "backend_kind", "rule", "limit_state", "arguments", "cost", "team", "task_id",
    "origin", "console_user", "interceptions",
)
_ERRORS = {"error", "tool_error"}
_REFUSALS = ("denied", "rate_limited", "over_budget")


def audit_records_write(entries: list[AuditEntry]) -> None:
    """Insert one batch of audit rows with COPY (an ORM bulk insert cost ~0.7 ms of CPU per row,
    COPY a few microseconds: see BENCHMARKS.md), then add them to the per-minute counts.

    Two statements, each on one table and each atomic: a transaction spanning both tables could
    deadlock with anything locking them in the other order. Raises when the rows were not written
    (the caller keeps them to retry); a failure of the counts only is logged, never retried (a
    retry would write the rows twice): the dashboard then undercounts, the log is complete."""
    table = connection.ops.quote_name(AuditRecord._meta.db_table)
    with connection.cursor() as cursor:  # COPY is one statement: atomic without a transaction block
        with cursor.cursor.copy(f"COPY {table} ({', '.join(_COLUMNS)}) FROM STDIN") as copy:
            for entry in entries:
                principal = entry.principal
                copy.write_row((
                    datetime.datetime.fromtimestamp(entry.at, tz=datetime.UTC),
                    principal.tenant_id,
                    _text(principal.tenant_slug),
                    _text(entry.virtual_host),
                    _text(principal.label, 200),
                    entry.api_key_id,
                    _text(entry.backend),
                    _text(entry.method),
                    _text(entry.exposed_name, 255),
                    _text(entry.upstream_name, 255),
                    entry.outcome,
                    entry.error_code,
                    entry.latency_ms,
                    entry.bytes_in,
                    entry.bytes_out,
                    _text(entry.session_id, 200),
                    _text(entry.trace_id, 32),
                    entry.backend_kind,
                    _text(entry.rule, 64),
                    entry.limit_state,
                    _json(entry.arguments),
                    entry.cost,
                    _text(principal.team or ""),
                    _text(entry.task_id, 255),
                    entry.origin,
                    _text(principal.console_user, 150),
                    _json(list(entry.interceptions)) if entry.interceptions else None,
                ))
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            _minutes_add(cursor, entries)
    except DatabaseError:
        log.exception("counting %d audit rows for the dashboard failed; the rows are written", len(entries))


def audit_tasks_end(ends: list[TaskEnd]) -> list[TaskEnd]:
    """Give the row of each task's call its final outcome, and count the errors among them in the
    per-minute counts (the row was counted as a call when written). A row already ended keeps its
    outcome, except an `error` with no code, which only says the task failed (2025-11-25 `tasks/get`):
    a later, precise end (a tool error, an error code) replaces it. Where a backend gave the same
    id to more than one task (restarted, say), the newest call's row is the one. Returns the ends
    whose row was not found.

    Like `audit_records_write`, one statement per table, each atomic. A row is found again by
    (id, created_at), the log's primary key (with the partition key, one partition is read). The
    rows are locked in id order, so writers of several instances ending the same task wait for each
    other, and the one that comes second sees the row as the first left it (an error is counted once)."""
    chosen: dict[tuple[int, str, str, str], TaskEnd] = {}
    for end in ends:  # one per task: a precise one if any
        key = (end.tenant_id, _text(end.virtual_host), _text(end.backend), _text(end.task_id, 255))
        if key[3] and (key not in chosen or _precise(end) > _precise(chosen[key])):
            chosen[key] = end
    if not chosen:
        return []
    rows = orjson.dumps([
        {"tenant_id": key[0], "virtual_host": key[1], "backend": key[2], "task_id": key[3], "outcome": end.outcome,
         "error_code": end.error_code, "at": datetime.datetime.fromtimestamp(end.at, tz=datetime.UTC).isoformat()}
        for key, end in chosen.items()
    ]).decode()
    table = connection.ops.quote_name(AuditRecord._meta.db_table)
    source = """jsonb_to_recordset(%s::jsonb) AS r(tenant_id bigint, virtual_host text, backend text, task_id text,
        outcome text, error_code int, at timestamptz)"""
    # `a.task_id <> ''` lets the partial index audit_tenant_task find the rows.
    match = ("a.tenant_id = r.tenant_id AND a.task_id = r.task_id AND a.task_id <> '' "
             "AND a.virtual_host = r.virtual_host AND a.backend = r.backend")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"""WITH newest AS (
                SELECT DISTINCT ON (r.tenant_id, r.virtual_host, r.backend, r.task_id)
                    a.id, a.created_at, r.outcome, r.error_code, r.at
                FROM {source} JOIN {table} AS a ON {match}
                ORDER BY r.tenant_id, r.virtual_host, r.backend, r.task_id, a.created_at DESC, a.id DESC
            ), locked AS (
                SELECT a.id, a.created_at, a.outcome AS before, n.outcome, n.error_code, n.at
                FROM {table} AS a JOIN newest AS n ON a.id = n.id AND a.created_at = n.created_at
                WHERE a.outcome = 'working' OR (a.outcome = 'error' AND a.error_code IS NULL
                    AND a.task_ended_at IS NOT NULL AND (n.outcome = 'tool_error' OR n.error_code IS NOT NULL))
                ORDER BY a.id
                FOR UPDATE OF a
            )
            UPDATE {table} AS a SET outcome = l.outcome, error_code = l.error_code, task_ended_at = l.at
            FROM locked AS l WHERE a.id = l.id AND a.created_at = l.created_at
            RETURNING l.before, a.outcome, a.tenant_id, a.created_at, a.exposed_name""",
            [rows],
        )
        errors = [(tenant, created, tool) for before, after, tenant, created, tool in cursor.fetchall()
                  if before == "working" and after in _ERRORS]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT r.tenant_id, r.virtual_host, r.backend, r.task_id FROM {source}
            WHERE NOT EXISTS (SELECT 1 FROM {table} AS a WHERE {match})""",
            [rows],
        )
        missing = {tuple(row) for row in cursor.fetchall()}
    if errors:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                _minutes_errors_add(cursor, errors)
        except DatabaseError:
            log.exception("counting %d ended tasks' errors for the dashboard failed; their rows are written", len(errors))
    return [end for key, end in chosen.items() if key in missing]


def _precise(end: TaskEnd) -> bool:
    """Whether an end says why a task failed (or that it did not), not only that it failed."""
    return not (end.outcome == "error" and end.error_code is None)


def _minutes_errors_add(cursor: CursorWrapper, errors: list[tuple[int, datetime.datetime, str]]) -> None:
    """Count calls whose task ended in an error, in the minute the call was made (its counts exist:
    the call was counted when its row was written), for all tools and for its own."""
    counts: dict[tuple[int, str, datetime.datetime], int] = {}
    for tenant, created, tool in errors:
        minute = _minute(created.timestamp())
        for name in ("", tool) if tool else ("",):
            counts[(tenant, name, minute)] = counts.get((tenant, name, minute), 0) + 1
    table = connection.ops.quote_name(AuditMinute._meta.db_table)
    rows = [{"tenant_id": tenant, "tool": tool, "minute": minute.isoformat(), "errors": n}
            for (tenant, tool, minute), n in sorted(counts.items())]
    cursor.execute(
        f"""UPDATE {table} AS t SET errors = t.errors + r.errors
        FROM jsonb_to_recordset(%s::jsonb) AS r(tenant_id bigint, tool text, minute timestamptz, errors int)
        WHERE t.tenant_id = r.tenant_id AND t.tool = r.tool AND t.minute = r.minute""",
        [orjson.dumps(rows).decode()],
    )


def _minute(at: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(at - at % 60, tz=datetime.UTC)


def _minutes_add(cursor: CursorWrapper, entries: list[AuditEntry]) -> None:
    """Add the batch to AuditMinute in one upsert: per tenant and minute a row for all calls (with
    the latency histogram) and one per tool. Rows go in key order, so the writers of several
    instances updating the same minutes never deadlock."""
    counts: dict[tuple[int, str, datetime.datetime], list] = {}
    buckets = len(LATENCY_BOUNDS) + 1
    for entry in entries:
        tenant, minute = entry.principal.tenant_id, _minute(entry.at)
        tools = ("", _text(entry.exposed_name, 255)) if entry.exposed_name else ("",)
        for tool in tools:
            row = counts.setdefault((tenant, tool, minute), [0, 0, 0, 0, 0, [0] * buckets if not tool else None])
            row[0] += 1
            row[1] += entry.outcome in _ERRORS
            for i, outcome in enumerate(_REFUSALS, start=2):
                row[i] += entry.outcome == outcome
            if row[5] is not None:
                row[5][bisect.bisect_left(LATENCY_BOUNDS, entry.latency_ms)] += 1
    table = connection.ops.quote_name(AuditMinute._meta.db_table)
    rows = [
        {"tenant_id": tenant, "tool": tool, "minute": minute.isoformat(), "calls": c[0], "errors": c[1],
         "denied": c[2], "rate_limited": c[3], "over_budget": c[4], "latency": c[5]}
        for (tenant, tool, minute), c in sorted(counts.items())
    ]
    cursor.execute(
        f"""INSERT INTO {table} AS t (tenant_id, tool, minute, calls, errors, denied, rate_limited, over_budget, latency)
        SELECT * FROM jsonb_to_recordset(%s::jsonb) AS r(tenant_id bigint, tool text, minute timestamptz, calls int,
            errors int, denied int, rate_limited int, over_budget int, latency bigint[])
        ON CONFLICT (tenant_id, minute, tool) DO UPDATE SET
            calls = t.calls + excluded.calls, errors = t.errors + excluded.errors, denied = t.denied + excluded.denied,
            rate_limited = t.rate_limited + excluded.rate_limited, over_budget = t.over_budget + excluded.over_budget,
            latency = (SELECT array_agg(coalesce(a, 0) + coalesce(b, 0) ORDER BY n)
                       FROM unnest(t.latency, excluded.latency) WITH ORDINALITY AS u(a, b, n))""",
        [orjson.dumps(rows).decode()],
    )


def _json(value: object) -> str | None:
    """Arguments as jsonb text: PostgreSQL's jsonb refuses the NUL character, kept as U+FFFD."""
    if value is None:
        return None
    return orjson.dumps(value, default=str).decode().replace("\\u0000", "\\ufffd")


def _text(value: str, limit: int = 64) -> str:
    """Names come from callers: PostgreSQL text cannot hold NUL, and one row it refuses would
    stop the whole batch."""
    return value.replace("\x00", "\ufffd")[:limit]


class AuditWriter:
    """The `AuditSink` port. One per process; flushes every `interval` seconds on the loop that
    recorded last, and once more at exit."""

    def __init__(self, *, interval: float = 0.25, batch: int = 1000) -> None:
        self._queue: deque[AuditEntry] = deque()
        #: Task ends to write, with how many flushes each has waited for its row; those queued, and
        #: those written lately (when), so that polls of an ended task queue it once.
        self._ends: deque[tuple[TaskEnd, int]] = deque()
        self._pending_ends: set[TaskEnd] = set()
        self._written_ends: OrderedDict[TaskEnd, float] = OrderedDict()
        self._interval = interval
        self._batch = batch
        self._task: asyncio.Task[None] | None = None
        self._lock = threading.Lock()
        self._write = sync_to_async(self._write_batch_in_worker, thread_sensitive=False)
        atexit.register(self.flush_sync)

    def record(self, entry: AuditEntry) -> None:
        if len(self._queue) >= _MAX_QUEUED:
            log.error("audit queue full; dropping the oldest row")
            self._queue.popleft()
        self._queue.append(entry)
        self._wake()

    def task_ended(self, end: TaskEnd) -> None:
        key = replace(end, at=0.0)
        written = self._written_ends.get(key)
        if key in self._pending_ends or (written is not None and time.monotonic() - written < _WRITTEN_SECONDS):
            return
        if len(self._ends) >= _MAX_QUEUED:
            log.error("audit queue of task ends full; dropping the oldest")
            self._pending_ends.discard(replace(self._ends.popleft()[0], at=0.0))
        self._pending_ends.add(key)
        self._ends.append((end, 0))
        self._wake()

    def _wake(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while self._queue or self._ends:
            await asyncio.sleep(self._interval)
            await self.flush()

    def _take(self) -> list[AuditEntry]:
        batch: list[AuditEntry] = []
        while self._queue and len(batch) < self._batch:
            batch.append(self._queue.popleft())
        return batch

    def _write_batch(self, batch: list[AuditEntry]) -> None:
        with self._lock:
            try:
                audit_records_write(batch)
            except Exception:
                log.exception("writing %d audit rows failed; they stay queued", len(batch))
                self._queue.extendleft(reversed(batch))
                connection.close()  # the next batch starts on a fresh connection
                raise

    def _write_batch_in_worker(self, batch: list[AuditEntry]) -> None:
        try:
            self._write_batch(batch)
        finally:
            # As after a request: a connection past CONN_MAX_AGE is closed (it lives in a worker
            # thread, which no request_finished signal reaches).
            close_old_connections()

    def _take_ends(self) -> list[tuple[TaskEnd, int]]:
        batch: list[tuple[TaskEnd, int]] = []
        while self._ends and len(batch) < self._batch:
            batch.append(self._ends.popleft())
        return batch

    def _write_ends(self, batch: list[tuple[TaskEnd, int]]) -> None:
        """Write a batch of task ends after the rows; those whose row is not there yet wait for the
        next flush, a bounded number of times. A failure is logged and the batch kept."""
        tries = {end: n for end, n in batch}
        try:
            with self._lock:
                missing = audit_tasks_end([end for end, _ in batch])
        except Exception:
            log.exception("writing %d task ends to the audit log failed; they stay queued", len(batch))
            self._ends.extendleft(reversed(batch))
            connection.close()
            raise
        now = time.monotonic()
        waiting = set(missing)
        for end in tries:
            key = replace(end, at=0.0)
            if end in waiting and tries[end] + 1 < _TASK_END_TRIES:
                self._ends.append((end, tries[end] + 1))
                continue
            self._pending_ends.discard(key)  # a later poll that shows the end queues it again
            if end in waiting:
                log.info("the audit row of task %s (backend %s) never appeared; its end is dropped", end.task_id, end.backend)
            else:
                self._written_ends[key] = now
                self._written_ends.move_to_end(key)
                if len(self._written_ends) > _SEEN_ENDS:
                    self._written_ends.popitem(last=False)

    def _write_ends_in_worker(self, batch: list[tuple[TaskEnd, int]]) -> None:
        try:
            self._write_ends(batch)
        finally:
            close_old_connections()

    async def flush(self) -> None:
        while batch := self._take():
            try:
                await self._write(batch)
            except Exception:
                return  # kept queued; the next round tries again
            live.audit_batch_publish(batch)  # after the write, never awaited
        # One pass: ends that wait for their row are tried at the next flush, not in a loop now.
        if ends := self._take_ends():
            try:
                await sync_to_async(self._write_ends_in_worker, thread_sensitive=False)(ends)
            except Exception:
                return

    def flush_sync(self) -> None:
        """Write everything still queued, from a thread with no running event loop (exit time)."""
        while batch := self._take():
            try:
                self._write_batch(batch)
            except Exception:
                return
        if ends := self._take_ends():
            try:
                self._write_ends(ends)
            except Exception:
                return
