"""Per-tenant configuration snapshots for the hot path (house rule 7): loaded from the database when
a tenant is first called, served from memory, reloaded when that tenant's configuration version
counter in Redis moves (`apps.common.config_version`) — another tenant's edit reloads nothing here."""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import redis.asyncio
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection, transaction
from django.db.models import Prefetch
from django.utils import timezone

from apps.catalog.models import Backend, SpecVersion, VirtualHost
from apps.catalog.selectors import indexed_tool_counts_get, tool_search_mode_effective, virtual_host_curation_get
from apps.common.config_version import CONFIG_VERSIONS_KEY, slug_field
from apps.gateway.adapters.egress_credentials import OAuthTokens, egress_plan_build
from apps.gateway.adapters.openapi_tool_server import OpenApiHttp, openapi_server_build
from apps.gateway.pipeline.metrics import Counters
from apps.gateway.pipeline.ports import StoreUnavailable
from apps.gateway.pipeline.values import BackendView, ToolSearchConfig, VirtualHostView
from apps.kernel.identity import Limit, OwnIssuerView, Principal, TokenIssuerView
from apps.kernel.singleflight import SingleFlight
from apps.oauth.selectors import own_issuer_get
from apps.policies.models import RateLimit
from apps.policies.selectors import (
    EffectiveBudgets,
    access_policy_compiled,
    budgets_effective,
    interceptors_compiled,
    tool_costs_compiled,
)
from apps.tenants.keys import key_hash
from apps.tenants.models import ApiKey, Team, Tenant, TokenIssuer

log = logging.getLogger(__name__)

#: What a snapshot needs of a backend's active spec version.
_SPEC_FIELDS = ("id", "backend_id", "title", "api_version", "security_schemes")
#: How many missing tenant slugs an instance remembers between configuration changes.
_MAX_UNKNOWN = 1000


@dataclass(frozen=True, slots=True)
class _Key:
    principal: Principal
    expires_at: float | None  # unix time
    revoked: bool


class TenantSnapshot:
    """One tenant's keys, token issuers and virtual hosts, immutable once built."""

    def __init__(
        self,
        keys: list[_Key],
        key_hashes: dict[str, int],
        vhosts: dict[str, VirtualHostView],
        *,
        tenant: tuple[int, str] = (0, ""),
        issuers: tuple[TokenIssuerView, ...] = (),
        own_issuer: OwnIssuerView | None = None,
        teams: frozenset[str] = frozenset(),
        team_limits: dict[str, Limit] | None = None,
        budgets: EffectiveBudgets | None = None,
    ):
        self._keys = {key.principal.key_id: key for key in keys}
        self._by_hash = key_hashes
        self._vhosts = vhosts
        self._tenant = tenant
        self.tenant_id = tenant[0]
        self.issuers = issuers
        self.own_issuer = own_issuer
        self._teams = teams
        self._team_limits = team_limits or {}
        self._budgets = budgets

    def principal_for_token(
        self, issuer: TokenIssuerView, claims: Mapping[str, Any], *, token: str = "", own: bool = False
    ) -> Principal:
        subject = str(claims.get(issuer.subject_claim) or "")
        named = claims.get(issuer.team_claim)
        # One team: a string, or the first known team of a list (a `groups` claim).
        candidates = [named] if isinstance(named, str) else named if isinstance(named, list) else []
        team = next((t for t in candidates if isinstance(t, str) and t in self._teams), None)
        scope = claims.get("scope", claims.get("scp", ""))
        scopes = tuple(scope.split() if isinstance(scope, str) else (s for s in scope if isinstance(s, str)))
        digest = hashlib.blake2b(f"{issuer.issuer}\x00{subject}".encode(), digest_size=7).digest()
        limit = self._team_limits.get(team or "")
        # A token spends from its team's budget; without a team, its subject is capped by the plan.
        budget = None
        if self._budgets is not None:
            budget = self._budgets.of("team", team) if team else self._budgets.of("token", f"{subject}@{issuer.issuer}")
        return Principal(
            tenant_id=self._tenant[0], tenant_slug=self._tenant[1],
            key_id=-1 - int.from_bytes(digest, "big"),  # negative: never an API key's id
            key_name=subject, team=team, limits=(limit,) if limit else (), issuer=issuer.issuer, scopes=scopes,
            budgets=(budget,) if budget else (), token="" if own else token, person=subject if own else "",
        )

    def virtual_host(self, slug: str) -> VirtualHostView | None:
        return self._vhosts.get(slug)

    def _usable(self, key: _Key | None) -> bool:
        return key is not None and not key.revoked and (key.expires_at is None or key.expires_at > time.time())

    def principal_for_credential(self, credential: str) -> Principal | None:
        key_id = self._by_hash.get(key_hash(credential))
        key = self._keys.get(key_id) if key_id is not None else None
        return key.principal if key is not None and self._usable(key) else None

    def principal_for_key(self, key_id: int) -> Principal | None:
        key = self._keys.get(key_id)
        if key is None or not self._usable(key):
            return None
        p = key.principal
        return Principal(p.tenant_id, p.tenant_slug, p.key_id, p.key_name, p.team, anonymous=True, limits=p.limits,
                         scopes=p.scopes, budgets=p.budgets)


