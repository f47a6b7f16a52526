"""Read-side queries for backends and virtual hosts."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import Count, Prefetch, Q, QuerySet

from apps.catalog.models import (
    OAUTH_SOURCES,
    Backend,
    BackendReplica,
    EgressCredential,
    SpecVersion,
    Tool,
    ToolAlias,
    ToolOverride,
    ToolRule,
    VirtualHost,
    VirtualHostBackend,
)
from apps.kernel.curation import Curation, ToolRuleSpec
from apps.kernel.names import Naming
from apps.tenants.models import Tenant


def backend_list(*, tenant: Tenant) -> QuerySet[Backend]:
    """The tenant's backends by name, replicas prefetched in position order."""
    return (
        Backend.objects.filter(tenant=tenant)
        .select_related("tenant", "active_spec")
        .defer("active_spec__document")
        .prefetch_related(Prefetch("replicas", queryset=BackendReplica.objects.order_by("position")))
        .order_by("name")
    )


def virtual_host_list(*, tenant: Tenant) -> QuerySet[VirtualHost]:
    """The tenant's virtual hosts by slug, mounts (with backends), aliases and curation prefetched."""
    return (
        VirtualHost.objects.filter(tenant=tenant)
        .select_related("anonymous_key", "tenant")
        .prefetch_related(
            Prefetch("mounts", queryset=VirtualHostBackend.objects.select_related("backend").order_by("map_key")),
            Prefetch("tool_aliases", queryset=ToolAlias.objects.order_by("alias")),
            "tool_rules",
            "tool_overrides",
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


def backend_get(*, tenant: Tenant, backend_id: int) -> Backend | None:
    """The tenant's backend with that id, its tenant and active spec joined; None if there is none."""
    return Backend.objects.select_related("tenant", "active_spec").defer("active_spec__document").filter(
        tenant=tenant, pk=backend_id
    ).first()


def spec_version_list(*, backend: Backend) -> QuerySet[SpecVersion]:
    """The backend's spec versions, newest first, without their documents."""
    return SpecVersion.objects.filter(backend=backend).select_related("backend__tenant").defer(*_SPEC_SUMMARY_DEFER).order_by("-number")


def spec_version_get(*, backend: Backend, number: int) -> SpecVersion | None:
    """Version `number` of the backend, without its document; None if there is none."""
    return SpecVersion.objects.filter(backend=backend, number=number).select_related("backend__tenant").defer(*_SPEC_SUMMARY_DEFER).first()


def spec_version_document_get(*, backend: Backend, number: int) -> tuple[bytes, str] | None:
    """The stored document of version `number` and its filename, exactly as uploaded; None if there is none."""
    row = SpecVersion.objects.filter(backend=backend, number=number).values_list("document", "filename").first()
    return None if row is None else (bytes(row[0]), row[1])


# --- Egress credentials (the API and the console; never the secret) ---------------------------------

_PLACES = {"api_key_header": "header", "api_key_query": "query parameter", "api_key_cookie": "cookie"}


def credential_kind_describe(kind: str, name: str = "", username: str = "") -> str:
    """How a credential of that kind is sent, in words: "API key in header X-API-Key", "Bearer token"."""
    if kind in _PLACES:
        return f"API key in {_PLACES[kind]} {name}" if name else f"API key in a {_PLACES[kind]}"
    if kind == "basic":
        return f"HTTP basic as {username}" if username else "HTTP basic"
    return "Bearer token" if kind == "bearer" else kind


@dataclass(frozen=True)
class EgressCredentialState:
    """What is known about a backend's credential without its secret. `kind`, `name`, `username`
    are as stored (`kind` "" = as the spec says); `applied_*` is what the gateway sends, resolved
    from the active spec like `apps.gateway.adapters.openapi_tool_server.egress_credential_resolve` does; `scheme` names
    the spec's scheme followed ("" when the kind is explicit or the spec names none)."""

    kind: str
    name: str
    username: str
    applied_kind: str
    applied_name: str
    scheme: str
    description: str
    created_at: datetime
    updated_at: datetime
    source: str = "static"
    tenant_secret: str = ""  # source tenant_secret: the secret's name
    identities: tuple[dict[str, str], ...] = ()  # per_identity: [{subject_kind, subject_name, issuer}]
    #: oauth_client_credentials and token_exchange: token_url, client_id, scope, audience, client_auth
    #: (and, for token_exchange, subject_issuer)
    oauth: dict[str, str] | None = None


def egress_credential_state(*, backend: Backend) -> EgressCredentialState | None:
    """The backend's credential as `EgressCredentialState`; None when it has none. The encrypted
    secret is not even loaded: nothing here needs it."""
    stored = (
        EgressCredential.objects.filter(backend=backend).select_related("tenant_secret").defer("secret", "tenant_secret__value")
        .first()
    )
    if stored is None:
        return None
    kind, name, scheme = egress_credential_applied(
        kind=stored.kind, name=stored.name, schemes=egress_schemes(backend=backend, source=stored.source)
    )
    origin = ""
    if not stored.kind:
        origin = f" (from the spec's scheme {scheme!r})" if scheme else " (the spec names no supported scheme, so bearer)"
    return EgressCredentialState(
        kind=stored.kind, name=stored.name, username=stored.username, applied_kind=kind, applied_name=name,
        scheme=scheme, description=credential_kind_describe(kind, name, stored.username) + origin,
        created_at=stored.created_at, updated_at=stored.updated_at, source=stored.source,
        tenant_secret=stored.tenant_secret.name if stored.tenant_secret else "",
        identities=tuple(stored.identities.values("subject_kind", "subject_name", "issuer")),
        oauth=_oauth_state(stored) if stored.source in OAUTH_SOURCES else None,
    )


def _oauth_state(stored: EgressCredential) -> dict[str, str]:
    state = {"token_url": stored.token_url, "client_id": stored.client_id, "scope": stored.scope,
             "audience": stored.audience, "client_auth": stored.client_auth}
    if stored.source == EgressCredential.Source.TOKEN_EXCHANGE:
        state["subject_issuer"] = stored.subject_issuer
    return state


def egress_credential_applied(*, kind: str, name: str, schemes: list[dict[str, str]]) -> tuple[str, str, str]:
    """What the gateway sends for a stored credential: (kind, name, scheme). A kind left to the
    spec takes its first supported security scheme (`schemes`, the preferred first) and that
    scheme's parameter name unless `name` overrides it; with no such scheme, bearer."""
    if kind:
        return kind, name, ""
    if not schemes:
        return "bearer", name, ""
    return schemes[0]["kind"], name or schemes[0]["parameter"], schemes[0]["name"]


def egress_schemes(*, backend: Backend, source: str) -> list[dict[str, str]]:
    """The schemes a credential without a kind follows: an OpenAPI spec's, except for OAuth access
    tokens and on MCP backends, which go as bearer tokens (none to follow)."""
    if backend.kind != Backend.Kind.OPENAPI or source in OAUTH_SOURCES:
        return []
    return backend_security_schemes(backend=backend)


def backend_security_schemes(*, backend: Backend) -> list[dict[str, str]]:
    """The supported security schemes of the backend's active spec version (`[{name, kind, parameter}]`,
    the preferred first); empty when it serves no spec."""
    return list(backend.active_spec.security_schemes) if backend.active_spec else []


# --- Virtual hosts (the API and the console) -------------------------------------------------------

def virtual_host_get(*, tenant: Tenant, virtual_host_id: int, prefetched: bool = True) -> VirtualHost | None:
    """The tenant's virtual host with that id, mounts (with backends), aliases and curation
    prefetched (not when `prefetched` is False: for a page that reads them a page at a time); None
    if there is none."""
    if not prefetched:
        found = VirtualHost.objects.filter(tenant=tenant, pk=virtual_host_id).select_related("anonymous_key", "tenant")
        return found.first()
    return virtual_host_list(tenant=tenant).filter(pk=virtual_host_id).first()


def mount_list(*, virtual_host: VirtualHost, search: str = "") -> QuerySet[VirtualHostBackend]:
    """The host's mounts by map key, with their backends; with `search`, those whose map key or
    backend name holds it (any case)."""
    mounts = virtual_host.mounts.select_related("backend").order_by("map_key")
    if search:
        mounts = mounts.filter(Q(map_key__icontains=search) | Q(backend__name__icontains=search))
    return mounts


def mount_keys_list(*, virtual_host: VirtualHost) -> list[str]:
    return list(virtual_host.mounts.order_by("map_key").values_list("map_key", flat=True))


def tool_alias_list(*, virtual_host: VirtualHost) -> QuerySet[ToolAlias]:
    return virtual_host.tool_aliases.order_by("alias")


def tool_rule_list(*, virtual_host: VirtualHost) -> QuerySet[ToolRule]:
    return virtual_host.tool_rules.order_by("pk")


def mount_get(*, virtual_host: VirtualHost, mount_id: int) -> VirtualHostBackend | None:
    return VirtualHostBackend.objects.filter(virtual_host=virtual_host, pk=mount_id).select_related("virtual_host").first()


def tool_alias_get(*, virtual_host: VirtualHost, alias_id: int) -> ToolAlias | None:
    return ToolAlias.objects.filter(virtual_host=virtual_host, pk=alias_id).select_related("virtual_host").first()


def tool_rule_get(*, virtual_host: VirtualHost, rule_id: int) -> ToolRule | None:
    return ToolRule.objects.filter(virtual_host=virtual_host, pk=rule_id).select_related("virtual_host").first()


def tool_override_get(*, virtual_host: VirtualHost, map_key: str, upstream_name: str) -> ToolOverride | None:
    return (ToolOverride.objects.filter(virtual_host=virtual_host, map_key=map_key, upstream_name=upstream_name)
            .select_related("virtual_host").first())


def virtual_host_curation_get(*, virtual_host: VirtualHost, backend_ids: Mapping[str, int]) -> Curation | None:
    """The host's compiled tool curation (`apps.kernel.curation`) over its mounts (`backend_ids`: map
    key -> backend id); None when it curates nothing. Reads the host's `tool_rules` and
    `tool_overrides` (prefetch them for many hosts), and, only when a rule selects by tag, the
    catalog's tool tags."""
    rules = [ToolRuleSpec(r.action, r.match, r.pattern, r.map_key) for r in virtual_host.tool_rules.all()]
    described = {(o.map_key, o.upstream_name): o.description for o in virtual_host.tool_overrides.all()}
    tags: dict[str, dict[str, list[str]]] = {}
    wanted = {rule.pattern for rule in rules if rule.match == ToolRule.Match.TAG}
    if wanted:
        by_backend: dict[int, dict[str, list[str]]] = {}
        carries = Q()
        for tag in wanted:  # only the tools that carry a tag some rule names
            carries |= Q(tags__contains=[tag])
        tagged = Tool.objects.filter(carries, backend_id__in=set(backend_ids.values()))
        for backend_id, name, its in tagged.values_list("backend_id", "name", "tags"):
            by_backend.setdefault(backend_id, {})[name] = its
        tags = {key: by_backend.get(backend_id, {}) for key, backend_id in backend_ids.items()}
    return Curation.build(rules, map_keys=backend_ids.keys(), tags=tags, descriptions=described)


def virtual_host_naming_get(*, virtual_host: VirtualHost) -> Naming:
    """The host's naming contract as the gateway builds it: mounts, aliases and curation, as stored
    now (not as `virtual_host` was prefetched)."""
    virtual_host = VirtualHost.objects.prefetch_related("tool_aliases", "tool_rules", "tool_overrides").get(
        pk=virtual_host.pk)
    mounts = dict(virtual_host.mounts.values_list("map_key", "backend_id"))
    aliases = {a.alias: (a.map_key, a.upstream_name) for a in virtual_host.tool_aliases.all()}
    return Naming.build(mounts, aliases, virtual_host_curation_get(virtual_host=virtual_host, backend_ids=mounts))


def indexed_tool_counts_get(*, tenant_id: int) -> dict[int, int]:
    """How many tools the search index holds for each of the tenant's backends (none: left out)."""
    from apps.retrieval.models import IndexedTool  # the index's app reads the catalog's models

    rows = IndexedTool.objects.filter(tenant_id=tenant_id).values("backend_id").annotate(tools=Count("id"))
    return {row["backend_id"]: row["tools"] for row in rows}


def tool_search_mode_effective(*, mode: str, backend_ids: Iterable[int], indexed: Mapping[int, int]) -> str:
    """The mode a host's tool_search has now: `auto` is `only` when the host's backends hold more
    than `GATEWAY_TOOL_SEARCH_AUTO_TOOLS` indexed tools together, else `off`; any other mode is
    itself. The index counts what `tools/list` offers (both kinds of backend are indexed), and a
    change of it moves the configuration version, so snapshots follow the count."""
    if mode != VirtualHost.ToolSearch.AUTO:
        return mode
    tools = sum(indexed.get(backend_id, 0) for backend_id in set(backend_ids))
    return VirtualHost.ToolSearch.ONLY if tools > settings.GATEWAY_TOOL_SEARCH_AUTO_TOOLS else VirtualHost.ToolSearch.OFF
