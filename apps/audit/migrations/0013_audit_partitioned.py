"""The audit log becomes a table partitioned by day of `created_at` (UTC), so that retention drops
whole days instead of deleting rows one by one (docs/deploy.md, "Audit storage").

PostgreSQL wants the partition key in every unique index: the primary key is (id, created_at) in the
database while Django keeps `id` as the model's primary key (ids stay unique: one sequence gives
them). The sequence goes on from where it was.

Forwards, in two steps:
1. One short transaction swaps the tables: the old one is renamed `audit_auditrecord_old` (its
   indexes dropped), the partitioned one takes its name, with a partition for each day from the
   oldest row's to a week ahead and a default partition for any other day. From its commit, the
   writers of running instances write into the new table.
2. The old rows are copied over in batches of ids, each batch its own transaction (a large log does
   not lock the writers out while it is copied; the console shows older rows as they arrive), then
   the old table is dropped. A run stopped halfway resumes after the last id copied.

Backwards (for a development database; the whole table is copied in one transaction): a plain table
again, with the indexes of 0012.
"""

import datetime

from django.conf import settings
from django.db import migrations, transaction

TABLE = "audit_auditrecord"
OLD = "audit_auditrecord_old"
SEQUENCE = "audit_auditrecord_id_seq"
DAYS_AHEAD = 7
BATCH = 50_000

# The model's indexes at 0012 (names as Django made them), on whichever table is `audit_auditrecord`.
INDEXES = (
    'CREATE INDEX "audit_auditrecord_created_at_77489571" ON {table} ("created_at")',
    'CREATE INDEX "audit_tenant_recent" ON {table} ("tenant_id", "created_at" DESC, "id" DESC)',
    'CREATE INDEX "audit_tenant_key" ON {table} ("tenant_id", "api_key_id", "created_at" DESC, "id" DESC)',
    'CREATE INDEX "audit_tenant_team" ON {table} ("tenant_id", "team", "created_at" DESC, "id" DESC)',
    'CREATE INDEX "audit_tenant_tool" ON {table} ("tenant_id", "exposed_name", "created_at" DESC, "id" DESC)',
    'CREATE INDEX "audit_tenant_backend" ON {table} ("tenant_id", "backend", "created_at" DESC, "id" DESC)',
    'CREATE INDEX "audit_tenant_outcome" ON {table} ("tenant_id", "outcome", "created_at" DESC, "id" DESC)',
    """CREATE INDEX "audit_tenant_task" ON {table} ("tenant_id", "task_id") WHERE NOT ("task_id" = '')""",
)
INDEX_NAMES = [sql.split('"')[1] for sql in INDEXES]


def _is_partitioned(cursor) -> bool:
    cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [TABLE])
    return cursor.fetchone()[0] == "p"


def _exists(cursor, name: str) -> bool:
    cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
    return cursor.fetchone()[0]


def _sequence_rename(cursor) -> tuple[int, bool]:
    """Move the ids' sequence out of the way of the new table's; returns where it stands."""
    cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [TABLE])
    sequence = cursor.fetchone()[0]
    cursor.execute(f"SELECT last_value, is_called FROM {sequence}")
    last_value, is_called = cursor.fetchone()
    cursor.execute(f"ALTER SEQUENCE {sequence} RENAME TO {OLD}_id_seq")
    return last_value, is_called


def swap(apps, schema_editor) -> None:
    connection = schema_editor.connection
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        if _is_partitioned(cursor):
            return  # swapped by an earlier run that stopped while copying
        cursor.execute(f"LOCK TABLE {TABLE} IN ACCESS EXCLUSIVE MODE")
        last_value, is_called = _sequence_rename(cursor)
        cursor.execute(f"ALTER TABLE {TABLE} RENAME TO {OLD}")
        cursor.execute(f"ALTER TABLE {OLD} RENAME CONSTRAINT {TABLE}_pkey TO {OLD}_pkey")
        cursor.execute(f"ALTER INDEX {TABLE}_created_at_77489571 RENAME TO {OLD}_created_at")  # finds the oldest
        for name in INDEX_NAMES[1:]:
            cursor.execute(f'DROP INDEX "{name}"')

        # Columns, defaults and checks as they are (column order included), but `id` is no identity
        # column: PostgreSQL before 17 has none on partitioned tables. The sequence is owned instead.
        cursor.execute(
            f"CREATE TABLE {TABLE} (LIKE {OLD} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE) "
            "PARTITION BY RANGE (created_at)"
        )
        cursor.execute(f"CREATE SEQUENCE {SEQUENCE} AS bigint OWNED BY {TABLE}.id")
        cursor.execute("SELECT setval(%s, %s, %s)", [SEQUENCE, last_value, is_called])
        cursor.execute(f"ALTER TABLE {TABLE} ALTER COLUMN id SET DEFAULT nextval('{SEQUENCE}')")
        cursor.execute(f"ALTER TABLE {TABLE} ADD CONSTRAINT {TABLE}_pkey PRIMARY KEY (id, created_at)")
        for sql in INDEXES:
            cursor.execute(sql.format(table=TABLE))
        cursor.execute(f"CREATE TABLE {TABLE}_default PARTITION OF {TABLE} DEFAULT")
        today = datetime.datetime.now(datetime.UTC).date()
        for n in range(DAYS_AHEAD + 1):
            _partition_create(cursor, today + datetime.timedelta(days=n))


