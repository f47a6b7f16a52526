"""No row lost across a partition boundary: rows written by the audit writer on either side of
midnight, and on days without a partition (the default partition), are each in their place exactly
once after the maintenance, and the prune removes exactly the days past the retention. A task's end
still finds its call's row after the row moved from the default partition to its day's."""

from __future__ import annotations

import asyncio
import datetime

import pytest
from django.db import connection

from apps.audit.models import AuditRecord
from apps.audit.services import AuditPruned, audit_partitions_ensure, audit_records_prune
from apps.audit.writer import AuditWriter
from apps.kernel.audit_entry import AuditEntry, TaskEnd
from tests.audit.test_writer import _entry

pytestmark = pytest.mark.django_db

# Days no other test's partition covers: the migration makes them around the real today.
MIDNIGHT = datetime.datetime(2020, 3, 10, tzinfo=datetime.UTC)  # the day with a partition: D
US = datetime.timedelta(microseconds=1)
DAY = datetime.timedelta(days=1)

ROWS = {  # label: created_at
    "D-1, last instant": MIDNIGHT - US,  # no partition for D-1: the default one
    "D, first instant": MIDNIGHT,
    "D, last instant": MIDNIGHT + DAY - US,
    "D+1, first instant": MIDNIGHT + DAY,
    "D+2, first instant": MIDNIGHT + 2 * DAY,  # no partition for D+2
    "D-200": MIDNIGHT - 200 * DAY,  # past any retention
}


def _write(writer: AuditWriter, entries: list[AuditEntry], ends: list[TaskEnd] = ()) -> None:
    """Through the writer's own faces: queued as the gateway queues them, written by its flush."""
    async def record() -> None:
        for entry in entries:
            writer.record(entry)
        for end in ends:
            writer.task_ended(end)

    asyncio.run(record())  # its scheduled flush (an hour away) is cancelled with the loop
    writer.flush_sync()


def _where() -> dict[str, tuple[str, datetime.datetime]]:
    """Each row's partition and created_at, by label; a label found twice fails."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT session_id, tableoid::regclass::text, created_at FROM audit_auditrecord")
        rows = cursor.fetchall()
    where = {label: (table, at) for label, table, at in rows}
    assert len(where) == len(rows)
    return where


def test_every_row_is_in_its_days_partition_exactly_once_through_maintenance_and_prune() -> None:
    assert audit_partitions_ensure(days_ahead=1, days_back=0, now=MIDNIGHT) == [MIDNIGHT.date(), (MIDNIGHT + DAY).date()]
    writer = AuditWriter(interval=3600)
    entries = [_entry(at=at.timestamp(), session_id=label) for label, at in ROWS.items()]
    working = MIDNIGHT - 500 * US  # a call that created a task, just before midnight
    entries.append(_entry(at=working.timestamp(), session_id="task call", outcome="working", task_id="t-1"))
    _write(writer, entries)

    default, d_1, d, d1, d2 = ("audit_auditrecord_default", "audit_auditrecord_p20200309",
                               "audit_auditrecord_p20200310", "audit_auditrecord_p20200311",
                               "audit_auditrecord_p20200312")
    assert _where() == {
        "D-1, last instant": (default, ROWS["D-1, last instant"]),
        "D, first instant": (d, ROWS["D, first instant"]),
        "D, last instant": (d, ROWS["D, last instant"]),
        "D+1, first instant": (d1, ROWS["D+1, first instant"]),
        "D+2, first instant": (default, ROWS["D+2, first instant"]),
        "D-200": (default, ROWS["D-200"]),
        "task call": (default, working),
    }

    # The beat task's run, a day later: D-1 and D+2 get their partitions and their rows.
    made = audit_partitions_ensure(days_ahead=1, days_back=90, now=MIDNIGHT + DAY)
    assert made == [(MIDNIGHT - DAY).date(), (MIDNIGHT + 2 * DAY).date()]
    assert {label: table for label, (table, _) in _where().items()} == {
        "D-1, last instant": d_1, "D, first instant": d, "D, last instant": d, "D+1, first instant": d1,
        "D+2, first instant": d2, "D-200": default, "task call": d_1,
    }

    # The task's end, seen after its row moved: the row is found and ended, not added.
    _write(writer, [], [TaskEnd(tenant_id=7, virtual_host="main", backend="demo", task_id="t-1", outcome="ok",
                                error_code=None, at=(MIDNIGHT + DAY).timestamp())])
    ended = AuditRecord.objects.get(session_id="task call")
    assert (ended.outcome, ended.task_ended_at, ended.created_at) == ("ok", MIDNIGHT + DAY, working)

    # Keep one day, as of D+1 at noon: D-1 is dropped whole, D (not wholly a day old) and the days
    # after it stay, and so does no row of the default partition older than a day.
    pruned = audit_records_prune(older_than_days=1, now=MIDNIGHT + DAY + DAY / 2)
    assert pruned == AuditPruned(days=[(MIDNIGHT - DAY).date()], rows=1)  # D-200
    assert _where() == {
        "D, first instant": (d, ROWS["D, first instant"]),
        "D, last instant": (d, ROWS["D, last instant"]),
        "D+1, first instant": (d1, ROWS["D+1, first instant"]),
        "D+2, first instant": (d2, ROWS["D+2, first instant"]),
    }
