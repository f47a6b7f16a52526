"""Backends (with their replica URLs), virtual hosts, their map-key mounts and tool aliases.

Every write moves the owning tenant's configuration version (after commit). Domain errors are
raised as Django `ValidationError`s, checked before writing so that a caller inside a transaction
can report them and carry on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from apps.catalog.models import Backend, BackendReplica, ToolAlias, VirtualHost, VirtualHostBackend
from apps.catalog.specs import spec_recompile
from apps.catalog.validators import (
    BackendFields,
    VirtualHostFields,
    backend_check,
    virtual_host_check,
)
from apps.common.config_version import config_version_bump
from apps.common.validation_errors import problems_refuse
from apps.retrieval.indexing import tool_index_queue
from apps.tenants.models import ApiKey, Tenant

DEFAULT_TIMEOUT_SECONDS: float = Backend._meta.get_field("timeout_seconds").get_default()
DEFAULT_TOOL_NAME_MAX_LENGTH: int = Backend._meta.get_field("tool_name_max_length").get_default()


@dataclass(frozen=True)
class ToolTarget:
    """Where an alias routes: the backend mounted under `map_key`, tool `upstream_name`."""

    map_key: str
    upstream_name: str


def _check(*, tenant: Tenant, fields: BackendFields) -> None:
    problems_refuse(backend_check(fields, allow_private=tenant.private_networks_allowed))


def _replicas_set(*, backend: Backend, urls: Sequence[str]) -> None:
    if backend.kind == Backend.Kind.OPENAPI:
        backend.replicas.all().delete()
        return
    # Checked by `backend_check`. No full_clean on replicas: URLField's validator refuses single-label hosts (see the validator).
    replicas = [BackendReplica(backend=backend, url=url, position=i) for i, url in enumerate(urls)]
    if [r.url for r in backend.replicas.order_by("position")] == list(urls):
        return
    # Replace rather than patch: positions and the unique URL per backend make in-place
    # reordering awkward, and replica rows carry no state of their own.
    backend.replicas.all().delete()
    BackendReplica.objects.bulk_create(replicas)


@transaction.atomic
def backend_create(
    *,
    tenant: Tenant,
    name: str,
    urls: Sequence[str],
    kind: str = Backend.Kind.MCP,
    transport: str = Backend.Transport.STREAMABLE_HTTP,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    base_url: str = "",
    tool_name_max_length: int = DEFAULT_TOOL_NAME_MAX_LENGTH,
    include_deprecated: bool = False,
    max_concurrency: int | None = None,
) -> Backend:
    """Create a backend: an MCP server with one replica per URL, in the given order, or an OpenAPI
    service (no URLs; `base_url` overrides its spec's servers, and its tools come from a spec upload).
    `max_concurrency`: calls one gateway instance forwards to it at once (None: the deployment's default)."""
    _check(tenant=tenant, fields=BackendFields(kind, transport, tuple(urls), timeout_seconds, base_url,
                                               tool_name_max_length, max_concurrency))
    backend = Backend(
        tenant=tenant, name=name, kind=kind, transport=transport, timeout_seconds=timeout_seconds, base_url=base_url,
        tool_name_max_length=tool_name_max_length, include_deprecated=include_deprecated,
        max_concurrency=max_concurrency,
    )
    backend.full_clean()
    backend.save()
    _replicas_set(backend=backend, urls=urls)
    config_version_bump(tenant_id=tenant.pk)
    if kind == Backend.Kind.MCP:
        tool_index_queue(backend_id=backend.pk)  # an OpenAPI backend's are indexed when its spec is published
    return backend


@transaction.atomic
def backend_update(
    *,
    backend: Backend,
    kind: str,
    transport: str,
    urls: Sequence[str],
    timeout_seconds: float,
    base_url: str = "",
    tool_name_max_length: int = DEFAULT_TOOL_NAME_MAX_LENGTH,
    include_deprecated: bool = False,
    max_concurrency: int | None = None,
) -> Backend:
    """Replace every editable attribute of the backend, its replica URLs included. A change of an
    OpenAPI backend's compile options compiles its active spec again (as a new version)."""
    _check(tenant=backend.tenant, fields=BackendFields(kind, transport, tuple(urls), timeout_seconds, base_url,
                                                       tool_name_max_length, max_concurrency))
    recompile = (backend.tool_name_max_length, backend.include_deprecated) != (tool_name_max_length, include_deprecated)
    backend.kind = kind
    backend.transport = transport
    backend.timeout_seconds = timeout_seconds
    backend.base_url = base_url
    backend.tool_name_max_length = tool_name_max_length
    backend.include_deprecated = include_deprecated
    backend.max_concurrency = max_concurrency
    backend.full_clean()
    backend.save(update_fields=[
        "kind", "transport", "timeout_seconds", "base_url", "tool_name_max_length", "include_deprecated",
        "max_concurrency", "updated_at",
    ])
    if recompile and kind == Backend.Kind.OPENAPI:
        spec_recompile(backend=backend, reason="recompile: compile options changed")
    _replicas_set(backend=backend, urls=urls)
    config_version_bump(tenant_id=backend.tenant_id)
    if kind == Backend.Kind.MCP:
        tool_index_queue(backend_id=backend.pk)
    return backend


def backend_delete(*, backend: Backend) -> None:
    """Delete the backend. Refused while a virtual host mounts it."""
    mounted_on = sorted(f"{m.virtual_host.slug}:{m.map_key}" for m in backend.mounts.select_related("virtual_host"))
    if mounted_on:
        raise ValidationError(f"backend {backend.name!r} is still mounted on {', '.join(mounted_on)}")
    tenant_id = backend.tenant_id
    backend.delete()
    config_version_bump(tenant_id=tenant_id)


def _host_fields(virtual_host: VirtualHost, **changes: Any) -> VirtualHostFields:
    """What `virtual_host_check` reads of the host as stored, with `changes`."""
    stored = VirtualHostFields(
        map_keys=set(virtual_host.mounts.values_list("map_key", flat=True)),
        aliases=list(virtual_host.tool_aliases.values_list("alias", "map_key")),
        allow_anonymous=virtual_host.allow_anonymous, anonymous_key=virtual_host.anonymous_key_id is not None,
        tool_search=virtual_host.tool_search, tool_search_name=virtual_host.tool_search_name,
    )
    return replace(stored, **changes)


def _host_change_check(virtual_host: VirtualHost, changed: VirtualHostFields) -> None:
    """Refuse what is wrong with the host as `changed` would make it and is not wrong with it as
    stored: a state written past the services (the Django admin) does not block unrelated edits."""
    stored = set(virtual_host_check(_host_fields(virtual_host)))
    problems_refuse([problem for problem in virtual_host_check(changed) if problem not in stored])


def _anonymous(tenant_id: int, anonymous_key: ApiKey | None) -> dict[str, bool]:
    return {"anonymous_key": anonymous_key is not None,
            "anonymous_key_of_tenant": anonymous_key is None or anonymous_key.tenant_id == tenant_id}


@transaction.atomic
def virtual_host_create(
    *,
    tenant: Tenant,
    slug: str,
    mounts: Mapping[str, Backend] | None = None,
    tool_aliases: Mapping[str, ToolTarget] | None = None,
    allow_anonymous: bool = False,
    anonymous_key: ApiKey | None = None,
    tool_search: str = VirtualHost.ToolSearch.AUTO,
    tool_search_name: str = "tool_search",
) -> VirtualHost:
    """Create a virtual host mounting each backend under its map key, with the given aliases and
    tool_search (as `virtual_host_tool_search_set` gives it)."""
    problems_refuse(virtual_host_check(VirtualHostFields(
        map_keys=set(mounts or {}), aliases=[(alias, target.map_key) for alias, target in (tool_aliases or {}).items()],
        allow_anonymous=allow_anonymous, **_anonymous(tenant.pk, anonymous_key), tool_search=tool_search,
        tool_search_name=tool_search_name,
    )))
    virtual_host = VirtualHost(
        tenant=tenant, slug=slug, allow_anonymous=allow_anonymous, anonymous_key=anonymous_key,
        tool_search=tool_search, tool_search_name=tool_search_name,
    )
    virtual_host.full_clean()
    virtual_host.save()
    for map_key, backend in (mounts or {}).items():
        mount_set(virtual_host=virtual_host, map_key=map_key, backend=backend)
    for alias, target in (tool_aliases or {}).items():
        tool_alias_set(virtual_host=virtual_host, alias=alias, target=target)
    config_version_bump(tenant_id=tenant.pk)
    return virtual_host


@transaction.atomic
def virtual_host_settings_set(
    *, virtual_host: VirtualHost, allow_anonymous: bool, anonymous_key: ApiKey | None, tool_search: str,
    tool_search_name: str,
) -> VirtualHost:
    """Set who may call anonymously and the host's tool_search together (the console's and the API's
    edit): both as `virtual_host_update` and `virtual_host_tool_search_set` say, or neither (every
    problem of both said at once)."""
    _host_change_check(virtual_host, _host_fields(
        virtual_host, allow_anonymous=allow_anonymous, **_anonymous(virtual_host.tenant_id, anonymous_key),
        tool_search=tool_search, tool_search_name=tool_search_name,
    ))
    virtual_host_update(virtual_host=virtual_host, allow_anonymous=allow_anonymous, anonymous_key=anonymous_key)
    return virtual_host_tool_search_set(virtual_host=virtual_host, mode=tool_search, name=tool_search_name)


def virtual_host_update(
    *, virtual_host: VirtualHost, allow_anonymous: bool, anonymous_key: ApiKey | None
) -> VirtualHost:
    """Set who may call anonymously. Mounts and aliases change through mount_* / tool_alias_*."""
    _host_change_check(virtual_host, _host_fields(
        virtual_host, allow_anonymous=allow_anonymous, **_anonymous(virtual_host.tenant_id, anonymous_key)))
    virtual_host.allow_anonymous = allow_anonymous
    virtual_host.anonymous_key = anonymous_key
    virtual_host.full_clean()
    virtual_host.save(update_fields=["allow_anonymous", "anonymous_key", "updated_at"])
    config_version_bump(tenant_id=virtual_host.tenant_id)
    return virtual_host


@transaction.atomic
def virtual_host_tool_search_set(*, virtual_host: VirtualHost, mode: str, name: str = "tool_search") -> VirtualHost:
    """Give the host a `tool_search` tool (`mode` listed: beside its tools; only: alone in tools/list;
    auto: only on a host of many tools, none on a small one — docs/tool-search.md) or take it away
    (off). ValidationError for an unknown mode, a name that is not a tool name, or
    one an alias of the host already takes; nothing changes then."""
    _host_change_check(virtual_host, _host_fields(virtual_host, tool_search=mode, tool_search_name=name))
    virtual_host.tool_search = mode
    virtual_host.tool_search_name = name
    virtual_host.full_clean()
    virtual_host.save(update_fields=["tool_search", "tool_search_name", "updated_at"])
    config_version_bump(tenant_id=virtual_host.tenant_id)
    return virtual_host


def virtual_host_delete(*, virtual_host: VirtualHost) -> None:
    """Delete the virtual host with its mounts and aliases (the backends stay)."""
    tenant_id = virtual_host.tenant_id
    virtual_host.delete()
    config_version_bump(tenant_id=tenant_id)


def mount_add(*, virtual_host: VirtualHost, map_key: str, backend: Backend) -> VirtualHostBackend:
    """Mount `backend` under a map key the host does not use yet (replacing a mount is `mount_set`'s:
    it changes what every name under that key reaches)."""
    current = virtual_host.mounts.filter(map_key=map_key).select_related("backend").first()
    if current is not None:
        raise ValidationError({"map_key": f"map key {map_key!r} already mounts backend {current.backend.name!r}; "
                                          "unmount it first, or replace the mount"})
    return mount_set(virtual_host=virtual_host, map_key=map_key, backend=backend)


def mount_set(*, virtual_host: VirtualHost, map_key: str, backend: Backend) -> VirtualHostBackend:
    """Mount `backend` under `map_key`, replacing whatever that key mounted before."""
    if backend.tenant_id != virtual_host.tenant_id:
        raise ValidationError({"backend": f"backend {backend.name!r} belongs to another tenant"})
    mount = virtual_host.mounts.filter(map_key=map_key).first() or VirtualHostBackend(
        virtual_host=virtual_host, map_key=map_key
    )
    mount.backend = backend
    mount.full_clean()
    mount.save()
    config_version_bump(tenant_id=virtual_host.tenant_id)
    return mount


@transaction.atomic
def mount_delete(*, mount: VirtualHostBackend) -> None:
    """Unmount, with the curation rules and descriptions of that map key (they curate nothing any
    more). Refused while an alias routes to the map key (it would route nowhere)."""
    aliases = sorted(mount.virtual_host.tool_aliases.filter(map_key=mount.map_key).values_list("alias", flat=True))
    if aliases:
        raise ValidationError(f"map key {mount.map_key!r} is the target of aliases {', '.join(aliases)}")
    tenant_id = mount.virtual_host.tenant_id
    mount.virtual_host.tool_rules.filter(map_key=mount.map_key).delete()
    mount.virtual_host.tool_overrides.filter(map_key=mount.map_key).delete()
    mount.delete()
    config_version_bump(tenant_id=tenant_id)


def tool_alias_set(*, virtual_host: VirtualHost, alias: str, target: ToolTarget) -> ToolAlias:
    """Expose `alias` routed to `target`, replacing an alias of that name. The map key must be
    mounted on the virtual host."""
    stored = _host_fields(virtual_host)
    _host_change_check(virtual_host, replace(
        stored, aliases=[*((a, k) for a, k in stored.aliases if a != alias), (alias, target.map_key)]))
    tool_alias = virtual_host.tool_aliases.filter(alias=alias).first() or ToolAlias(
        virtual_host=virtual_host, alias=alias
    )
    tool_alias.map_key = target.map_key
    tool_alias.upstream_name = target.upstream_name
    tool_alias.full_clean()
    tool_alias.save()
    config_version_bump(tenant_id=virtual_host.tenant_id)
    return tool_alias


def tool_alias_delete(*, tool_alias: ToolAlias) -> None:
    tenant_id = tool_alias.virtual_host.tenant_id
    tool_alias.delete()
    config_version_bump(tenant_id=tenant_id)
