"""Celery tasks of the catalog. Thin: each calls one service, by id."""

from __future__ import annotations

from celery import shared_task

from apps.catalog.specs import spec_version_compile, spec_versions_requeue
from apps.common.task_metrics import task_timed


@shared_task(acks_late=True, ignore_result=True)
def spec_compile(spec_version_id: int) -> None:
    with task_timed("spec_compile"):
        spec_version_compile(spec_version_id=spec_version_id)


@shared_task(ignore_result=True)
def spec_compile_requeue() -> None:
    """Periodic (Celery beat): uploads whose compilation was never queued or whose worker died."""
    spec_versions_requeue()
