"""`/console/`: where a signed-in user starts — their first tenant's dashboard (which shows a new
tenant its next steps), or, with no tenant yet, a page that says so: to a platform admin, with the
link that creates the first one."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from apps.console.access import console_view
from apps.console.nav import TENANT_NAV
from apps.tenants.access import tenant_list_for


@require_GET
@console_view()
def home(request: HttpRequest) -> HttpResponse:
    access = request.access  # type: ignore[attr-defined]
    first = tenant_list_for(access=access).first()
    if first is None:
        return render(request, "console/no_tenant.html", status=200)
    return redirect(TENANT_NAV[0][1], tenant=first.slug)
