"""The audit sink: rows are queued in memory on the request path and written in batches by a
background task, so a call never waits for the database. What is still queued when the process
exits is written before it goes (graceful shutdown loses nothing)."""

from __future__ import annotations

import asyncio
import atexit
import datetime
import logging
import threading
from collections import deque

from asgiref.sync import sync_to_async
from django.db import close_old_connections

from apps.audit.models import AuditRecord
from apps.gateway.pipeline.ports import AuditEntry

log = logging.getLogger(__name__)

_MAX_QUEUED = 200_000


def audit_records_write(entries: list[AuditEntry]) -> None:
    """Insert one batch of audit rows."""
    AuditRecord.objects.bulk_create(
        [
            AuditRecord(
                created_at=datetime.datetime.fromtimestamp(entry.at, tz=datetime.UTC),
                tenant_id=entry.principal.tenant_id,
                tenant_slug=entry.principal.tenant_slug,
                virtual_host=entry.virtual_host,
                principal=entry.principal.label,
                api_key_id=entry.principal.key_id,
                backend=entry.backend,
                method=entry.method,
                exposed_name=entry.exposed_name[:255],
                upstream_name=entry.upstream_name[:255],
                outcome=entry.outcome,
                error_code=entry.error_code,
                latency_ms=entry.latency_ms,
                bytes_in=entry.bytes_in,
                bytes_out=entry.bytes_out,
                session_id=entry.session_id[:200],
                trace_id=entry.trace_id,
            )
            for entry in entries
        ]
    )


class AuditWriter:
    """The `AuditSink` port. One per process; flushes every `interval` seconds on the loop that
    recorded last, and once more at exit."""

    def __init__(self, *, interval: float = 0.25, batch: int = 1000) -> None:
        self._queue: deque[AuditEntry] = deque()
        self._interval = interval
        self._batch = batch
        self._task: asyncio.Task[None] | None = None
        self._lock = threading.Lock()
        self._write = sync_to_async(self._write_batch, thread_sensitive=False)
        atexit.register(self.flush_sync)

    def record(self, entry: AuditEntry) -> None:
        if len(self._queue) >= _MAX_QUEUED:
            log.error("audit queue full; dropping the oldest row")
            self._queue.popleft()
        self._queue.append(entry)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while self._queue:
            await asyncio.sleep(self._interval)
            await self.flush()

    def _take(self) -> list[AuditEntry]:
        batch: list[AuditEntry] = []
        while self._queue and len(batch) < self._batch:
            batch.append(self._queue.popleft())
        return batch

    def _write_batch(self, batch: list[AuditEntry]) -> None:
        with self._lock:
            close_old_connections()
            try:
                audit_records_write(batch)
            except Exception:
                log.exception("writing %d audit rows failed; they stay queued", len(batch))
                self._queue.extendleft(reversed(batch))
                raise

    async def flush(self) -> None:
        while batch := self._take():
            try:
                await self._write(batch)
            except Exception:
                return  # kept queued; the next round tries again

    def flush_sync(self) -> None:
        """Write everything still queued, from a thread with no running event loop (exit time)."""
        while batch := self._take():
            try:
                self._write_batch(batch)
            except Exception:
                return
