"""Every REST API route authenticates the same two ways: an admin token (a header no browser sends
by itself) or the console's session, whose writes need the CSRF token. Read from the URL
configuration, so a route added later with another authentication fails here; then a session
write without the token is refused on routes of every API app."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.authentication import SessionAuthentication
from rest_framework.views import APIView

from apps.tenants.authentication import AdminTokenAuthentication
from tests.factories import backend_factory, openapi_backend_factory, virtual_host_factory


def _api_views(patterns: list[Any], prefix: str = "") -> Iterator[tuple[str, type[APIView]]]:
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from _api_views(pattern.url_patterns, route)
        elif isinstance(pattern, URLPattern) and route.startswith("api/v1/"):
            view = getattr(pattern.callback, "cls", None)
            if isinstance(view, type) and issubclass(view, APIView):
                yield route, view


def test_every_api_route_takes_an_admin_token_or_a_csrf_checked_session() -> None:
    views = list(_api_views(get_resolver().url_patterns))
    routes = {route for route, _ in views}
    # The walk reaches every API app (a walk that found nothing would prove nothing).
    for part in ("backends/<int:backend_id>/spec", "virtual-hosts/<int:virtual_host_id>/access-policy",
                 "virtual-hosts/<int:virtual_host_id>/tool-costs", "rate-limits", "keys", "tools", "plans"):
        assert any(part in route for route in routes), part
    for route, view in views:
        for authentication in view.authentication_classes:
            if issubclass(authentication, SessionAuthentication):
                assert authentication.enforce_csrf is SessionAuthentication.enforce_csrf, route
            else:
                assert authentication is AdminTokenAuthentication, (route, authentication)


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "path"), [
    ("post", "backends/{openapi}/spec"),
    ("put", "virtual-hosts/{vhost}/access-policy"),
    ("put", "virtual-hosts/{vhost}/tool-costs"),
    ("post", "virtual-hosts/{vhost}/access-policy/simulate"),
])
def test_session_writes_elsewhere_need_the_csrf_token_too(admin_user: Any, method: str, path: str) -> None:
    backend = backend_factory()
    openapi = openapi_backend_factory(tenant=backend.tenant)
    vhost = virtual_host_factory(tenant=backend.tenant, mounts={"b": backend})
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    url = f"/api/v1/tenants/{backend.tenant.slug}/" + path.format(openapi=openapi.pk, vhost=vhost.pk)
    refused = getattr(client, method)(url, {}, content_type="application/json")
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
    # Signed in and allowed otherwise: without the CSRF check the same request gets past
    # authentication (a validation error or an answer, not a 403).
    checked_elsewhere = Client()
    checked_elsewhere.force_login(admin_user)
    assert getattr(checked_elsewhere, method)(url, {}, content_type="application/json").status_code != 403
