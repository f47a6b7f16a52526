"""Loading one pool (tier) of `../shared/data/catalog` into the real index, through the real
compiler: one tenant per pool, one OpenAPI backend per service, each spec uploaded, compiled and
indexed by the product's own services. A second run reuses what is there: a spec already active
is not uploaded again, and indexing embeds only tools whose text changed."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

from django.db import transaction

from apps.catalog.models import Backend, SpecVersion, Tool, VirtualHost
from apps.catalog.services import (
    backend_create,
    backend_delete,
    mount_set,
    virtual_host_create,
    virtual_host_tool_search_set,
)
from apps.catalog.specs import spec_upload, spec_version_compile
from apps.retrieval.indexing import prerequisites_sync, tool_index_sync
from apps.retrieval.search import SearchScope
from apps.tenants.models import Tenant
from apps.tenants.selectors import api_key_get_by_secret
from apps.tenants.services import api_key_issue, tenant_create

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
CATALOG = SHARED / "catalog"


@dataclass
class Pool:
    tenant: Tenant
    scope: SearchScope
    tool_ids: dict[tuple[int, str], str]  # (backend id, tool name) → "<service>::<operationId>"
    compile_seconds: float
    index_seconds: float
    embedded: int


def _spec_path(service: str) -> Path:
    for vendor in ("aws", "alibaba", "restbench"):
        path = CATALOG / "openapi" / vendor / f"{service}.json"
        if path.exists():
            return path
    raise FileNotFoundError(f"no spec for service {service!r} under {CATALOG / 'openapi'}")


def pool_load(tier: str) -> Pool:
    wanted: dict[str, set[str]] = {}
    for line in (CATALOG / "tiers" / f"{tier}.txt").read_text().split():
        service, operation = line.split("::", 1)
        wanted.setdefault(service, set()).add(operation)
    slug = f"eval-{tier}".replace("_", "-")
    tenant = Tenant.objects.filter(slug=slug).first() or tenant_create(slug=slug, name=f"Retrieval evaluation: {tier}")
    compile_seconds = index_seconds = 0.0
    embedded = 0
    tool_ids: dict[tuple[int, str], str] = {}
    whole: list[int] = []
    restricted: list[tuple[int, tuple[str, ...]]] = []
    for service in sorted(wanted):
        name = _backend_name(service)
        for stale in Backend.objects.filter(tenant=tenant, name=name, include_deprecated=False):
            backend_delete(backend=stale)  # made by an older harness, without deprecated operations
        backend = Backend.objects.filter(tenant=tenant, name=name, include_deprecated=True).first() or backend_create(
            tenant=tenant, name=name, urls=[], kind=Backend.Kind.OPENAPI, base_url="http://127.0.0.1:9/",
            include_deprecated=True)  # the pools list deprecated operations too
        document = _spec_path(service).read_bytes()
        active = backend.active_spec
        if active is None or hashlib.sha256(bytes(active.document)).digest() != hashlib.sha256(document).digest():
            started = time.perf_counter()
            version = spec_upload(backend=backend, document=document, filename=f"{service}.json")
            version = spec_version_compile(spec_version_id=version.pk)
            if version is None or version.status != SpecVersion.Status.READY:
                raise RuntimeError(f"{service}: compile failed: {version.errors if version else 'gone'}")
            compile_seconds += time.perf_counter() - started
        started = time.perf_counter()
        embedded += tool_index_sync(backend_id=backend.pk, chains=False).embedded
        index_seconds += time.perf_counter() - started
        names = dict(Tool.objects.filter(backend=backend).values_list("operation_id", "name"))
        missing = wanted[service] - names.keys()
        if missing:
            raise RuntimeError(f"{service}: the compiled spec lacks {sorted(missing)[:5]}")
        for operation in wanted[service]:
            tool_ids[(backend.pk, names[operation])] = f"{service}::{operation}"
        if wanted[service] == names.keys():
            whole.append(backend.pk)  # as a caller who sees the whole service is asked about
        else:
            restricted.append((backend.pk, tuple(sorted(names[operation] for operation in wanted[service]))))
    started = time.perf_counter()
    prerequisites_sync(tenant_id=tenant.pk)
    index_seconds += time.perf_counter() - started
    scope = SearchScope(backends=tuple(whole), restricted=tuple(restricted))
    return Pool(tenant, scope, tool_ids, compile_seconds, index_seconds, embedded)


def _backend_name(service: str) -> str:
    """Backend names allow letters, digits, '-' and '_' (catalog.validators); services use the same."""
    return service[:64]


def pool_host_prepare(*, tier: str, slug: str, mode: str, key: str) -> str:
    """A virtual host `slug` of the pool's tenant mounting every backend of it, with `tool_search`
    in `mode`, and the API key `key` (made once: a secret is one key's, so give each pool its own);
    the host's path on the gateway."""
    tenant = pool_load(tier).tenant
    host = VirtualHost.objects.filter(tenant=tenant, slug=slug).first() or virtual_host_create(tenant=tenant, slug=slug)
    if not host.mounts.exists():
        with transaction.atomic():
            for n, backend in enumerate(Backend.objects.filter(tenant=tenant).order_by("pk")):
                mount_set(virtual_host=host, map_key=f"b{n}", backend=backend)  # map keys: 32 characters at most
    virtual_host_tool_search_set(virtual_host=host, mode=mode)
    if api_key_get_by_secret(secret=key) is None:
        api_key_issue(tenant=tenant, name=f"bench-{slug}", secret=key)
    return f"/mcp/{tenant.slug}/{host.slug}"
