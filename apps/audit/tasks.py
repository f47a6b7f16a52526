"""Celery tasks of the audit log. Thin: each calls one service."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from apps.audit.services import audit_partitions_ensure, audit_records_prune

#: Days ahead whose partitions are made: beat may be down for a week before rows land in the
#: default partition (and then they are only slower to read and to prune, never lost).
PARTITION_DAYS_AHEAD = 7


@shared_task(ignore_result=True)
def audit_prune() -> None:
    """Periodic (Celery beat): days of rows older than GATEWAY_AUDIT_RETENTION_DAYS go, whole."""
    audit_records_prune(older_than_days=settings.GATEWAY_AUDIT_RETENTION_DAYS)


@shared_task(ignore_result=True)
def audit_partitions() -> None:
    """Periodic (Celery beat): the log's daily partitions a week ahead; rows the default partition
    took within the retention go to their day's partition."""
    audit_partitions_ensure(days_ahead=PARTITION_DAYS_AHEAD, days_back=settings.GATEWAY_AUDIT_RETENTION_DAYS)
