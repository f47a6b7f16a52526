"""Connected accounts (docs/identity.md, "Connected accounts"): each person connects their own
account at the backends that take one (`per_person` credentials) and ends it; tenant admins see
everyone's, end any, and connect the gateway's own account (what its tool lists use). Thin views:
a selector or one service each."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods

from apps.common.security_headers import form_action_allow
from apps.connections.selectors import account_rows, connection_get, connection_list, per_person_backend_get
from apps.connections.services import (
    ConnectionFailed,
    connection_complete,
    connection_delete,
    connection_start,
    upstream_server_ensure,
)
from apps.console.access import console_view
from apps.tenants.models import Tenant


def _everyone(request: HttpRequest, tenant: Tenant) -> bool:
    return request.access.manages(tenant.pk)  # type: ignore[attr-defined]


def _redirect_uri(request: HttpRequest, tenant: Tenant) -> str:
    return request.build_absolute_uri(reverse("console:account-callback", kwargs={"tenant": tenant.slug}))


@require_GET
@console_view()
def account_list(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    everyone = _everyone(request, tenant)
    return render(request, "console/accounts/account_list.html", {
        "backends": account_rows(tenant=tenant, user=request.user), "everyone": everyone,
        "connections": connection_list(tenant=tenant) if everyone else None,
    })


@require_http_methods(["GET", "POST"])
@console_view(members_write=True)
def account_connect(request: HttpRequest, tenant: Tenant, backend_id: int) -> HttpResponse:
    """GET says what connecting does (and finds the backend's sign-in); POST goes there. `gateway=1`
    (admins): the gateway's own account."""
    backend = per_person_backend_get(tenant=tenant, backend_id=backend_id)
    if backend is None:
        raise Http404(f"no backend with id {backend_id} takes each person's own account")
    for_gateway = request.POST.get("gateway", request.GET.get("gateway")) == "1"
    if for_gateway and not _everyone(request, tenant):
        raise Http404("only tenant admins connect the gateway's own account")
    next_path = request.POST.get("next", request.GET.get("next", ""))
    try:
        if request.method == "POST":
            return redirect(connection_start(
                backend=backend, user=request.user, redirect_uri=_redirect_uri(request, tenant), for_gateway=for_gateway,
                manages_tenant=_everyone(request, tenant), next_path=next_path))
        server = upstream_server_ensure(backend=backend, redirect_uri=_redirect_uri(request, tenant))
    except ConnectionFailed as exc:
        return render(request, "console/accounts/account_connect.html",
                      {"backend": backend, "problem": str(exc), "for_gateway": for_gateway}, status=502)
    response = render(request, "console/accounts/account_connect.html", {
        "backend": backend, "server": server, "for_gateway": for_gateway,
        "next": next_path if url_has_allowed_host_and_scheme(next_path, allowed_hosts=None) else "",
    })
    return form_action_allow(response, server.authorization_endpoint)  # the form's answer goes there


@require_GET
@console_view(members_write=True)
def account_callback(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    """Where the backend's authorization server sends the person back."""
    try:
        pending = connection_complete(
            tenant=tenant, user=request.user, manages_tenant=_everyone(request, tenant),
            state=request.GET.get("state", ""), code=request.GET.get("code", ""),
            iss=request.GET.get("iss"), error=request.GET.get("error_description") or request.GET.get("error", ""))
    except ConnectionFailed as exc:
        messages.error(request, f"Not connected: {exc}")
        return redirect("console:account-list", tenant=tenant.slug)
    whose = "The gateway's" if pending.for_gateway else "Your"
    messages.success(request, f"{whose} {pending.backend.name} account is connected.")
    if pending.next_path and url_has_allowed_host_and_scheme(pending.next_path, allowed_hosts=None):
        return redirect(pending.next_path)
    return redirect("console:account-list", tenant=tenant.slug)


@require_http_methods(["GET", "POST"])
@console_view(members_write=True)
def account_disconnect(request: HttpRequest, tenant: Tenant, connection_id: int) -> HttpResponse:
    """GET asks first; POST ends the connection. A person ends their own; admins anyone's."""
    connection = connection_get(tenant=tenant, connection_id=connection_id)
    if connection is None or (connection.user_id != request.user.pk and not _everyone(request, tenant)):
        raise Http404(f"no connection with id {connection_id}")
    whose = "the gateway's" if connection.user is None else f"{connection.user.get_username()}'s"
    if request.method == "POST":
        connection_delete(connection=connection)
        messages.success(request, f"Disconnected {whose} {connection.backend.name} account.")
        return redirect("console:account-list", tenant=tenant.slug)
    return render(request, "console/keys/confirm.html", {
        "title": f"Disconnect {whose} {connection.backend.name} account?",
        "what": ["The gateway forgets its tokens (and asks the backend's authorization server to revoke them, when "
                 "it offers that): calls to the backend as this person stop at once.",
                 "To use the backend again, the account is connected again."],
        "action": "Disconnect",
        "back_url": reverse("console:account-list", kwargs={"tenant": tenant.slug}),
    })


urls = [
    path("accounts/", account_list, name="account-list"),
    path("accounts/callback/", account_callback, name="account-callback"),
    path("accounts/<int:backend_id>/connect/", account_connect, name="account-connect"),
    path("accounts/connections/<int:connection_id>/disconnect/", account_disconnect, name="account-disconnect"),
]
