from django.contrib import admin

from apps.audit.models import AuditRecord


@admin.register(AuditRecord)
class AuditRecordAdmin(admin.ModelAdmin):
    """Read-only: audit rows are append-only."""

    list_display = ["created_at", "tenant_slug", "virtual_host", "principal", "method", "exposed_name", "outcome",
                    "error_code", "latency_ms"]
    list_filter = ["outcome", "method", "tenant_slug"]
    search_fields = ["exposed_name", "upstream_name", "principal", "session_id", "trace_id"]

    def has_add_permission(self, request) -> bool:  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False

    def has_delete_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False
