"""Partitions made ahead, days pruned whole past their age (the default partition's rows one by
one), and a change that cannot get its locks leaves everything as it was."""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import psycopg
import pytest
from django.db import OperationalError, connection

from apps.audit.models import AuditMinute, AuditRecord
from apps.audit.services import AuditPruned, audit_partitions_ensure, audit_partitions_list, audit_records_prune
from apps.audit.writer import audit_records_write
from tests.audit.test_writer import _entry

pytestmark = pytest.mark.django_db

# Days no other test's partition covers: the migration makes them around the real today.
NOW = datetime.datetime(2020, 3, 10, 12, 0, tzinfo=datetime.UTC)
DAY = datetime.timedelta(days=1)


def _write(*ages: datetime.timedelta) -> None:
    """One row per age before NOW, labelled by its age in hours (session_id)."""
    audit_records_write([_entry(at=(NOW - age).timestamp(), session_id=f"{age / datetime.timedelta(hours=1):g}h")
                         for age in ages])


def _kept() -> list[str]:
    return sorted(AuditRecord.objects.values_list("session_id", flat=True))


def _partition_of(session_id: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tableoid::regclass::text FROM audit_auditrecord WHERE session_id = %s", [session_id])
        return cursor.fetchone()[0]


@pytest.fixture
def blocker() -> Iterator[psycopg.Connection]:
    """Another session, to hold a lock on the log while a test's maintenance wants it."""
    settings = connection.settings_dict
    with psycopg.connect(host=settings["HOST"], port=settings["PORT"], user=settings["USER"],
                         dbname=settings["NAME"], password=settings["PASSWORD"] or None) as other:
        other.execute("SET lock_timeout = '2s'")  # never waits on the test's own transaction for long
        yield other


def test_today_and_the_days_ahead_get_their_partitions_once() -> None:
    days = [datetime.date(2020, 3, 10), datetime.date(2020, 3, 11), datetime.date(2020, 3, 12)]
    assert audit_partitions_ensure(days_ahead=2, days_back=90, now=NOW) == days
    assert audit_partitions_ensure(days_ahead=2, days_back=90, now=NOW) == []
    assert set(days) <= set(audit_partitions_list())
    _write(datetime.timedelta(hours=-12))  # tomorrow: into its partition, not the default one
    assert _partition_of("-12h") == "audit_auditrecord_p20200311"


def test_rows_of_days_outside_the_window_stay_in_the_default_partition() -> None:
    """Older than `days_back` (the prune's to delete) or past `days_ahead` (a clock far ahead)."""
    _write(100 * DAY, 3 * DAY, -30 * DAY)
    assert audit_partitions_ensure(days_ahead=1, days_back=90, now=NOW) == [
        datetime.date(2020, 3, 7), datetime.date(2020, 3, 10), datetime.date(2020, 3, 11)]
    assert [_partition_of(label) for label in ("2400h", "72h", "-720h")] == [
        "audit_auditrecord_default", "audit_auditrecord_p20200307", "audit_auditrecord_default"]


def test_negative_windows_are_refused() -> None:
    with pytest.raises(ValueError):
        audit_partitions_ensure(days_ahead=-1, days_back=1, now=NOW)


def test_a_partition_that_cannot_get_its_locks_is_not_made_and_rows_stay(
    blocker: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("apps.audit.services._LOCK_TIMEOUT", "50ms")
    _write(2 * DAY)
    blocker.execute("LOCK TABLE audit_auditrecord_default IN ACCESS SHARE MODE")  # a reader of the log
    with pytest.raises(OperationalError):
        audit_partitions_ensure(days_ahead=0, days_back=90, now=NOW)
    blocker.rollback()
    assert datetime.date(2020, 3, 8) not in audit_partitions_list()
    assert (_kept(), _partition_of("48h")) == (["48h"], "audit_auditrecord_default")


def test_days_past_the_retention_go_whole_and_old_rows_of_the_default_partition_in_batches() -> None:
    audit_partitions_ensure(days_ahead=0, days_back=0, now=NOW - 4 * DAY)  # 6 March
    audit_partitions_ensure(days_ahead=0, days_back=0, now=NOW - 3 * DAY)  # 7 March: the cutoff's day
    # 6 March; 7 March before and after the cutoff (noon); 5 March and 9 March (the default partition).
    _write(datetime.timedelta(hours=4 * 24 + 11), datetime.timedelta(hours=3 * 24 + 1),
           datetime.timedelta(hours=3 * 24 - 1), 5 * DAY, datetime.timedelta(hours=5 * 24 - 1), 1 * DAY)
    pruned = audit_records_prune(older_than_days=3, now=NOW, batch=1)
    assert pruned == AuditPruned(days=[datetime.date(2020, 3, 6)], rows=2)
    assert _kept() == ["24h", "71h", "73h"]  # 7 March is not wholly past the retention yet
    assert datetime.date(2020, 3, 6) not in audit_partitions_list()
    assert audit_records_prune(older_than_days=3, now=NOW) == AuditPruned(days=[], rows=0)
    assert audit_records_prune(older_than_days=3, now=NOW + DAY / 2).days == [datetime.date(2020, 3, 7)]
    assert _kept() == ["24h"]


def test_the_dashboards_counts_past_the_retention_go_and_the_others_stay() -> None:
    _write(5 * DAY, 1 * DAY)
    audit_records_prune(older_than_days=3, now=NOW)
    assert list(AuditMinute.objects.filter(tool="").values_list("minute", "calls")) == [
        (NOW - DAY, 1)]


def test_a_day_that_cannot_get_its_locks_stays_whole_for_the_next_prune(
    blocker: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("apps.audit.services._LOCK_TIMEOUT", "50ms")
    audit_partitions_ensure(days_ahead=0, days_back=0, now=NOW - 5 * DAY)
    _write(5 * DAY)
    blocker.execute("LOCK TABLE ONLY audit_auditrecord IN ACCESS SHARE MODE")  # an export reading the log
    with pytest.raises(OperationalError):
        audit_records_prune(older_than_days=3, now=NOW)
    blocker.rollback()
    assert (_kept(), _partition_of("120h")) == (["120h"], "audit_auditrecord_p20200305")
    assert audit_records_prune(older_than_days=3, now=NOW).days == [datetime.date(2020, 3, 5)]
    assert _kept() == []


def test_a_retention_below_a_day_is_refused() -> None:
    with pytest.raises(ValueError):
        audit_records_prune(older_than_days=0)
