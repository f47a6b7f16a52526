"""The console's side of `apps.tenants.access`: every page is wrapped by `console_view`, which
sends anonymous visitors to the login form and gives the view `request.access` and, for pages under
`/console/t/<tenant>/`, the tenant (404 when the user may not see it, 403 when the page changes
things and the user may only read)."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from apps.tenants.access import access_get, platform_admin_check, tenant_get_for

View = Callable[..., HttpResponse]
_SAFE = {"GET", "HEAD", "OPTIONS"}


def console_view(*, manage: bool = False, members_write: bool = False, platform: bool = False) -> Callable[[View], View]:
    """`manage`: the page needs a tenant admin even to read. Otherwise reads need any role in the
    tenant and writes (POST…) a tenant admin, unless `members_write` (the view then checks per
    object, as for keys). `platform`: platform admins only (pages outside any tenant)."""

    def decorate(view: View) -> View:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path(), reverse("console:login"))
            access = access_get(user=request.user)
            request.access = access  # type: ignore[attr-defined]
            if platform:
                platform_admin_check(access=access)
            if "tenant" in kwargs:
                writes = request.method not in _SAFE and not members_write
                kwargs["tenant"] = tenant_get_for(access=access, slug=kwargs["tenant"], manage=manage or writes)
                request.tenant = kwargs["tenant"]  # type: ignore[attr-defined]
            return view(request, *args, **kwargs)

        return wrapped

    return decorate
