"""Partitioning a log that has rows (migration 0013): every row kept with its id, the ids going on
where they were, and a copy stopped halfway resumed without a row copied twice; and back."""

from __future__ import annotations

import datetime
import importlib
from collections.abc import Iterator

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from apps.audit.writer import audit_records_write
from tests.audit.test_writer import _entry

pytestmark = pytest.mark.django_db(transaction=True)  # migrations manage their own transactions

BEFORE = [("audit", "0012_auditrecord_interceptions")]
DAY = datetime.timedelta(days=1)
migration = importlib.import_module("apps.audit.migrations.0013_audit_partitioned")


def _migrate(targets: list[tuple[str, str]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


def _latest() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


@pytest.fixture
def unpartitioned() -> Iterator[None]:
    """The log as it was before partitioning; the latest schema again after the test, whatever it did."""
    latest = _latest()
    _migrate(BEFORE)
    try:
        yield
    finally:
        _migrate(latest)


def _rows() -> list[tuple[int, str, str]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, session_id, tableoid::regclass::text FROM audit_auditrecord ORDER BY id")
        return cursor.fetchall()


def _write_before(settings) -> datetime.date:  # noqa: ANN001
    """Rows of today, of 3 days ago and of 200 days ago, ids from 5001, into the unpartitioned log."""
    settings.GATEWAY_AUDIT_RETENTION_DAYS = 90
    with connection.cursor() as cursor:
        cursor.execute("SELECT setval(pg_get_serial_sequence('audit_auditrecord', 'id'), 5000)")
        cursor.execute("SELECT relkind FROM pg_class WHERE relname = 'audit_auditrecord'")
        assert cursor.fetchone() == ("r",)
    now = datetime.datetime.now(datetime.UTC)
    audit_records_write([_entry(at=(now - age * DAY).timestamp(), session_id=f"{age}d") for age in (0, 3, 200)])
    return now.date()


def test_rows_keep_their_ids_in_their_days_partitions_and_new_ids_follow(unpartitioned: None, settings) -> None:  # noqa: ANN001
    today = _write_before(settings)
    _migrate(_latest())
    assert _rows() == [
        (5001, "0d", f"audit_auditrecord_p{today:%Y%m%d}"),
        (5002, "3d", f"audit_auditrecord_p{today - 3 * DAY:%Y%m%d}"),
        (5003, "200d", "audit_auditrecord_default"),  # past the retention: the next prune's
    ]
    audit_records_write([_entry(session_id="new")])
    assert _rows()[-1][:2] == (5004, "new")


def test_a_copy_stopped_halfway_resumes_after_the_last_row_copied(unpartitioned: None, settings) -> None:  # noqa: ANN001
    _write_before(settings)
    with connection.schema_editor(atomic=False) as editor:
        migration.swap(None, editor)
        with connection.cursor() as cursor:
            migration.past_partitions_create(connection, cursor)
            cursor.execute("INSERT INTO audit_auditrecord SELECT * FROM audit_auditrecord_old WHERE id = 5001")
    audit_records_write([_entry(session_id="written meanwhile")])  # by an instance, into the new table
    _migrate(_latest())  # a copied row copied again would break the primary key
    assert [row[:2] for row in _rows()] == [(5001, "0d"), (5002, "3d"), (5003, "200d"), (5004, "written meanwhile")]


def test_back_to_one_table_with_the_rows_and_their_ids(settings) -> None:  # noqa: ANN001
    latest = _latest()
    try:
        audit_records_write([_entry(session_id="kept")])
        (kept_id, _, _), = _rows()
        _migrate(BEFORE)
        assert _rows() == [(kept_id, "kept", "audit_auditrecord")]
        audit_records_write([_entry(session_id="next")])
        assert _rows()[-1][:2] == (kept_id + 1, "next")
    finally:
        _migrate(latest)
