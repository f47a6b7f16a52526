"""Who may see and change what, in the console and the REST API: the one authorization rule.

Roles: platform admins (active superusers) see and manage every tenant; a tenant admin manages
their tenant; a tenant member reads it and manages only the API keys they issued. Every
tenant-scoped page and endpoint resolves its tenant through `tenant_get_for`, and every object
through a query filtered by that tenant, so an id changed in a URL or a form can only ever name an
object of a tenant the user may see. A tenant the user may not see answers 404, never 403: its
existence is not disclosed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user
from django.core.exceptions import PermissionDenied
from django.db import connections
from django.db.models import QuerySet
from django.http import Http404, HttpRequest
from django.http.cookie import parse_cookie

from apps.tenants.keys import ADMIN_TOKEN_PREFIX
from apps.tenants.models import ApiKey, Membership, Tenant
from apps.tenants.services import admin_token_authenticate

ADMIN = Membership.Role.ADMIN
MEMBER = Membership.Role.MEMBER


@dataclass(frozen=True)
class Access:
    """What one user may do. `roles`: tenant id → role, for the tenants the user belongs to."""

    user_id: int | None
    platform_admin: bool = False
    roles: Mapping[int, str] = field(default_factory=dict)

    @property
    def signed_in(self) -> bool:
        return self.user_id is not None

    def sees(self, tenant_id: int) -> bool:
        return self.platform_admin or tenant_id in self.roles

    def manages(self, tenant_id: int) -> bool:
        return self.platform_admin or self.roles.get(tenant_id) == ADMIN

    def role(self, tenant_id: int) -> str | None:
        """"platform", "admin", "member", or None when the user may not see the tenant."""
        if self.platform_admin:
            return "platform"
        return self.roles.get(tenant_id)

    def manages_key(self, api_key: ApiKey) -> bool:
        """Tenant admins manage all of their tenant's keys; members only those they issued."""
        if self.manages(api_key.tenant_id):
            return True
        return self.sees(api_key.tenant_id) and api_key.owner_id is not None and api_key.owner_id == self.user_id

    def may_issue_keys(self, tenant_id: int) -> bool:
        return self.sees(tenant_id)


NOBODY = Access(user_id=None)


def access_get(*, user: Any) -> Access:
    """The user's access, in one query (none for anonymous or inactive users)."""
    if user is None or not user.is_authenticated or not user.is_active:
        return NOBODY
    if user.is_superuser:
        return Access(user_id=user.pk, platform_admin=True)
    roles = dict(Membership.objects.filter(user_id=user.pk).values_list("tenant_id", "role"))
    return Access(user_id=user.pk, roles=roles)


def tenant_list_for(*, access: Access) -> QuerySet[Tenant]:
    """The tenants the user may see, by slug."""
    tenants = Tenant.objects.order_by("slug")
    if access.platform_admin:
        return tenants
    return tenants.filter(pk__in=list(access.roles))


def tenant_get_for(*, access: Access, slug: str, manage: bool = False) -> Tenant:
    """The tenant named `slug`, when the user may see it (else Http404) and, with `manage`,
    change it (else PermissionDenied)."""
    tenant = Tenant.objects.select_related("plan").filter(slug=slug).first()
    if tenant is None or not access.sees(tenant.pk):
        raise Http404(f"no tenant {slug!r}")
    if manage and not access.manages(tenant.pk):
        raise PermissionDenied("Only the tenant's admins may change this.")
    return tenant


def platform_admin_check(*, access: Access) -> None:
    """PermissionDenied unless the user is a platform admin."""
    if not access.platform_admin:
        raise PermissionDenied("Only platform admins may do this.")


def tenant_manager_credential_check(*, slug: str, authorization: str, cookie: str) -> bool:
    """Whether the request headers `authorization` (an admin token, `Bearer gwa_…`) or `cookie`
    (a console session) name a user who may change tenant `slug`, as the view behind them would
    decide it. For the HTTP transport, which asks before it reads a large upload's body; it runs on
    a server thread outside any request, so it closes the database connections it opened."""
    try:
        user: Any = None
        scheme, _, secret = authorization.strip().partition(" ")
        secret = secret.strip()
        if scheme.lower() == "bearer" and secret.startswith(ADMIN_TOKEN_PREFIX):
            token = admin_token_authenticate(secret=secret)
            user = token.user if token is not None else None
        elif session_key := parse_cookie(cookie).get(settings.SESSION_COOKIE_NAME):
            request = HttpRequest()
            request.session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
            user = get_user(request)
        access = access_get(user=user)
        if not access.signed_in:
            return False
        tenant_id = Tenant.objects.filter(slug=slug).values_list("pk", flat=True).first()
        return tenant_id is not None and access.manages(tenant_id)
    finally:
        connections.close_all()
