"""Template context for every console page: the navigation (the tenant's pages, and the platform's
for platform admins), the tenants the user may switch to, and the current tenant with the user's role
in it."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.urls import reverse

from apps.console.nav import PLATFORM_NAV, TENANT_NAV
from apps.tenants.access import tenant_list_for


def console(request: HttpRequest) -> dict[str, Any]:
    access = getattr(request, "access", None)
    if access is None or not access.signed_in:
        return {}
    tenant = getattr(request, "tenant", None)
    here = request.path
    nav, platform_nav = [], []
    if tenant is not None:
        for label, name in TENANT_NAV:
            url = reverse(name, kwargs={"tenant": tenant.slug})
            nav.append({"label": label, "url": url, "current": here.startswith(url)})
    if access.platform_admin:
        for label, name in PLATFORM_NAV:
            url = reverse(name)
            platform_nav.append({"label": label, "url": url, "current": here.startswith(url)})
    return {
        "console_nav": nav,
        "console_platform_nav": platform_nav,
        "console_tenants": list(tenant_list_for(access=access).values_list("slug", flat=True)[:200]),
        "current_tenant": tenant,
        "current_role": access.role(tenant.pk) if tenant is not None else None,
        "can_manage": access.manages(tenant.pk) if tenant is not None else access.platform_admin,
    }
