from __future__ import annotations

from typing import Any

from django.contrib import admin

from apps.common.config_version import config_version_bump


class ConfigAdmin(admin.ModelAdmin):
    """Admin for models that gateway snapshots hold: edits move the tenant's version counter so
    every gateway instance picks them up."""

    def tenant_id_of(self, obj: Any) -> int:
        return obj.tenant_id

    def slugs_of(self, obj: Any) -> list[str]:
        """The tenant slugs a save or delete of `obj` creates, removes or renames (a tenant's own)."""
        return []

    def save_model(self, request, obj, form, change) -> None:  # type: ignore[no-untyped-def]
        slugs = self.slugs_of(obj)  # before the save: a rename's old slug
        super().save_model(request, obj, form, change)
        config_version_bump(tenant_id=self.tenant_id_of(obj), slugs={*slugs, *self.slugs_of(obj)})

    def delete_model(self, request, obj) -> None:  # type: ignore[no-untyped-def]
        tenant_id, slugs = self.tenant_id_of(obj), self.slugs_of(obj)
        super().delete_model(request, obj)
        config_version_bump(tenant_id=tenant_id, slugs=slugs)

    def save_related(self, request, form, formsets, change) -> None:  # type: ignore[no-untyped-def]
        super().save_related(request, form, formsets, change)
        config_version_bump(tenant_id=self.tenant_id_of(form.instance))


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records the gateway writes itself (audit rows, compiled specs): viewable, never edited here."""

    def has_add_permission(self, request) -> bool:  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False

    def has_delete_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False
