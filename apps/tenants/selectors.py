"""Read-side queries for tenants, teams and keys."""

from __future__ import annotations

from django.db.models import QuerySet

from apps.tenants.keys import key_hash
from apps.tenants.models import ApiKey, Plan, Team, Tenant, TokenIssuer


def tenant_get(*, slug: str) -> Tenant | None:
    return Tenant.objects.filter(slug=slug).first()


def tenant_list() -> QuerySet[Tenant]:
    return Tenant.objects.order_by("slug")


def team_list(*, tenant: Tenant) -> QuerySet[Team]:
    return Team.objects.filter(tenant=tenant).order_by("slug")


def api_key_list(*, tenant: Tenant) -> QuerySet[ApiKey]:
    """All the tenant's keys, revoked and expired ones included."""
    return ApiKey.objects.filter(tenant=tenant).select_related("team").order_by("name")


def api_key_get_by_secret(*, secret: str) -> ApiKey | None:
    """The key whose secret this is, whatever its state (the caller judges revocation/expiry)."""
    return ApiKey.objects.select_related("tenant", "team").filter(secret_hash=key_hash(secret)).first()


def token_issuer_list(*, tenant: Tenant) -> QuerySet[TokenIssuer]:
    return TokenIssuer.objects.filter(tenant=tenant).order_by("issuer")


def plan_list() -> QuerySet[Plan]:
    return Plan.objects.order_by("name")


def plan_get(*, name: str) -> Plan | None:
    return Plan.objects.filter(name=name).first()
