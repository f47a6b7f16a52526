from django.contrib import admin

from apps.catalog.models import Backend, BackendReplica, ToolAlias, VirtualHost, VirtualHostBackend
from apps.common.admin import ConfigAdmin


class BackendReplicaInline(admin.TabularInline):
    model = BackendReplica
    extra = 0


@admin.register(Backend)
class BackendAdmin(ConfigAdmin):
    list_display = ["name", "tenant", "kind", "transport"]
    list_filter = ["tenant", "kind", "transport"]
    inlines = [BackendReplicaInline]


class VirtualHostBackendInline(admin.TabularInline):
    model = VirtualHostBackend
    extra = 0


class ToolAliasInline(admin.TabularInline):
    model = ToolAlias
    extra = 0


@admin.register(VirtualHost)
class VirtualHostAdmin(ConfigAdmin):
    list_display = ["slug", "tenant", "allow_anonymous"]
    list_filter = ["tenant"]
    inlines = [VirtualHostBackendInline, ToolAliasInline]
