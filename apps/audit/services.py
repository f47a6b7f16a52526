"""Keeping the audit log: its daily partitions made ahead, and its rows to their configured age.

The log is partitioned by day of `created_at` (UTC; migration 0013): one table a day, named
`audit_auditrecord_pYYYYMMDD`, and a default partition for any row no day's partition takes (a
clock far off, this maintenance not run for a week), so that no row is ever refused. Partitions are
found by name: these functions and the migration are the only ones that make them."""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

from apps.audit.models import AuditMinute, AuditRecord

_TABLE = AuditRecord._meta.db_table
_DEFAULT = f"{_TABLE}_default"
_DAY_NAME = re.compile(rf"{_TABLE}_p(\d{{8}})")
#: How long a change of the partitions waits for the locks it takes; past that it gives up and
#: leaves everything as it was (the next run tries again) rather than queue every writer behind it.
_LOCK_TIMEOUT = "5s"


def _partition_name(day: datetime.date) -> str:
    return f"{_TABLE}_p{day:%Y%m%d}"


def _midnight(day: datetime.date) -> datetime.datetime:
    return datetime.datetime.combine(day, datetime.time(), datetime.UTC)


def audit_partitions_list() -> list[datetime.date]:
    """The days that have a partition, oldest first."""
    with connection.cursor() as cursor:
        return sorted(_partitions(cursor))


def _partitions(cursor: CursorWrapper) -> set[datetime.date]:
    cursor.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = %s::regclass",
        [_TABLE],
    )
    days = set()
    for (name,) in cursor.fetchall():
        if match := _DAY_NAME.fullmatch(name):
            days.add(datetime.datetime.strptime(match[1], "%Y%m%d").date())
    return days


def audit_partitions_ensure(
    *, days_ahead: int, days_back: int, now: datetime.datetime | None = None
) -> list[datetime.date]:
    """Make sure today (UTC, of `now`) and the `days_ahead` days after it have their partitions, and
    move the rows the default partition holds of any day from `days_back` days ago to `days_ahead`
    days ahead into that day's partition (made for them). Rows of other days stay in the default
    partition (the prune deletes the old ones; a clock years ahead does not make years of
    partitions). Returns the days whose partition was made, oldest first.

    One transaction per day: its partition is made as a table of its own, filled with its rows from
    the default partition, then attached. Writers of today's rows do not wait for it; readers of the
    log wait while it holds the default partition (milliseconds when that is near empty, as it is
    but after an outage). A day whose locks are not granted within `_LOCK_TIMEOUT` raises
    OperationalError and is left as it was; the days before it are made."""
    if days_ahead < 0 or days_back < 0:
        raise ValueError("days_ahead and days_back must not be negative")
    today = (now or timezone.now()).astimezone(datetime.UTC).date()
    wanted = {today + datetime.timedelta(days=n) for n in range(days_ahead + 1)}
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT DISTINCT (created_at AT TIME ZONE 'UTC')::date FROM {_DEFAULT}
            WHERE created_at >= %s AND created_at < %s""",
            [_midnight(today - datetime.timedelta(days=days_back)),
             _midnight(today + datetime.timedelta(days=days_ahead + 1))],
        )
        wanted |= {day for (day,) in cursor.fetchall()}
        missing = sorted(wanted - _partitions(cursor))
        for day in missing:
            _partition_make(cursor, day)
    return missing


def _partition_make(cursor: CursorWrapper, day: datetime.date) -> None:
    name = _partition_name(day)
    start, end = _midnight(day), _midnight(day + datetime.timedelta(days=1))
    with transaction.atomic():
        cursor.execute(f"SET LOCAL lock_timeout = '{_LOCK_TIMEOUT}'")
        # What the attachment takes anyway, taken first: no row of the day lands in the default
        # partition between the move and the attachment (which would then fail).
        cursor.execute(f"LOCK TABLE {_DEFAULT} IN ACCESS EXCLUSIVE MODE")
        cursor.execute(f"CREATE TABLE {name} (LIKE {_TABLE} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)")
        cursor.execute(
            f"""WITH moved AS (DELETE FROM {_DEFAULT} WHERE created_at >= %s AND created_at < %s RETURNING *)
            INSERT INTO {name} SELECT * FROM moved""",
            [start, end],
        )
        cursor.execute(f"ALTER TABLE {_TABLE} ATTACH PARTITION {name} FOR VALUES FROM (%s) TO (%s)", [start, end])


@dataclass(frozen=True)
class AuditPruned:
    """What a prune removed: the days whose partitions were dropped, and the rows of the default
    partition deleted one by one."""

    days: list[datetime.date]
    rows: int


def audit_records_prune(
    *, older_than_days: int, now: datetime.datetime | None = None, batch: int = 10_000
) -> AuditPruned:
    """Remove the audit log's days older than `older_than_days`, whole: a day's partition goes once
    its last instant is that old (detached and dropped: no row-by-row delete, nothing left for
    vacuum, whatever its size). A row is so kept at least `older_than_days` days and less than one
    day more. Rows of the default partition older than that are deleted, `batch` per statement
    (short locks); so are the dashboard's per-minute counts (a small table).

    The deletes come first: a partition whose locks are not granted within `_LOCK_TIMEOUT` (a long
    export reading the log, say) raises OperationalError and stays, whole, for the next run."""
    if older_than_days < 1:
        raise ValueError("older_than_days must be at least 1")
    cutoff = (now or timezone.now()) - datetime.timedelta(days=older_than_days)
    AuditMinute.objects.filter(minute__lt=cutoff).delete()
    with connection.cursor() as cursor:
        rows = _rows_delete(cursor, _DEFAULT, cutoff, batch)
        dropped = []
        for day in sorted(_partitions(cursor)):
            if _midnight(day + datetime.timedelta(days=1)) > cutoff:
                break
            with transaction.atomic():
                cursor.execute(f"SET LOCAL lock_timeout = '{_LOCK_TIMEOUT}'")
                cursor.execute(f"ALTER TABLE {_TABLE} DETACH PARTITION {_partition_name(day)}")
                cursor.execute(f"DROP TABLE {_partition_name(day)}")
            dropped.append(day)
    return AuditPruned(days=dropped, rows=rows)


def _rows_delete(cursor: CursorWrapper, table: str, cutoff: datetime.datetime, batch: int) -> int:
    deleted = 0
    while True:
        cursor.execute(
            f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE created_at < %s LIMIT %s)",
            [cutoff, batch],
        )
        deleted += cursor.rowcount
        if cursor.rowcount < batch:
            return deleted
