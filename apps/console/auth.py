"""Signing in and out of the console (Django's auth, with login throttling)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView, LogoutView
from django.http import HttpRequest

from apps.console.throttle import login_failure_record, login_success_record, login_wait_seconds


def client_address(request: HttpRequest) -> str:
    # REMOTE_ADDR only: X-Forwarded-For is the client's to forge unless a trusted proxy sets it.
    return str(request.META.get("REMOTE_ADDR") or "unknown")


class ThrottledAuthenticationForm(AuthenticationForm):
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
            login_failure_record(username=username, address=address)
            raise
        login_success_record(username=username, address=address)
        return cleaned


class ConsoleLoginView(LoginView):
    template_name = "console/login.html"
    authentication_form = ThrottledAuthenticationForm
    redirect_authenticated_user = True


class ConsoleLogoutView(LogoutView):
    next_page = "console:login"
