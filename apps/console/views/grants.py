"""The apps people signed in to the tenant's virtual hosts through the gateway's authorization
server (docs/identity.md, "Signing in people"): each person sees and revokes their own; tenant
admins see and revoke everyone's. Thin views: a selector or one service each."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.console.access import console_view
from apps.console.paging import page_of
from apps.oauth.selectors import authorization_server_state, grant_get, grant_list
from apps.oauth.services import authorization_server_configure, grants_revoke
from apps.tenants.models import Tenant


def _everyone(request: HttpRequest, tenant: Tenant) -> bool:
    return request.access.manages(tenant.pk)  # type: ignore[attr-defined]


class ServerForm(forms.Form):
    enabled = forms.BooleanField(label="Sign people in to this tenant's virtual hosts", required=False)
    allow_registration = forms.BooleanField(label="Clients may register themselves (RFC 7591)", required=False)
    allow_metadata_documents = forms.BooleanField(label="Clients may identify by a client metadata document",
                                                  required=False)


@require_GET
@console_view()
def grant_list_view(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    everyone = _everyone(request, tenant)
    grants = grant_list(tenant=tenant, user=None if everyone else request.user)
    server = authorization_server_state(tenant=tenant)
    initial = {"enabled": bool(server and server.enabled), "allow_registration": server.allow_registration if server else True,
               "allow_metadata_documents": server.allow_metadata_documents if server else True}
    return render(request, "console/grants/grant_list.html", {
        "page_obj": page_of(request, grants), "everyone": everyone,
        "server_on": bool(server and server.enabled), "server_form": ServerForm(initial=initial) if everyone else None,
    })


@require_POST
@console_view()
def server_settings(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    """Tenant admins switch the tenant's authorization server and say how clients may identify."""
    form = ServerForm(request.POST)
    form.is_valid()  # (checkboxes only: always valid)
    authorization_server_configure(tenant=tenant, **form.cleaned_data)
    messages.success(request, "People sign in to this tenant's hosts now." if form.cleaned_data["enabled"]
                     else "Signing people in is off: apps signed in before are refused until it is on again.")
    return redirect("console:grant-list", tenant=tenant.slug)


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
    path("signed-in-apps/server/", server_settings, name="grant-server"),
    path("signed-in-apps/<int:grant_id>/revoke/", grant_revoke, name="grant-revoke"),
]