def tenant_id_get(*, slug: str) -> int | None:
    """The id of the tenant `slug` names (None: none does), read off any request's transaction."""
    close_old_connections()
    try:
        return Tenant.objects.filter(slug=slug).values_list("pk", flat=True).first()
    except DatabaseError as exc:
        connection.close()
        raise StoreUnavailable(f"database: {type(exc).__name__}") from None


def tenant_snapshot_load(*, slug: str, http: OpenApiHttp, tokens: OAuthTokens | None = None) -> TenantSnapshot | None:
    """Read one tenant's configuration (a handful of queries, off the request path). Runs in a
    worker thread outside any request cycle, so it recycles its connection itself; a database that
    cannot be reached is StoreUnavailable."""
    close_old_connections()
    try:
        outermost = not connection.in_atomic_block
        with transaction.atomic():
            if outermost:  # (the level can only be chosen by a transaction's first statement)
                # One consistent view: a spec published meanwhile must not delete the tool rows
                # of the version this snapshot names before they are read.
                with connection.cursor() as cursor:
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            return _load(slug, http, tokens)
    except DatabaseError as exc:
        connection.close()
        raise StoreUnavailable(f"database: {type(exc).__name__}") from None


def _backend_view(backend: Backend, http: OpenApiHttp, tokens: OAuthTokens | None, private: bool) -> BackendView:
    egress = egress_plan_build(backend=backend, tokens=tokens, allow_private=private)
    if backend.kind == Backend.Kind.OPENAPI:
        return BackendView(
            id=backend.pk, name=backend.name, transport="", urls=(), timeout=backend.timeout_seconds,
            kind=backend.kind, allow_private=private, max_concurrency=_max_concurrency(backend),
            server=openapi_server_build(backend=backend, http=http, egress=egress, allow_private=private),
        )
    return BackendView(
        id=backend.pk,
        name=backend.name,
        transport=backend.transport,
        urls=tuple(replica.url for replica in backend.replicas.all()),
        timeout=backend.timeout_seconds,
        egress=egress,
        allow_private=private,
        max_concurrency=_max_concurrency(backend),
    )


def _max_concurrency(backend: Backend) -> int:
    """The backend's own limit, else the deployment's (0: none)."""
    return backend.max_concurrency or max(settings.GATEWAY_BACKEND_MAX_CONCURRENCY, 0)


