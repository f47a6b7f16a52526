"""The apps people signed in to the tenant's virtual hosts through the gateway's authorization
server (docs/identity.md, "Signing in people"): each person sees and revokes their own; tenant
admins see and revoke everyone's. Thin views: a selector or one service each."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.console.access import console_view
from apps.console.paging import page_of
from apps.oauth.selectors import authorization_server_state, grant_get, grant_list, identity_provider_get
from apps.oauth.services import (
    authorization_server_configure,
    grants_revoke,
    identity_provider_clear,
    identity_provider_set,
)
from apps.tenants.models import Membership, Tenant


def _everyone(request: HttpRequest, tenant: Tenant) -> bool:
    return request.access.manages(tenant.pk)  # type: ignore[attr-defined]


class IdentityProviderForm(forms.Form):
    """The tenant's OpenID Connect provider; what it may be is the service's (`identity_provider_set`)."""

    issuer = forms.CharField(label="Issuer URL", max_length=500, help_text="Exactly as its ID tokens say, e.g. https://login.acme.example/")
    client_id = forms.CharField(label="Client id", max_length=500)
    client_secret = forms.CharField(label="Client secret", required=False, strip=False,
                                    widget=forms.PasswordInput(render_value=False),
                                    help_text="Left empty: the one set before stays.")
    scope = forms.CharField(label="Scopes", max_length=500, initial="openid email profile")
    label = forms.CharField(label="Button", max_length=100, required=False, help_text="Sign in with …")
    role = forms.ChoiceField(label="Role of a person's first sign-in", choices=Membership.Role.choices, initial="member")


class ServerForm(forms.Form):
    enabled = forms.BooleanField(label="Sign people in to this tenant's virtual hosts", required=False)
    allow_registration = forms.BooleanField(label="Clients may register themselves (RFC 7591)", required=False)
    allow_metadata_documents = forms.BooleanField(label="Clients may identify by a client metadata document",
                                                  required=False)


@require_GET
@console_view()
def grant_list_view(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    return _grants_page(request, tenant)


def _grants_page(request: HttpRequest, tenant: Tenant, provider_form: IdentityProviderForm | None = None) -> HttpResponse:
    """The page; for admins with the server's switches and the identity provider's form (as sent, when refused)."""
    everyone = _everyone(request, tenant)
    grants = grant_list(tenant=tenant, user=None if everyone else request.user)
    server = authorization_server_state(tenant=tenant)
    initial = {"enabled": bool(server and server.enabled), "allow_registration": server.allow_registration if server else True,
               "allow_metadata_documents": server.allow_metadata_documents if server else True}
    context: dict[str, Any] = {
        "page_obj": page_of(request, grants), "everyone": everyone,
        "server_on": bool(server and server.enabled), "server_form": ServerForm(initial=initial) if everyone else None,
    }
    if everyone:
        provider = identity_provider_get(tenant=tenant)
        if provider_form is None:
            provider_form = IdentityProviderForm(initial={
                "issuer": provider.issuer, "client_id": provider.client_id, "scope": provider.scope,
                "label": provider.label, "role": provider.role} if provider else None)
        callback = request.build_absolute_uri(reverse("oauth-idp-callback", kwargs={"tenant": tenant.slug}))
        context |= {"provider": provider, "provider_form": provider_form, "provider_callback": callback}
    refused = provider_form is not None and bool(provider_form.errors)
    return render(request, "console/grants/grant_list.html", context, status=400 if refused else 200)


@require_POST
@console_view()
def identity_provider_settings(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    """Tenant admins set the identity provider people may sign in through."""
    form = IdentityProviderForm(request.POST)
    if form.is_valid():
        data = {**form.cleaned_data, "client_secret": form.cleaned_data["client_secret"] or None}
        try:
            identity_provider_set(tenant=tenant, **data)
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                for error in errors:
                    form.add_error(field if field in form.fields else None, error)
        else:
            messages.success(request, "People may sign in through the identity provider now.")
            return redirect("console:grant-list", tenant=tenant.slug)
    return _grants_page(request, tenant, form)


@require_http_methods(["GET", "POST"])
@console_view(manage=True)
def identity_provider_remove(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    """GET asks first; POST removes the identity provider (the console users it made stay)."""
    if request.method == "POST":
        identity_provider_clear(tenant=tenant)
        messages.success(request, "People no longer sign in through the identity provider.")
        return redirect("console:grant-list", tenant=tenant.slug)
    return render(request, "console/keys/confirm.html", {
        "title": "Stop signing people in through the identity provider?",
        "what": ["Its sign-in button goes from the sign-in page. People it signed in keep their console accounts, "
                 "which have no password: they sign in again once the same provider is added back (as the same "
                 "people; those removed from the tenant meanwhile stay out)."],
        "action": "Remove",
        "back_url": reverse("console:grant-list", kwargs={"tenant": tenant.slug}),
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
    path("signed-in-apps/identity-provider/", identity_provider_settings, name="identity-provider"),
    path("signed-in-apps/identity-provider/remove/", identity_provider_remove, name="identity-provider-remove"),
    path("signed-in-apps/<int:grant_id>/revoke/", grant_revoke, name="grant-revoke"),
]
