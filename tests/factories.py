"""Test data, made through the services so that tests exercise the same paths as production."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from apps.catalog.models import Backend, VirtualHost
from apps.catalog.services import ToolTarget, backend_create, virtual_host_create
from apps.retrieval.embeddings import DIMENSIONS
from apps.retrieval.models import IndexedTool
from apps.tenants.models import Team, Tenant
from apps.tenants.services import IssuedKey, api_key_issue, team_create, tenant_create

_sequence = itertools.count(1)


def _next() -> int:
    return next(_sequence)


def tenant_factory(*, slug: str | None = None, name: str | None = None) -> Tenant:
    slug = slug or f"tenant-{_next()}"
    return tenant_create(slug=slug, name=name or slug.title())


def team_factory(*, tenant: Tenant | None = None, slug: str | None = None) -> Team:
    return team_create(tenant=tenant or tenant_factory(), slug=slug or f"team-{_next()}")


def api_key_factory(
    *, tenant: Tenant | None = None, name: str | None = None, team: Team | None = None, secret: str | None = None
) -> IssuedKey:
    tenant = tenant or (team.tenant if team else tenant_factory())
    return api_key_issue(tenant=tenant, name=name or f"key-{_next()}", team=team, secret=secret)


def backend_factory(
    *, tenant: Tenant | None = None, name: str | None = None, urls: Sequence[str] | None = None,
    transport: str = "streamable-http",
) -> Backend:
    n = _next()
    return backend_create(
        tenant=tenant or tenant_factory(),
        name=name or f"backend-{n}",
        urls=list(urls) if urls is not None else [f"http://127.0.0.1:{9000 + n}/mcp"],
        transport=transport,
    )


def virtual_host_factory(
    *,
    tenant: Tenant | None = None,
    slug: str | None = None,
    mounts: Mapping[str, Backend] | None = None,
    tool_aliases: Mapping[str, ToolTarget] | None = None,
) -> VirtualHost:
    tenant = tenant or tenant_factory()
    if mounts is None:
        mounts = {"main": backend_factory(tenant=tenant)}
    return virtual_host_create(
        tenant=tenant, slug=slug or f"vhost-{_next()}", mounts=mounts, tool_aliases=tool_aliases
    )


def openapi_backend_factory(
    *, tenant: Tenant | None = None, name: str | None = None, base_url: str = "http://127.0.0.1:9/"
) -> Backend:
    return backend_create(
        tenant=tenant or tenant_factory(), name=name or f"api-{_next()}", urls=[], kind=Backend.Kind.OPENAPI,
        base_url=base_url,
    )


def indexed_tool_factory(*, backend: Backend, name: str | None = None) -> IndexedTool:
    """An entry of the search index, as indexing writes one, with a placeholder embedding (for
    tests that count or list entries; searching wants real ones: index a spec instead)."""
    return IndexedTool.objects.create(
        tenant=backend.tenant, backend=backend, name=name or f"Tool{_next()}", document="", digest="x", search="",
        embedding=[0.0] * (DIMENSIONS - 1) + [1.0],
    )
