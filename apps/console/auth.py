"""Signing in and out of the console (Django's auth, with login throttling). The admin site's
sign-in form is throttled the same way, by the same counters: a username locked at one form is
locked at the other, and failures at either count toward one lock."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView, LogoutView
from django.http import HttpRequest

from apps.console.throttle import login_failure_record, login_success_record, login_wait_seconds
from apps.oauth.selectors import identity_provider_for_path


def client_address(request: HttpRequest) -> str:
    # REMOTE_ADDR only: X-Forwarded-For is the client's to forge unless a trusted proxy sets it.
    return str(request.META.get("REMOTE_ADDR") or "unknown")


class ThrottledAuthenticationForm(AuthenticationForm):
    """The console's sign-in form: refuses a locked username or address before checking the
    password, counts a wrong password, and clears the username's count on success. A right password
    for a user the form does not let in (inactive; not staff, at the admin) is refused without
    counting: it guesses nothing."""

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username") or ""
        address = client_address(self.request) if self.request is not None else "unknown"
        wait = login_wait_seconds(username=username, address=address)
        if wait:
            minutes = max(1, round(wait / 60))
            raise forms.ValidationError(
                f"Too many failed sign-ins. Try again in about {minutes} minute{'s' if minutes != 1 else ''}.",
                code="throttled",
            )
        try:
            cleaned = super().clean()
        except forms.ValidationError:
            if self.get_user() is None:
                login_failure_record(username=username, address=address)
            raise
        login_success_record(username=username, address=address)
        return cleaned


class ThrottledAdminAuthenticationForm(ThrottledAuthenticationForm, AdminAuthenticationForm):
    """The admin site's sign-in form (`admin.site.login_form`): staff only, as Django's own."""


class ConsoleLoginView(LoginView):
    """The console's sign-in: a username and password, or, when the page the person was going to
    belongs to a tenant with an identity provider, that provider."""

    template_name = "console/login.html"
    authentication_form = ThrottledAuthenticationForm
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["identity_provider"] = identity_provider_for_path(path=self.get_redirect_url())
        return context


class ConsoleLogoutView(LogoutView):
    next_page = "console:login"
