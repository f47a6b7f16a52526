from django.contrib import admin

from apps.common.admin import ReadOnlyAdmin
from apps.policies.models import AccessPolicy, AccessRule, Budget, RateLimit, ToolCost


class AccessRuleInline(admin.TabularInline):
    model = AccessRule
    extra = 0
    can_delete = False
    readonly_fields = ["rule_id", "position", "subject_kind", "subject_name", "effect", "tools", "condition"]

    def has_add_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False


@admin.register(AccessPolicy)
class AccessPolicyAdmin(ReadOnlyAdmin):
    """Shown, not edited here: rules are checked (CEL compiled, subjects found) when set through
    `gateway apply` or the services, which the admin's forms would bypass."""

    list_display = ["virtual_host", "default_effect", "updated_at"]
    inlines = [AccessRuleInline]


@admin.register(RateLimit, Budget, ToolCost)
class LimitAdmin(ReadOnlyAdmin):
    """Shown, not edited here: the services check a change (subjects found, the tenant's plan allows
    editing) before it is stored, which the admin's forms would bypass."""