def _load(slug: str, http: OpenApiHttp, tokens: OAuthTokens | None) -> TenantSnapshot | None:
    tenant = Tenant.objects.filter(slug=slug).select_related("plan").first()
    if tenant is None:
        return None
    budgets = budgets_effective(tenant=tenant)
    keys: list[_Key] = []
    hashes: dict[str, int] = {}
    limits = {
        (limit.scope, limit.name): Limit(tenant.pk, limit.scope, limit.name, limit.limit, limit.window_seconds)
        for limit in RateLimit.objects.filter(tenant=tenant)
    }
    for api_key in ApiKey.objects.filter(tenant=tenant).select_related("team", "owner"):
        team = api_key.team.slug if api_key.team else None
        principal = Principal(
            tenant_id=tenant.pk,
            tenant_slug=tenant.slug,
            key_id=api_key.pk,
            key_name=api_key.name,
            team=team,
            scopes=tuple(api_key.scopes or ()),
            limits=tuple(
                limit for limit in (limits.get(("key", api_key.name)), limits.get(("team", team or ""))) if limit
            ),
            budgets=tuple(
                budget for budget in (budgets.of("key", api_key.name), budgets.of("team", team) if team else None)
                if budget
            ),
            person=api_key.owner.get_username() if api_key.acts_as_owner and api_key.owner is not None else "",
        )
        expires = api_key.expires_at.timestamp() if api_key.expires_at else None
        keys.append(_Key(principal, expires, api_key.revoked_at is not None and api_key.revoked_at <= timezone.now()))
        hashes[api_key.secret_hash] = api_key.pk
    issuers = tuple(
        TokenIssuerView(i.issuer, i.audience, i.jwks_url, i.public_key, tuple(i.algorithms), i.team_claim,
                        i.subject_claim, tenant.private_networks_allowed)
        for i in TokenIssuer.objects.filter(tenant=tenant)
    )
    vhosts: dict[str, VirtualHostView] = {}
    views: dict[int, BackendView] = {}  # one per backend, however many hosts mount it
    vhost_rows = VirtualHost.objects.filter(tenant=tenant).prefetch_related(
        "mounts__backend__replicas",
        "mounts__backend__credential__tenant_secret",
        "mounts__backend__credential__identities",
        "mounts__backend__upstream_server",
        # Not the document: megabytes per backend, and every configuration change reloads snapshots.
        Prefetch("mounts__backend__active_spec", queryset=SpecVersion.objects.only(*_SPEC_FIELDS)),
        "tool_aliases",
        "tool_rules",
        "tool_overrides",
        "access_policy__rules",
        "tool_costs",
        "interceptors__secret",
    )
    indexed: dict[int, int] | None = None  # counted when a host's tool_search is `auto`
    for vhost in vhost_rows:
        mounts = {}
        for mount in vhost.mounts.all():
            view = views.get(mount.backend_id)
            if view is None:
                view = views[mount.backend_id] = _backend_view(mount.backend, http, tokens, tenant.private_networks_allowed)
            mounts[mount.map_key] = view
        if vhost.tool_search == VirtualHost.ToolSearch.AUTO and indexed is None:
            indexed = indexed_tool_counts_get(tenant_id=tenant.pk)
        mode = tool_search_mode_effective(mode=vhost.tool_search, backend_ids=(v.id for v in mounts.values()),
                                          indexed=indexed or {})
        curation = virtual_host_curation_get(
            virtual_host=vhost, backend_ids={key: view.id for key, view in mounts.items()})
        vhosts[vhost.slug] = VirtualHostView(
            tenant_id=tenant.pk,
            tenant_slug=tenant.slug,
            slug=vhost.slug,
            mounts=MappingProxyType({key: view for key, view in mounts.items() if view.urls or view.server}),
            aliases=MappingProxyType({a.alias: (a.map_key, a.upstream_name) for a in vhost.tool_aliases.all()}),
            curation=curation,
            anonymous_key_id=vhost.anonymous_key_id if vhost.allow_anonymous else None,
            audit_arguments=tenant.audit_arguments,
            policy=access_policy_compiled(virtual_host=vhost),
            costs=tool_costs_compiled(virtual_host=vhost),
            interceptors=interceptors_compiled(virtual_host=vhost, allow_private=tenant.private_networks_allowed),
            tool_search=None if mode == VirtualHost.ToolSearch.OFF else ToolSearchConfig(
                vhost.tool_search_name, only=mode == VirtualHost.ToolSearch.ONLY),
        )
    return TenantSnapshot(
        keys, hashes, vhosts, tenant=(tenant.pk, tenant.slug), issuers=issuers,
        own_issuer=own_issuer_get(tenant=tenant),
        teams=frozenset(Team.objects.filter(tenant=tenant).values_list("slug", flat=True)),
        team_limits={name: limit for (scope, name), limit in limits.items() if scope == "team"},
        budgets=budgets,
    )


