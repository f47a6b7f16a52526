"""Audit rows for tests, written by the audit writer's own function (so the dashboard's per-minute
counts are kept as in production)."""

from __future__ import annotations

import time

from apps.audit.writer import audit_records_write
from apps.kernel.audit_entry import AuditEntry
from apps.kernel.identity import Principal
from apps.tenants.models import ApiKey, Tenant


def audit_entry(
    *, tenant: Tenant, key: ApiKey | None = None, team: str | None = None, at: float | None = None,
    console_user: str = "", **values: object
) -> AuditEntry:
    principal = Principal(
        tenant_id=tenant.pk, tenant_slug=tenant.slug, key_id=key.pk if key else -1,
        key_name=key.name if key else "agent", team=team, console_user=console_user,
    )
    fields: dict[str, object] = dict(
        virtual_host="main", backend="demo", method="tools/call", exposed_name="add", upstream_name="add",
        outcome="ok", error_code=None, latency_ms=12.0, bytes_in=10, bytes_out=20, session_id="", trace_id="t" * 32,
        at=time.time() if at is None else at,
    )
    fields.update(values)
    return AuditEntry(principal=principal, **fields)  # type: ignore[arg-type]


def audit_rows_create(*, tenant: Tenant, count: int = 1, start: float | None = None, step: float = 1.0,
                      **values: object) -> None:
    """`count` rows, the first at `start` (default: `count` steps ago), one `step` apart."""
    start = time.time() - count * step if start is None else start
    audit_records_write([audit_entry(tenant=tenant, at=start + i * step, **values) for i in range(count)])
