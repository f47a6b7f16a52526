"""Celery tasks of the catalog. Thin: each calls one service, by id."""

from __future__ import annotations

from celery import shared_task

from apps.catalog.specs import spec_version_compile


@shared_task(acks_late=True, ignore_result=True)
def spec_compile(spec_version_id: int) -> None:
    spec_version_compile(spec_version_id=spec_version_id)
