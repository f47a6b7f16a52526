"""The console's API key pages: list, issue (the secret shown once), edit, revoke.

Tenant admins manage all of the tenant's keys; members see and manage only the keys they issued
(`Access.manages_key`). Every key is looked up within the URL's tenant, and the team choices come
from that tenant only, so an id changed in a URL or a form never reaches another tenant's key."""

from __future__ import annotations

import re
from datetime import datetime

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from apps.console.access import console_view
from apps.console.paging import page_of
from apps.console.refusals import refusal_show
from apps.console.shown_once import secret_keep, secret_take
from apps.tenants import selectors
from apps.tenants.models import ApiKey, Team, Tenant
from apps.tenants.services import api_key_issue, api_key_revoke, api_key_update
from apps.tenants.validators import KEY_NAME_MAX_LENGTH


def expiry_field() -> forms.DateTimeField:
    return forms.DateTimeField(
        label="Expires (UTC)", required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"],
        help_text="Empty: the key does not expire.",
    )


def _scopes_field() -> forms.CharField:
    return forms.CharField(
        label="Scopes", required=False, max_length=2000,
        help_text="Separated by spaces or commas, e.g. tools:call; access rules read them.",
    )


class KeyEditForm(forms.Form):
    """A key's team, expiry and scopes. The team choices are the tenant's teams only."""

    team = forms.ModelChoiceField(label="Team", queryset=Team.objects.none(), required=False, empty_label="(no team)")
    expires_at = expiry_field()
    scopes = _scopes_field()

    def __init__(self, *args: object, tenant: Tenant, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = selectors.team_list(tenant=tenant)
        self.fields["team"].label_from_instance = lambda team: team.slug  # not "tenant/team"

    def clean_scopes(self) -> list[str]:
        return [scope for scope in re.split(r"[\s,]+", self.cleaned_data["scopes"]) if scope]


class KeyCreateForm(KeyEditForm):
    # Its length is the service's (`api_key_check`); the browser is told it.
    name = forms.CharField(label="Name", strip=False, help_text="Unique in the tenant, e.g. ci-deploy.",
                           widget=forms.TextInput(attrs={"maxlength": str(KEY_NAME_MAX_LENGTH)}))
    acts_as_owner = forms.BooleanField(
        label="Calls with this key are mine", required=False,
        help_text="They reach backends that take each person's own account with your connected accounts.")
    field_order = ["name", "team", "expires_at", "scopes", "acts_as_owner"]

    def clean_expires_at(self) -> datetime | None:
        # Only a new key: an existing one may be given a past expiry, which ends it now.
        expires_at = self.cleaned_data["expires_at"]
        if expires_at is not None and expires_at <= timezone.now():
            raise ValidationError("The expiry must be in the future.")
        return expires_at


def _key_to_manage(request: HttpRequest, tenant: Tenant, key_id: int) -> ApiKey:
    """The tenant's key, when the user may change it: 404 when the tenant has no such key, 403
    when it is another user's and the user is a member."""
    api_key = selectors.api_key_get(tenant=tenant, key_id=key_id)
    if api_key is None:
        raise Http404(f"no key with id {key_id}")
    if not request.access.manages_key(api_key):  # type: ignore[attr-defined]
        raise PermissionDenied("Members may change only the keys they issued.")
    return api_key


@require_GET
@console_view()
def key_list(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    keys = selectors.api_key_list_for(tenant=tenant, access=request.access)  # type: ignore[attr-defined]
    return render(request, "console/keys/key_list.html", {"page_obj": page_of(request, keys), "now": timezone.now()})


@require_http_methods(["GET", "POST"])
@console_view(members_write=True)
def key_create(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    """Issue a key owned by the user, then redirect to the page that shows its secret once
    (post/redirect/get: a reload there issues nothing)."""
    form = KeyCreateForm(request.POST or None, tenant=tenant)
    if request.method == "POST" and form.is_valid():
        try:
            issued = api_key_issue(tenant=tenant, owner=request.user, **form.cleaned_data)
        except ValidationError as exc:
            refusal_show(form, exc)
        else:
            secret_keep(request, what=f"key:{issued.api_key.pk}", secret=issued.secret)
            return redirect("console:key-created", tenant=tenant.slug, key_id=issued.api_key.pk)
    status = 400 if form.errors else 200
    return render(request, "console/keys/key_form.html", {"form": form}, status=status)


@require_GET
@console_view(members_write=True)
def key_created(request: HttpRequest, tenant: Tenant, key_id: int) -> HttpResponse:
    """The key just issued with its secret, the first time this page is loaded; after that
    without it (it is not kept anywhere)."""
    api_key = _key_to_manage(request, tenant, key_id)
    secret = secret_take(request, what=f"key:{api_key.pk}")
    response = render(request, "console/keys/key_created.html", {"api_key": api_key, "secret": secret})
    response["Cache-Control"] = "no-store"
    return response


@require_http_methods(["GET", "POST"])
@console_view(members_write=True)
def key_edit(request: HttpRequest, tenant: Tenant, key_id: int) -> HttpResponse:
    api_key = _key_to_manage(request, tenant, key_id)
    initial = {"team": api_key.team_id, "expires_at": api_key.expires_at, "scopes": " ".join(api_key.scopes)}
    form = KeyEditForm(request.POST or None, tenant=tenant, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            api_key_update(api_key=api_key, **form.cleaned_data)
        except ValidationError as exc:
            refusal_show(form, exc)
        else:
            messages.success(request, f"Key {api_key.name} saved.")
            return redirect("console:key-list", tenant=tenant.slug)
    status = 400 if form.errors else 200
    return render(request, "console/keys/key_form.html", {"form": form, "api_key": api_key}, status=status)


@require_http_methods(["GET", "POST"])
@console_view(members_write=True)
def key_revoke(request: HttpRequest, tenant: Tenant, key_id: int) -> HttpResponse:
    """GET asks for confirmation; POST revokes the key for good."""
    api_key = _key_to_manage(request, tenant, key_id)
    if request.method == "POST":
        api_key_revoke(api_key=api_key)
        messages.success(request, f"Key {api_key.name} revoked: calls with it are refused from now on.")
        return redirect("console:key-list", tenant=tenant.slug)
    return render(request, "console/keys/confirm.html", {
        "title": f"Revoke key {api_key.name}?",
        "what": [f"The key {api_key.name} ({api_key.prefix}…) stops working at once, for good.",
                 "Agents using it get 401 on their next call."],
        "action": "Revoke key",
        "back_url": reverse("console:key-list", kwargs={"tenant": tenant.slug}),
    })


urls = [
    path("keys/", key_list, name="key-list"),
    path("keys/new/", key_create, name="key-create"),
    path("keys/<int:key_id>/created/", key_created, name="key-created"),
    path("keys/<int:key_id>/edit/", key_edit, name="key-edit"),
    path("keys/<int:key_id>/revoke/", key_revoke, name="key-revoke"),
]