def _partition_create(cursor, day: datetime.date) -> None:
    if _exists(cursor, f"{TABLE}_p{day:%Y%m%d}"):
        return
    start = datetime.datetime.combine(day, datetime.time(), datetime.UTC)
    cursor.execute(
        f"CREATE TABLE {TABLE}_p{day:%Y%m%d} PARTITION OF {TABLE} FOR VALUES FROM (%s) TO (%s)",
        [start, start + datetime.timedelta(days=1)],
    )


def past_partitions_create(connection, cursor) -> None:
    """A partition for each past day of the retention the old rows cover, one transaction each (a
    long retention would be more locks than one transaction may hold); older rows go into the
    default partition, and the next prune deletes them."""
    cursor.execute(f"SELECT min(created_at) FROM {OLD}")
    oldest = cursor.fetchone()[0]
    today = datetime.datetime.now(datetime.UTC).date()
    day = today
    if oldest:
        day = max(oldest.astimezone(datetime.UTC).date(),
                  today - datetime.timedelta(days=settings.GATEWAY_AUDIT_RETENTION_DAYS))
    while day < today:
        with transaction.atomic(using=connection.alias):
            _partition_create(cursor, day)
        day += datetime.timedelta(days=1)


def copy(apps, schema_editor) -> None:
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        if not _exists(cursor, OLD):
            return
        past_partitions_create(connection, cursor)
        cursor.execute(f"SELECT coalesce(max(id), 0) FROM {OLD}")
        last = cursor.fetchone()[0]
        # Rows written since the swap have ids past the old table's: the copied ones are those below.
        cursor.execute(f"SELECT coalesce(max(id), 0) FROM {TABLE} WHERE id <= %s", [last])
        done = cursor.fetchone()[0]
        while done is not None and done < last:
            with transaction.atomic(using=connection.alias):
                cursor.execute(
                    f"""WITH batch AS (
                        INSERT INTO {TABLE} SELECT * FROM {OLD} WHERE id > %s ORDER BY id LIMIT %s RETURNING id
                    ) SELECT max(id) FROM batch""",
                    [done, BATCH],
                )
                done = cursor.fetchone()[0]
        cursor.execute(f"DROP TABLE {OLD}")


def unpartition(apps, schema_editor) -> None:
    connection = schema_editor.connection
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute(f"LOCK TABLE {TABLE} IN ACCESS EXCLUSIVE MODE")
        last_value, is_called = _sequence_rename(cursor)
        cursor.execute(f"ALTER TABLE {TABLE} RENAME TO {OLD}")
        cursor.execute(f"ALTER TABLE {OLD} RENAME CONSTRAINT {TABLE}_pkey TO {OLD}_pkey")
        for name in INDEX_NAMES:
            cursor.execute(f'DROP INDEX "{name}"')
        cursor.execute(f"CREATE TABLE {TABLE} (LIKE {OLD} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)")
        cursor.execute(f"ALTER TABLE {TABLE} ALTER COLUMN id DROP DEFAULT")  # the old table's sequence
        cursor.execute(f"ALTER TABLE {TABLE} ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY")
        cursor.execute(f"SELECT setval(pg_get_serial_sequence('{TABLE}', 'id'), %s, %s)", [last_value, is_called])
        cursor.execute(f"INSERT INTO {TABLE} SELECT * FROM {OLD}")
        cursor.execute(f"ALTER TABLE {TABLE} ADD CONSTRAINT {TABLE}_pkey PRIMARY KEY (id)")
        for sql in INDEXES:
            cursor.execute(sql.format(table=TABLE))
        cursor.execute(f"DROP TABLE {OLD}")  # its partitions with it


class Migration(migrations.Migration):
    atomic = False  # each step manages its transactions

    dependencies = [
        ("audit", "0012_auditrecord_interceptions"),
    ]

    operations = [
        migrations.RunPython(swap, unpartition),
        migrations.RunPython(copy, migrations.RunPython.noop),
    ]
