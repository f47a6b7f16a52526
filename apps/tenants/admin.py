from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin

from apps.common.admin import ConfigAdmin
from apps.tenants.access_changes import access_changed_notify
from apps.tenants.models import ApiKey, Plan, Team, Tenant

User = get_user_model()


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

    def slugs_of(self, obj: Tenant) -> list[str]:
        stored = Tenant.objects.filter(pk=obj.pk).values_list("slug", flat=True).first() if obj.pk else None
        return [slug for slug in {obj.slug, stored} if slug]

    def delete_model(self, request, obj: Tenant) -> None:  # type: ignore[no-untyped-def]
        members = list(obj.memberships.values_list("user_id", flat=True))
        super().delete_model(request, obj)
        access_changed_notify(user_ids=members)


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


admin.site.unregister(User)


@admin.register(User)
class GatewayUserAdmin(UserAdmin):
    """Django's user admin; a user deactivated, demoted or deleted here has their open console
    connections told (`apps.tenants.access_changes`)."""

    def save_model(self, request, obj, form, change) -> None:  # type: ignore[no-untyped-def]
        super().save_model(request, obj, form, change)
        if change:
            access_changed_notify(user_ids=[obj.pk])

    def delete_model(self, request, obj) -> None:  # type: ignore[no-untyped-def]
        user_id = obj.pk
        super().delete_model(request, obj)
        access_changed_notify(user_ids=[user_id])

    def delete_queryset(self, request, queryset) -> None:  # type: ignore[no-untyped-def]
        user_ids = list(queryset.values_list("pk", flat=True))
        super().delete_queryset(request, queryset)
        access_changed_notify(user_ids=user_ids)
