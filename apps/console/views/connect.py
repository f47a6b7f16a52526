"""The console's Connect page: choose a virtual host, get ready-to-paste configuration for common MCP
clients (apps.catalog.connect). The key is a placeholder the user replaces, except right after a key
was issued in this session (`CONNECT_KEY_SESSION`), when that key is shown once."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.views.decorators.http import require_GET

from apps.catalog import selectors
from apps.catalog.connect import KEY_PLACEHOLDER, client_configs, client_configs_signed_in, mcp_url, sse_url
from apps.console.access import console_view
from apps.console.first_steps import FirstStep, first_steps_list
from apps.oauth.selectors import authorization_server_get
from apps.tenants.models import Tenant

#: A page that has just issued a key may leave {"tenant": slug, "secret": key} here; the Connect page
#: of that tenant then fills it in once and forgets it.
CONNECT_KEY_SESSION = "console:connect-key"


def _origin(request: HttpRequest) -> str:
    return f"{request.scheme}://{request.get_host()}"


def _steps_before(tenant: Tenant) -> list[FirstStep]:
    """The steps that come before connecting a client, while one of them is not done."""
    steps = [step for step in first_steps_list(tenant=tenant) if step.name != "connect"]
    return steps if not all(step.done for step in steps) else []


@require_GET
@console_view()
def connect(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    """The host picker; with a single virtual host, straight to its configuration."""
    vhosts = list(selectors.virtual_host_list(tenant=tenant).values_list("pk", "slug")[:200])
    if len(vhosts) == 1:
        return redirect("console:connect-vhost", tenant=tenant.slug, vhost_id=vhosts[0][0])
    return render(request, "console/connect/connect.html",
                  {"vhosts": vhosts, "vhost": None, "first_steps": _steps_before(tenant)})


@require_GET
@console_view()
def connect_vhost(request: HttpRequest, tenant: Tenant, vhost_id: int) -> HttpResponse:
    virtual_host = selectors.virtual_host_get(tenant=tenant, virtual_host_id=vhost_id)
    if virtual_host is None:
        raise Http404(f"no virtual host with id {vhost_id}")
    key, key_given = KEY_PLACEHOLDER, False
    handed = request.session.get(CONNECT_KEY_SESSION)
    if isinstance(handed, dict) and handed.get("tenant") == tenant.slug and handed.get("secret"):
        key, key_given = str(handed["secret"]), True
        del request.session[CONNECT_KEY_SESSION]  # shown once, like the key itself
    url = mcp_url(origin=_origin(request), tenant_slug=tenant.slug, vhost_slug=virtual_host.slug)
    signs_in = authorization_server_get(tenant=tenant) is not None
    signed_in = signs_in and request.GET.get("auth") == "sign-in"
    name = f"{tenant.slug}-{virtual_host.slug}"
    context = {
        "vhost": virtual_host,
        "vhosts": list(selectors.virtual_host_list(tenant=tenant).values_list("pk", "slug")[:200]),
        "url": url,
        "sse_url": sse_url(origin=_origin(request), tenant_slug=tenant.slug, vhost_slug=virtual_host.slug),
        "configs": client_configs_signed_in(url=url, name=name) if signed_in else client_configs(url=url, name=name, key=key),
        "signs_in": signs_in,
        "signed_in": signed_in,
        "key_given": key_given,
        "placeholder": KEY_PLACEHOLDER,
        "first_steps": _steps_before(tenant),
    }
    return render(request, "console/connect/connect.html", context)


urls = [
    path("connect/", connect, name="connect"),
    path("connect/<int:vhost_id>/", connect_vhost, name="connect-vhost"),
]
