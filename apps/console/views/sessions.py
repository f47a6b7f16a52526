"""The tenant's active MCP sessions, read from the session store in Redis."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_GET

from apps.console.access import console_view
from apps.gateway.sessions import SessionSequence
from apps.tenants.models import Tenant

PAGE_SIZE = 50


@require_GET
@console_view()
def session_list(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    page = Paginator(SessionSequence(tenant=tenant), PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "console/sessions/session_list.html", {"page": page})


urls = [
    path("sessions/", session_list, name="session-list"),
]
