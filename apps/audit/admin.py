from django.contrib import admin

from apps.audit.models import AuditRecord
from apps.common.admin import ReadOnlyAdmin


@admin.register(AuditRecord)
class AuditRecordAdmin(ReadOnlyAdmin):
    """Read-only: audit rows are append-only."""

    list_display = ["created_at", "tenant_slug", "virtual_host", "principal", "method", "exposed_name", "outcome",
                    "error_code", "latency_ms"]
    list_filter = ["outcome", "method", "tenant_slug"]
    search_fields = ["exposed_name", "upstream_name", "principal", "session_id", "trace_id"]
