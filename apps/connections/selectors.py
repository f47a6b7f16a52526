"""What the Connected accounts page shows: the tenant's backends that take each person's own
account, and the connections to them (never a token)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from apps.catalog.models import Backend, EgressCredential
from apps.connections.models import Connection, UpstreamServer
from apps.tenants.models import Tenant


def per_person_backend_list(*, tenant: Tenant) -> QuerySet[Backend]:
    return Backend.objects.filter(tenant=tenant, credential__source=EgressCredential.Source.PER_PERSON).order_by("name")


def per_person_backend_get(*, tenant: Tenant, backend_id: int) -> Backend | None:
    return (per_person_backend_list(tenant=tenant).select_related("credential", "tenant")
            .filter(pk=backend_id).first())


def account_rows(*, tenant: Tenant, user: Any) -> list[tuple[Backend, Connection | None]]:
    """The tenant's per-person backends, each with `user`'s connection to it (or None)."""
    mine = {c.backend_id: c for c in connection_list(tenant=tenant, user=user)}
    return [(backend, mine.get(backend.pk)) for backend in per_person_backend_list(tenant=tenant)]


def connection_list(*, tenant: Tenant, user: Any | None = None) -> QuerySet[Connection]:
    """The tenant's connections, the gateway's own first (`user`: that person's only)."""
    found = Connection.objects.filter(backend__tenant=tenant).select_related("backend", "user", "connected_by")
    if user is not None:
        found = found.filter(user=user)
    return found.order_by("backend__name", "user__username")


def connection_get(*, tenant: Tenant, connection_id: int) -> Connection | None:
    return connection_list(tenant=tenant).filter(pk=connection_id).first()


def upstream_server_get(*, backend: Backend) -> UpstreamServer | None:
    return UpstreamServer.objects.filter(backend=backend).first()
