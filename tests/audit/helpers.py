"""Reading audit rows written off the request path: they arrive within the writer's flush interval."""

from __future__ import annotations

import time

from apps.audit.models import AuditRecord


def audit_rows(tenant: str, count: int, timeout: float = 5.0, **filters: object) -> list[AuditRecord]:
    """The tenant's rows, oldest first, once there are `count` of them (or `timeout` passed)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = list(AuditRecord.objects.filter(tenant_slug=tenant, **filters).order_by("created_at"))
        if len(rows) >= count or time.monotonic() > deadline:
            return rows
        time.sleep(0.05)
