"""Celery tasks of the audit log. Thin: each calls one service."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from apps.audit.services import audit_records_prune


@shared_task(ignore_result=True)
def audit_prune() -> None:
    """Periodic (Celery beat): rows older than GATEWAY_AUDIT_RETENTION_DAYS go."""
    audit_records_prune(older_than_days=settings.GATEWAY_AUDIT_RETENTION_DAYS)
