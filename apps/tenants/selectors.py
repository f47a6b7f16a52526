"""Read-side queries for tenants, teams and keys."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from apps.tenants.access import Access, tenant_list_for
from apps.tenants.keys import key_hash
from apps.tenants.models import AdminToken, ApiKey, Membership, Plan, Team, Tenant, TokenIssuer


def tenant_get(*, slug: str) -> Tenant | None:
    return Tenant.objects.filter(slug=slug).first()


def tenant_list() -> QuerySet[Tenant]:
    return Tenant.objects.order_by("slug")


def team_list(*, tenant: Tenant) -> QuerySet[Team]:
    return Team.objects.filter(tenant=tenant).order_by("slug")


def api_key_list(*, tenant: Tenant) -> QuerySet[ApiKey]:
    """All the tenant's keys, revoked and expired ones included."""
    return ApiKey.objects.filter(tenant=tenant).select_related("team").order_by("name")


def api_key_usable() -> Q:
    """Keys that may call now: neither revoked nor expired (for a filter, or an `Exists` subquery)."""
    return Q(revoked_at__isnull=True) & (Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()))


def api_key_usable_list(*, tenant: Tenant) -> QuerySet[ApiKey]:
    """The tenant's keys that may call now, by name."""
    return ApiKey.objects.filter(api_key_usable(), tenant=tenant).select_related("team").order_by("name", "pk")


def api_key_get_by_secret(*, secret: str) -> ApiKey | None:
    """The key whose secret this is, whatever its state (the caller judges revocation/expiry)."""
    return ApiKey.objects.select_related("tenant", "team").filter(secret_hash=key_hash(secret)).first()


def token_issuer_list(*, tenant: Tenant) -> QuerySet[TokenIssuer]:
    return TokenIssuer.objects.filter(tenant=tenant).order_by("issuer")


def plan_list() -> QuerySet[Plan]:
    return Plan.objects.order_by("name")


def plan_get(*, name: str) -> Plan | None:
    return Plan.objects.filter(name=name).first()


def api_key_list_for(*, tenant: Tenant, access: Access) -> QuerySet[ApiKey]:
    """The tenant's keys the user may see: all of them for tenant admins, their own for members."""
    keys = ApiKey.objects.filter(tenant=tenant).select_related("team", "owner").order_by("name", "pk")
    if access.manages(tenant.pk):
        return keys
    return keys.filter(owner_id=access.user_id)


def api_key_get(*, tenant: Tenant, key_id: int) -> ApiKey | None:
    """The tenant's key with this id (whoever owns it; `Access.manages_key` says who may change it)."""
    return ApiKey.objects.filter(tenant=tenant, pk=key_id).select_related("team", "owner").first()


def team_get(*, tenant: Tenant, team_id: int) -> Team | None:
    return Team.objects.filter(tenant=tenant, pk=team_id).first()


def team_get_by_slug(*, tenant: Tenant, slug: str) -> Team | None:
    return Team.objects.filter(tenant=tenant, slug=slug).first()


def membership_list(*, tenant: Tenant) -> QuerySet[Membership]:
    return Membership.objects.filter(tenant=tenant).select_related("user").order_by("user__username", "pk")


def membership_get(*, tenant: Tenant, membership_id: int) -> Membership | None:
    return membership_list(tenant=tenant).filter(pk=membership_id).first()


def user_get_by_username(*, username: str) -> Any:
    """The active or inactive console user with this username, or None."""
    return get_user_model().objects.filter(username=username).first()


def admin_token_list(*, user: Any) -> QuerySet[AdminToken]:
    return AdminToken.objects.filter(user=user).order_by("name", "pk")


def admin_token_get(*, user: Any, token_id: int) -> AdminToken | None:
    return admin_token_list(user=user).filter(pk=token_id).first()


def tenant_search(*, access: Access, query: str = "") -> QuerySet[Tenant]:
    """The tenants the user may see, by slug, those whose slug contains `query` when given, with
    their plan."""
    tenants = tenant_list_for(access=access).select_related("plan")
    return tenants.filter(slug__icontains=query) if query else tenants


def tenant_contents(*, tenant: Tenant) -> dict[str, int]:
    """How many of each thing deleting the tenant deletes with it (for the confirmation)."""
    # Reverse accessors by name: tenants must not import catalog or policies.
    return {
        "teams": tenant.teams.count(),
        "API keys": tenant.api_keys.count(),
        "members": tenant.memberships.count(),
        "backends": tenant.backends.count(),
        "virtual hosts": tenant.virtual_hosts.count(),
    }


def plan_list_with_usage() -> QuerySet[Plan]:
    """Plans by name, each with `tenant_count`."""
    return Plan.objects.annotate(tenant_count=Count("tenants")).order_by("name")
