"""The `rate_limits` section of the configuration document: checking it (pure, like `validation`),
bringing a tenant's stored rate limits in line with it (for `reconcile`), and exporting them.

How limits are enforced is the gateway's (docs/policies.md#rate-limits); here they are only stored,
through apps/policies/services.py."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from django.db.models import QuerySet

from apps.configuration.document import RateLimitSpec, TenantSpec
from apps.configuration.fields import FieldChecks
from apps.configuration.reports import Action, Change
from apps.policies.models import RateLimit
from apps.policies.services import rate_limit_check, rate_limit_clear, rate_limit_set
from apps.tenants.models import Tenant
from apps.tenants.selectors import api_key_list, team_list

_FIELDS = ("tenant", "scope", "name", "limit", "window_seconds")


# --- validation ----------------------------------------------------------------------------------
def rate_limits_check(checks: FieldChecks, raw: Any, *, tenants: dict[str, TenantSpec]) -> tuple[RateLimitSpec, ...]:
    """The document's rate limits; problems are recorded on `checks` at their paths."""
    limits: dict[tuple[str, str, str], RateLimitSpec] = {}
    for i, item in enumerate(checks.items(raw, "rate_limits")):
        path = f"rate_limits[{i}]"
        fields = checks.mapping(item, path, fields=_FIELDS, required=_FIELDS)
        if fields is None:
            continue
        tenant, scope, name = subject_entry_check(checks, fields, path, tenants)
        limit, window = fields.get("limit", 1), fields.get("window_seconds", 1)  # missing: reported as required
        wrong = rate_limit_check(limit=limit, window_seconds=window)
        for problem in wrong:
            checks.add(f"{path}.{problem.field}", problem.message)
        if wrong:
            limit = window = 0
        if (tenant, scope, name) in limits:
            checks.add(f"{path}.name", f"duplicate rate limit for {scope} {name!r} in tenant {tenant!r}")
        elif tenant and scope and name:
            limits[(tenant, scope, name)] = RateLimitSpec(
                tenant=tenant, scope=scope, name=name, limit=limit, window_seconds=window
            )
    return tuple(limits.values())


def subject_entry_check(
    checks: FieldChecks, fields: dict[str, Any], path: str, tenants: dict[str, TenantSpec]
) -> tuple[str, str, str]:
    """(tenant, scope, name) of an entry for one key or team of a tenant (a rate limit, a budget),
    each "" when missing or wrong (reported). The key or team must be one the file gives the tenant,
    like a policy rule's subject."""
    tenant = checks.text(fields.get("tenant"), f"{path}.tenant", max_length=64) if "tenant" in fields else ""
    if tenant and tenant not in tenants:
        checks.add(f"{path}.tenant", f"unknown tenant {tenant!r} (add it under tenants)")
        tenant = ""
    scope = checks.choice(fields["scope"], f"{path}.scope", RateLimit.Scope.values) if "scope" in fields else ""
    name = checks.text(fields.get("name"), f"{path}.name", max_length=100) if "name" in fields else ""
    if tenant and scope and name:
        spec = tenants[tenant]
        if scope == RateLimit.Scope.TEAM and name not in spec.teams:
            checks.add(f"{path}.name", f"unknown team {name!r} (add it to tenant {tenant!r}'s teams)")
        elif scope == RateLimit.Scope.KEY and name not in {key.name for key in spec.keys}:
            checks.add(f"{path}.name", f"unknown key {name!r} (add it to tenant {tenant!r}'s keys)")
    return tenant, scope, name


# --- reconcile -----------------------------------------------------------------------------------
def rate_limit_reconcile(*, tenant: Tenant, spec: RateLimitSpec) -> Change:
    """Give the key or team the limit `spec` describes, writing (and moving the configuration
    version) only when the stored one differs. Raises the service's ValidationError."""
    return subject_entry_reconcile(
        kind="rate_limit", name=entry_name(tenant.slug, spec.scope, spec.name),
        summary=f"{spec.limit} per {spec.window_seconds} s",
        stored=RateLimit.objects.filter(tenant=tenant, scope=spec.scope, name=spec.name)
        .values("limit", "window_seconds").first(),
        wanted={"limit": spec.limit, "window_seconds": spec.window_seconds},
        write=lambda: rate_limit_set(
            tenant=tenant, scope=spec.scope, name=spec.name, limit=spec.limit, window_seconds=spec.window_seconds
        ),
    )


def rate_limits_prune(*, tenant: Tenant, specs: tuple[RateLimitSpec, ...]) -> list[Change]:
    """Remove the tenant's stored limits that `specs` do not name (for a tenant the document names),
    including limits left behind by a key or team deleted since."""
    return subject_entries_prune(kind="rate_limit", tenant=tenant, specs=specs,
                                 stored=RateLimit.objects.filter(tenant=tenant), clear=rate_limit_clear)


def subject_entry_reconcile(
    *,
    kind: str,
    name: str,
    summary: str,
    stored: Mapping[str, object] | None,
    wanted: Mapping[str, object],
    write: Callable[[], object],
) -> Change:
    """The change an entry for a key or team makes: none when `stored` (its fields; None: absent)
    already holds what is `wanted`, else `write()` it and name the fields that changed."""
    if stored is not None and all(stored[field] == value for field, value in wanted.items()):
        return Change(action=Action.UNCHANGED, kind=kind, name=name, detail=summary)
    write()
    if stored is None:
        return Change(action=Action.CREATED, kind=kind, name=name, detail=summary)
    changed = [field for field, value in wanted.items() if stored[field] != value]
    return Change(action=Action.UPDATED, kind=kind, name=name, detail=", ".join(changed))


def subject_entries_prune(
    *, kind: str, tenant: Tenant, specs: Iterable[Any], stored: QuerySet[Any], clear: Callable[..., object]
) -> list[Change]:
    """Remove the `stored` entries (with `scope` and `name`) of `tenant` that `specs` do not name."""
    named = {(spec.scope, spec.name) for spec in specs if spec.tenant == tenant.slug}
    changes = []
    for scope, name in stored.order_by("scope", "name").values_list("scope", "name"):
        if (scope, name) not in named:
            clear(tenant=tenant, scope=scope, name=name)
            changes.append(Change(action=Action.DELETED, kind=kind, name=entry_name(tenant.slug, scope, name)))
    return changes


def entry_name(tenant: str, scope: str, name: str) -> str:
    return f"{tenant}/{scope}:{name}"


# --- export --------------------------------------------------------------------------------------
def rate_limits_export(*, tenant: Tenant) -> list[dict[str, Any]]:
    """The tenant's `rate_limits` entries, by scope and name. A limit whose key or team no longer
    exists (deleting one leaves its limit) is left out: the file would name a subject it does not
    declare and could not be applied."""
    subjects = {
        RateLimit.Scope.KEY: {key.name for key in api_key_list(tenant=tenant)},
        RateLimit.Scope.TEAM: {team.slug for team in team_list(tenant=tenant)},
    }
    return [
        {
            "tenant": tenant.slug,
            "scope": limit.scope,
            "name": limit.name,
            "limit": limit.limit,
            "window_seconds": limit.window_seconds,
        }
        for limit in RateLimit.objects.filter(tenant=tenant).order_by("scope", "name")
        if limit.name in subjects.get(limit.scope, set())
    ]
