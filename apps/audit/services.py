"""Keeping the audit log to its configured age."""

from __future__ import annotations

import datetime

from django.db import connection
from django.utils import timezone

from apps.audit.models import AuditMinute, AuditRecord


def audit_records_prune(*, older_than_days: int, batch: int = 10_000) -> int:
    """Delete rows older than `older_than_days`, `batch` rows per statement (short locks, and a
    table with years of rows is not rewritten in one transaction); returns how many went. The
    dashboard's per-minute counts of that age go too."""
    if older_than_days < 1:
        raise ValueError("older_than_days must be at least 1")
    cutoff = timezone.now() - datetime.timedelta(days=older_than_days)
    table = connection.ops.quote_name(AuditRecord._meta.db_table)
    AuditMinute.objects.filter(minute__lt=cutoff).delete()
    deleted = 0
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE created_at < %s LIMIT %s)",
                [cutoff, batch],
            )
            deleted += cursor.rowcount
            if cursor.rowcount < batch:
                return deleted
