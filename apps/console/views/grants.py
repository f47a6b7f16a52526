"""The apps people signed in to the tenant's virtual hosts through the gateway's authorization
server (docs/identity.md, "Signing in people"): each person sees and revokes their own; tenant
admins see and revoke everyone's. Thin views: a selector or one service each."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_http_methods

from apps.console.access import console_view
from apps.console.paging import page_of
from apps.oauth.selectors import authorization_server_get, grant_get, grant_list
from apps.oauth.services import grants_revoke
from apps.tenants.models import Tenant


def _everyone(request: HttpRequest, tenant: Tenant) -> bool:
    return request.access.manages(tenant.pk)  # type: ignore[attr-defined]


@require_GET
@console_view()
def grant_list_view(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    everyone = _everyone(request, tenant)
    grants = grant_list(tenant=tenant, user=None if everyone else request.user)
    return render(request, "console/grants/grant_list.html", {
        "page_obj": page_of(request, grants), "everyone": everyone,
        "server_on": authorization_server_get(tenant=tenant) is not None,
    })


@require_http_methods(["GET", "POST"])
@console_view(members_write=True)
def grant_revoke(request: HttpRequest, tenant: Tenant, grant_id: int) -> HttpResponse:
    """GET asks first; POST revokes. A person may revoke their own grants; admins anyone's."""
    grant = grant_get(tenant=tenant, grant_id=grant_id)
    if grant is None or grant.revoked_at is not None or (grant.user_id != request.user.pk and not _everyone(request, tenant)):
        raise Http404(f"no standing grant with id {grant_id}")
    app = grant.client.client_name or grant.client.client_id
    if request.method == "POST":
        grants_revoke(tenant=tenant, grant_ids=[grant.pk])
        messages.success(request, f"{app} is signed out: its tokens no longer work.")
        return redirect("console:grant-list", tenant=tenant.slug)
    return render(request, "console/keys/confirm.html", {
        "title": f"Sign {app} out of {grant.resource}?",
        "what": [f"Its tokens stop working at once: calls it makes as {grant.user.get_username()} are refused.",
                 "To use it again, someone signs it in again (and allows it on the consent page)."],
        "action": "Sign out",
        "back_url": reverse("console:grant-list", kwargs={"tenant": tenant.slug}),
    })


urls = [
    path("signed-in-apps/", grant_list_view, name="grant-list"),
    path("signed-in-apps/<int:grant_id>/revoke/", grant_revoke, name="grant-revoke"),
]
