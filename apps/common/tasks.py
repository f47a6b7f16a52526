"""Celery tasks of the platform itself."""

from __future__ import annotations

from celery import shared_task

from apps.common.health import worker_heartbeat_record


@shared_task(ignore_result=True)
def worker_heartbeat() -> None:
    """Periodic (Celery beat, GATEWAY_WORKER_HEARTBEAT_SECONDS): a worker and beat are alive; `/readyz`
    and `/metrics` read it."""
    worker_heartbeat_record()
