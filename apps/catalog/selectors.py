"""Read-side queries for backends and virtual hosts."""

from __future__ import annotations

from django.db.models import Prefetch, QuerySet

from apps.catalog.models import Backend, BackendReplica, SpecVersion, Tool, ToolAlias, VirtualHost, VirtualHostBackend
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


def tool_records_list(*, spec_version_id: int) -> list[dict]:
    """The compiled tools of a spec version as `openapi.records` records, by name."""
    fields = ("name", "description", "input_schema", "output_schema", "annotations", "binding", "operation_id",
              "pointer")
    rows = Tool.objects.filter(spec_version_id=spec_version_id).order_by("name").values(*fields)
    return [{**row, "operation_id": row["operation_id"] or None} for row in rows]


# --- Backends and their OpenAPI spec versions (the API and the console) ------------------------------

_SPEC_SUMMARY_DEFER = ("document",)


def backend_get(*, backend_id: int) -> Backend | None:
    """The backend with that id (any tenant), its tenant and active spec joined; None if there is none."""
    return Backend.objects.select_related("tenant", "active_spec").defer("active_spec__document").filter(
        pk=backend_id
    ).first()


def backend_list_all() -> QuerySet[Backend]:
    """Every tenant's backends, by tenant slug then name, with the active spec (without its document)."""
    return (
        Backend.objects.select_related("tenant", "active_spec")
        .defer("active_spec__document")
        .order_by("tenant__slug", "name")
    )


def spec_version_list(*, backend: Backend) -> QuerySet[SpecVersion]:
    """The backend's spec versions, newest first, without their documents."""
    return SpecVersion.objects.filter(backend=backend).defer(*_SPEC_SUMMARY_DEFER).order_by("-number")


def spec_version_get(*, backend: Backend, number: int) -> SpecVersion | None:
    """Version `number` of the backend, without its document; None if there is none."""
    return SpecVersion.objects.filter(backend=backend, number=number).defer(*_SPEC_SUMMARY_DEFER).first()


def spec_version_document_get(*, backend: Backend, number: int) -> tuple[bytes, str] | None:
    """The stored document of version `number` and its filename, exactly as uploaded; None if there is none."""
    row = SpecVersion.objects.filter(backend=backend, number=number).values_list("document", "filename").first()
    return None if row is None else (bytes(row[0]), row[1])
