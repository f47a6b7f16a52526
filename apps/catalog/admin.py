from django.contrib import admin

from apps.catalog.models import Backend, BackendReplica, SpecVersion, Tool, ToolAlias, VirtualHost, VirtualHostBackend
from apps.common.admin import ConfigAdmin, ReadOnlyAdmin


class BackendReplicaInline(admin.TabularInline):
    model = BackendReplica
    extra = 0


@admin.register(Backend)
class BackendAdmin(ConfigAdmin):
    list_display = ["name", "tenant", "kind", "transport", "base_url", "active_spec"]
    list_filter = ["tenant", "kind", "transport"]
    inlines = [BackendReplicaInline]
    # Published by compiling a spec (the console's spec page), never picked by hand; compile
    # options are changed where they trigger a recompile (the configuration file).
    readonly_fields = ["active_spec", "tool_name_max_length", "include_deprecated"]


@admin.register(SpecVersion)
class SpecVersionAdmin(ReadOnlyAdmin):
    list_display = ["backend", "number", "status", "tool_count", "filename", "created_at", "uploaded_by"]
    list_filter = ["status", "backend__tenant"]
    exclude = ["document"]  # megabytes of JSON; the REST API serves it


@admin.register(Tool)
class ToolAdmin(ReadOnlyAdmin):
    list_display = ["name", "backend", "spec_version", "operation_id"]
    list_filter = ["backend__tenant", "backend"]
    search_fields = ["name", "description"]


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
