from django.contrib import admin

from apps.common.admin import ConfigAdmin
from apps.tenants.models import ApiKey, Plan, Team, Tenant


@admin.register(Plan)
class PlanAdmin(ConfigAdmin):
    """Plans are the platform's: changing one reaches every tenant on it (one configuration counter
    serves all tenants, so any tenant id moves it)."""

    list_display = ["name", "daily", "monthly", "limits_editable"]

    def tenant_id_of(self, obj: Plan) -> int:
        return 0


@admin.register(Tenant)
class TenantAdmin(ConfigAdmin):
    list_display = ["slug", "name", "plan", "created_at"]
    search_fields = ["slug", "name"]

    def tenant_id_of(self, obj: Tenant) -> int:
        return obj.pk


@admin.register(Team)
class TeamAdmin(ConfigAdmin):
    list_display = ["slug", "tenant"]
    list_filter = ["tenant"]


@admin.register(ApiKey)
class ApiKeyAdmin(ConfigAdmin):
    list_display = ["name", "tenant", "team", "prefix", "expires_at", "revoked_at"]
    list_filter = ["tenant"]
    readonly_fields = ["prefix", "secret_hash"]
    search_fields = ["name", "prefix"]

    def has_add_permission(self, request) -> bool:  # type: ignore[no-untyped-def]
        # A key's secret is shown once when it is issued; issue keys with `manage.py gateway apply`
        # or the console, never by typing a hash here.
        return False
