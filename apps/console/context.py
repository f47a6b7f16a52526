"""Template context for every console page: the navigation, the tenants the user may switch to,
and the current tenant with the user's role in it."""

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
    nav = []
    if tenant is not None:
        for label, name in TENANT_NAV:
            url = reverse(name, kwargs={"tenant": tenant.slug})
            nav.append({"label": label, "url": url, "current": here.startswith(url)})
    if access.platform_admin:
        for label, name in PLATFORM_NAV:
            url = reverse(name)
            nav.append({"label": label, "url": url, "current": here.startswith(url)})
    return {
        "console_nav": nav,
        "console_tenants": list(tenant_list_for(access=access).values_list("slug", flat=True)[:200]),
        "current_tenant": tenant,
        "current_role": access.role(tenant.pk) if tenant is not None else None,
        "can_manage": access.manages(tenant.pk) if tenant is not None else access.platform_admin,
    }
