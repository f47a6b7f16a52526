"""The beat tasks of the audit log do their service's work."""

from __future__ import annotations

import datetime

import pytest
from django.db import connection
from django.utils import timezone

from apps.audit.services import audit_partitions_list
from apps.audit.tasks import audit_partitions, audit_prune
from apps.audit.writer import audit_records_write
from tests.audit.test_writer import _entry

pytestmark = pytest.mark.django_db

DAY = datetime.timedelta(days=1)


def _partition_of(session_id: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tableoid::regclass::text FROM audit_auditrecord WHERE session_id = %s", [session_id])
        return cursor.fetchone()[0]


def test_partitions_are_made_a_week_ahead_and_the_default_partitions_rows_moved(settings) -> None:  # noqa: ANN001
    settings.GATEWAY_AUDIT_RETENTION_DAYS = 30
    today = timezone.now().astimezone(datetime.UTC).date()
    had = set(audit_partitions_list())
    past = next(today - n * DAY for n in range(1, 30) if today - n * DAY not in had)  # a day of no partition
    audit_records_write([_entry(at=datetime.datetime.combine(past, datetime.time(12), datetime.UTC).timestamp(),
                                session_id="late")])
    assert _partition_of("late") == "audit_auditrecord_default"
    audit_partitions.delay()
    assert {today + n * DAY for n in range(8)} | {past} <= set(audit_partitions_list())
    assert _partition_of("late") == f"audit_auditrecord_p{past:%Y%m%d}"


def test_rows_past_the_retention_are_pruned(settings) -> None:  # noqa: ANN001
    settings.GATEWAY_AUDIT_RETENTION_DAYS = 30
    now = timezone.now()
    audit_records_write([_entry(at=(now - 31 * DAY).timestamp(), session_id="old"),
                         _entry(at=(now - 29 * DAY).timestamp(), session_id="kept")])
    audit_prune.delay()
    with connection.cursor() as cursor:
        cursor.execute("SELECT session_id FROM audit_auditrecord")
        assert cursor.fetchall() == [("kept",)]
