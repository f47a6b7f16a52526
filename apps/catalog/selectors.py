"""Read-side queries for backends and virtual hosts."""

from __future__ import annotations

from django.db.models import Prefetch, QuerySet

from apps.catalog.models import Backend, BackendReplica, ToolAlias, VirtualHost, VirtualHostBackend
from apps.tenants.models import Tenant


def backend_list(*, tenant: Tenant) -> QuerySet[Backend]:
    """The tenant's backends by name, replicas prefetched in position order."""
    return (
        Backend.objects.filter(tenant=tenant)
        .prefetch_related(Prefetch("replicas", queryset=BackendReplica.objects.order_by("position")))
        .order_by("name")
    )


def virtual_host_list(*, tenant: Tenant) -> QuerySet[VirtualHost]:
    """The tenant's virtual hosts by slug, mounts (with backends) and aliases prefetched."""
    return (
        VirtualHost.objects.filter(tenant=tenant)
        .select_related("anonymous_key", "tenant")
        .prefetch_related(
            Prefetch("mounts", queryset=VirtualHostBackend.objects.select_related("backend").order_by("map_key")),
            Prefetch("tool_aliases", queryset=ToolAlias.objects.order_by("alias")),
        )
        .order_by("slug")
    )
