"""`/console/tokens/`: the signed-in user's own REST API tokens (any user, outside any tenant).
A token acts as its user with that user's roles; its secret is shown once, when it is issued."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from apps.console.access import console_view
from apps.console.paging import page_of
from apps.console.shown_once import secret_keep, secret_take
from apps.console.views.keys import expiry_field
from apps.tenants import selectors
from apps.tenants.models import AdminToken
from apps.tenants.services import admin_token_issue, admin_token_revoke


class TokenForm(forms.Form):
    name = forms.CharField(label="Name", max_length=AdminToken._meta.get_field("name").max_length,
                           help_text="What uses it, e.g. terraform.")
    expires_at = expiry_field()

    def clean_expires_at(self) -> object:
        expires_at = self.cleaned_data["expires_at"]
        if expires_at is not None and expires_at <= timezone.now():
            raise ValidationError("The expiry must be in the future.")
        return expires_at


@require_http_methods(["GET", "POST"])
@console_view()
def token_list(request: HttpRequest) -> HttpResponse:
    """The user's tokens; POST issues one and redirects to the page showing its secret, once."""
    form = TokenForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            issued = admin_token_issue(user=request.user, **form.cleaned_data)
        except ValidationError as exc:
            form.add_error("name", exc)
        else:
            secret_keep(request, what=f"token:{issued.admin_token.pk}", secret=issued.secret)
            return redirect("console:token-created", token_id=issued.admin_token.pk)
    tokens = selectors.admin_token_list(user=request.user)
    context = {"page_obj": page_of(request, tokens), "form": form, "now": timezone.now()}
    return render(request, "console/keys/token_list.html", context, status=400 if form.errors else 200)


@require_GET
@console_view()
def token_created(request: HttpRequest, token_id: int) -> HttpResponse:
    """The token just issued with its secret, the first time this page is loaded only."""
    token = selectors.admin_token_get(user=request.user, token_id=token_id)
    if token is None:
        raise Http404(f"you have no token with id {token_id}")
    secret = secret_take(request, what=f"token:{token.pk}")
    response = render(request, "console/keys/token_created.html", {"token": token, "secret": secret})
    response["Cache-Control"] = "no-store"
    return response


@require_http_methods(["GET", "POST"])
@console_view()
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    # Looked up among the user's own tokens only: another user's id is simply not found.
    token = selectors.admin_token_get(user=request.user, token_id=token_id)
    if token is None:
        raise Http404(f"you have no token with id {token_id}")
    if request.method == "POST":
        admin_token_revoke(admin_token=token)
        messages.success(request, f"Token {token.name} revoked.")
        return redirect("console:token-list")
    return render(request, "console/keys/confirm.html", {
        "title": f"Revoke token {token.name}?",
        "what": [f"The token {token.name} ({token.prefix}…) stops working at once, for good."],
        "action": "Revoke token",
        "back_url": reverse("console:token-list"),
    })


platform_urls = [
    path("tokens/", token_list, name="token-list"),
    path("tokens/<int:token_id>/created/", token_created, name="token-created"),
    path("tokens/<int:token_id>/revoke/", token_revoke, name="token-revoke"),
]
