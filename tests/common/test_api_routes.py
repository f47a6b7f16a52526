"""The REST API's URLs (apps.common.api_routes): every endpoint also answers with a trailing slash,
and whatever goes wrong under `/api/` is answered in JSON (`{"detail": ...}`), never an HTML page."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from apps.tenants.services import admin_token_issue
from tests.factories import backend_factory, tenant_factory

pytestmark = pytest.mark.django_db


def _detail(response: Any) -> str:
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    return str(response.json()["detail"])


def test_the_documented_trailing_slash_reaches_the_endpoint(admin_client: Client) -> None:
    backend = backend_factory(tenant=tenant_factory(slug="demo"), name="search")
    plain = admin_client.get("/api/v1/tenants/demo/backends")
    slashed = admin_client.get("/api/v1/tenants/demo/backends/")
    assert slashed.status_code == 200 and slashed.json()["results"] == plain.json()["results"]
    assert admin_client.get(f"/api/v1/tenants/demo/backends/{backend.pk}/").json()["name"] == "search"
    assert admin_client.get("/api/v1/plans/").status_code == 200
    assert admin_client.get("/api/v1/schema/").status_code == 200
    # Writes too: the view itself answers (no redirect that a client would follow as a GET).
    created = admin_client.post("/api/v1/tenants/demo/teams/", {"slug": "data"}, content_type="application/json")
    assert created.status_code == 201, created.content


def test_a_token_client_writes_through_a_trailing_slash_and_gets_json_404s(django_user_model: Any) -> None:
    tenant_factory(slug="demo")
    user = django_user_model.objects.create_superuser(username="root", password="pw")
    token = admin_token_issue(user=user, name="ci").secret
    client = Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {token}")
    created = client.post("/api/v1/tenants/demo/teams/", {"slug": "ops"}, content_type="application/json")
    assert created.status_code == 201, created.content
    missing = client.post("/api/v1/tenants/demo/nothing-here", {}, content_type="application/json")
    assert missing.status_code == 404 and "no API endpoint /api/v1/tenants/demo/nothing-here" in _detail(missing)


@pytest.mark.parametrize("debug", [False, True], ids=["production", "debug"])
def test_unknown_api_paths_answer_json_404(admin_client: Client, client: Client, settings: Any, debug: bool) -> None:
    settings.DEBUG = debug
    tenant_factory(slug="demo")
    for url in ("/api/v1/nowhere", "/api/v1/tenants/demo/nothing/", "/api/v1/tenants/demo/backends/x/y", "/api/v2/",
                "/api/v1/tenants/demo/backends//"):
        response = admin_client.get(url)
        assert response.status_code == 404 and "no API endpoint" in _detail(response), url
    anonymous = client.delete("/api/v1/nowhere")
    assert anonymous.status_code == 404 and "no API endpoint" in _detail(anonymous)
    # An object that is not there, and a method an endpoint does not take: JSON as well.
    assert admin_client.get("/api/v1/tenants/demo/backends/999999").status_code == 404
    assert _detail(admin_client.get("/api/v1/tenants/demo/backends/999999/"))
    wrong_method = admin_client.put("/api/v1/tenants/demo/backends/", {}, content_type="application/json")
    assert wrong_method.status_code == 405 and 'Method "PUT" not allowed' in _detail(wrong_method)
    # Outside the API, pages keep their HTML 404.
    page = admin_client.get("/console/nowhere/")
    assert page.status_code == 404 and not page["Content-Type"].startswith("application/json")