#: A tenant's counter as recorded when Redis could not be read: equal to no value, so the next check reloads.
_UNREAD = b"?"


class SnapshotDirectory:
    """The `Directory` port. Checks the counters of the tenants it holds at most every
    `check_seconds` (one Redis command, however many tenants); while Redis is unreachable it keeps
    serving what it has.

    Each slug held (with a snapshot, or as naming no tenant) is checked by two counters: its
    tenant's (any edit) and the slug's own (a tenant of that slug created or deleted). Both are read
    before the configuration is: an edit committed after that reading moves a counter after it too,
    so the next check finds the snapshot older than the counter and drops it (the next call loads
    it again)."""

    def __init__(
        self, client: redis.asyncio.Redis, *, check_seconds: float, http: OpenApiHttp, tokens: OAuthTokens | None = None,
        counters: Counters | None = None,
    ) -> None:
        self._counters = counters or Counters()
        self._http = http
        self._tokens = tokens
        self._redis = client
        self._check_seconds = check_seconds
        self._checked = float("-inf")
        self._tenants: dict[str, TenantSnapshot | None] = {}
        # slug -> the counters read before its snapshot was loaded: (field, value) of the slug's,
        # then of its tenant's when one was found
        self._versions: dict[str, tuple[tuple[str, bytes | None], ...]] = {}
        self._unknown = 0  # tenants cached as missing, bounded: slugs come from unauthenticated URLs
        self._flights: SingleFlight[TenantSnapshot | None] = SingleFlight()
        self._load = sync_to_async(tenant_snapshot_load, thread_sensitive=False)
        self._tenant_id = sync_to_async(tenant_id_get, thread_sensitive=False)

    async def _check_version(self) -> None:
        now = time.monotonic()
        if now - self._checked < self._check_seconds:
            return
        self._checked = now
        held = list(self._versions.items())
        if not held:
            return
        fields = [field for _, counters in held for field, _ in counters]
        try:
            found = iter(await self._redis.hmget(CONFIG_VERSIONS_KEY, fields))
        except (redis.RedisError, OSError) as exc:
            log.warning("configuration version check failed, serving cached snapshots: %s", exc)
            return
        for slug, counters in held:
            if [next(found) for _ in counters] != [value for _, value in counters]:
                if self._tenants.pop(slug, 0) is None:
                    self._unknown -= 1
                del self._versions[slug]

    def recheck(self) -> None:
        self._checked = float("-inf")

    async def tenant(self, slug: str) -> TenantSnapshot | None:
        await self._check_version()
        if slug in self._tenants:
            self._counters.increment("cache", cache="snapshot", result="hit")
            return self._tenants[slug]
        self._counters.increment("cache", cache="snapshot", result="miss")
        return await self._flights.run(slug, lambda: self._load_into_cache(slug))

    async def _load_into_cache(self, slug: str) -> TenantSnapshot | None:
        tenant_id = await self._tenant_id(slug=slug)
        fields = [slug_field(slug), *([str(tenant_id)] if tenant_id is not None else [])]
        try:
            values = await self._redis.hmget(CONFIG_VERSIONS_KEY, fields)
        except (redis.RedisError, OSError) as exc:
            log.warning("configuration version unreadable, loading tenant %s anyway: %s", slug, exc)
            values = [_UNREAD] * len(fields)
        snapshot = await self._load(slug=slug, http=self._http, tokens=self._tokens)
        if snapshot is not None and snapshot.tenant_id != tenant_id:
            values = [_UNREAD] * len(fields)  # replaced meanwhile: reload at the next check
        if snapshot is None and self._unknown >= _MAX_UNKNOWN:
            return None
        self._unknown += snapshot is None
        self._tenants[slug] = snapshot
        self._versions[slug] = tuple(zip(fields, values, strict=True))
        return snapshot
