"""The backends REST API: CRUD with replicas, isolation between tenants and roles (test-connection
included), pagination. What test-connection and health answer: tests/gateway/test_probes_api.py."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from apps.catalog.models import Backend
from apps.tenants.models import Tenant
from apps.tenants.services import admin_token_issue, membership_set
from tests.csrf import csrf_header
from tests.factories import backend_factory, openapi_backend_factory, tenant_factory, virtual_host_factory
from tests.processes import free_port

pytestmark = pytest.mark.django_db


def _api(tenant: Tenant) -> str:
    return f"/api/v1/tenants/{tenant.slug}/backends"


def test_create_read_update_delete_with_replicas(admin_client: Client) -> None:
    tenant = tenant_factory()
    created = admin_client.post(_api(tenant), {
        "name": "search", "kind": "mcp", "transport": "streamable-http",
        "replicas": ["http://127.0.0.1:9101/mcp", "http://127.0.0.1:9102/mcp"],
    }, content_type="application/json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["replicas"] == ["http://127.0.0.1:9101/mcp", "http://127.0.0.1:9102/mcp"]
    assert (body["name"], body["kind"], body["timeout_seconds"], body["active_spec"]) == ("search", "mcp", 60.0, None)
    url = f"{_api(tenant)}/{body['id']}"
    assert admin_client.get(url).json() == body
    updated = admin_client.put(url, {"replicas": ["http://127.0.0.1:9103/mcp"], "timeout_seconds": 5},
                               content_type="application/json")
    assert updated.status_code == 200
    assert (updated.json()["replicas"], updated.json()["timeout_seconds"], updated.json()["name"]) == (
        ["http://127.0.0.1:9103/mcp"], 5.0, "search")
    assert admin_client.delete(url).status_code == 204
    assert not Backend.objects.filter(pk=body["id"]).exists()


def test_an_openapi_backend_has_a_base_url_and_no_replicas(admin_client: Client) -> None:
    tenant = tenant_factory()
    created = admin_client.post(_api(tenant), {"name": "pets", "kind": "openapi", "base_url": "http://127.0.0.1:9/v1"},
                                content_type="application/json")
    assert created.status_code == 201 and created.json()["replicas"] == []
    refused = admin_client.post(_api(tenant), {"name": "p2", "kind": "openapi", "replicas": ["http://127.0.0.1:9/"]},
                                content_type="application/json")
    assert refused.status_code == 400 and "no replica URLs" in refused.json()["detail"]


def test_bad_input_is_400_with_a_message_and_changes_nothing(admin_client: Client) -> None:
    backend = backend_factory(urls=["http://127.0.0.1:9201/mcp"])
    url = f"{_api(backend.tenant)}/{backend.pk}"
    for body, message in (
        ({"replicas": []}, "at least one replica URL"),
        ({"replicas": ["http://127.0.0.1:1/a", "http://127.0.0.1:1/a"]}, "distinct"),
        ({"transport": "carrier-pigeon"}, "transport"),
        ({"timeout_seconds": "soon"}, "timeout_seconds"),
    ):
        response = admin_client.put(url, body, content_type="application/json")
        assert response.status_code == 400 and message in response.json()["detail"], response.json()
    assert list(backend.replicas.values_list("url", flat=True)) == ["http://127.0.0.1:9201/mcp"]
    missing = admin_client.post(_api(backend.tenant), {"kind": "mcp"}, content_type="application/json")
    assert missing.status_code == 400 and "name" in missing.json()["detail"]


def test_delete_is_refused_while_mounted(admin_client: Client) -> None:
    backend = backend_factory()
    host = virtual_host_factory(tenant=backend.tenant, mounts={"m": backend})
    response = admin_client.delete(f"{_api(backend.tenant)}/{backend.pk}")
    assert response.status_code == 400 and f"still mounted on {host.slug}:m" in response.json()["detail"]


def test_the_list_is_paginated_with_bounded_queries(admin_client: Client, django_assert_max_num_queries: Any) -> None:
    tenant = tenant_factory()
    for n in range(55):
        backend_factory(tenant=tenant, name=f"b-{n:02d}")
    openapi_backend_factory(tenant=tenant, name="z-api")
    with django_assert_max_num_queries(10):
        page = admin_client.get(_api(tenant)).json()
    assert page["count"] == 56 and len(page["results"]) == 50 and page["next"]
    with django_assert_max_num_queries(10):
        rest = admin_client.get(_api(tenant) + "?limit=50&offset=50").json()
    assert [b["name"] for b in rest["results"]][-1] == "z-api"


def test_other_tenants_are_404_members_only_read_and_test(client: Client, django_user_model: Any) -> None:
    mine, theirs = tenant_factory(), tenant_factory()
    user = django_user_model.objects.create_user(username="m", password="pw")
    membership_set(tenant=mine, user=user, role="member")
    client.force_login(user)
    foreign = backend_factory(tenant=theirs)
    own = backend_factory(tenant=mine, urls=[f"http://127.0.0.1:{free_port()}/mcp"])
    assert client.get(_api(theirs)).status_code == 404
    assert client.get(f"{_api(mine)}/{foreign.pk}").status_code == 404
    assert client.post(f"{_api(mine)}/{foreign.pk}/test-connection").status_code == 404
    assert client.get(f"{_api(mine)}/{own.pk}").status_code == 200
    assert client.post(f"{_api(mine)}/{own.pk}/test-connection").status_code == 200
    assert client.post(_api(mine), {"name": "x", "replicas": ["http://a/"]}, content_type="application/json").status_code == 403
    assert client.put(f"{_api(mine)}/{own.pk}", {"timeout_seconds": 1}, content_type="application/json").status_code == 403
    assert client.delete(f"{_api(mine)}/{own.pk}").status_code == 403
    assert Backend.objects.filter(pk=own.pk, timeout_seconds=60).exists()


def test_anonymous_callers_are_401_and_admin_tokens_work(client: Client, admin_user: Any) -> None:
    backend = backend_factory()
    assert client.get(_api(backend.tenant)).status_code == 401
    token = admin_token_issue(user=admin_user, name="t").secret
    response = Client().get(_api(backend.tenant), HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200 and response.json()["count"] == 1


def _state(tenant: Tenant) -> list[tuple[Any, ...]]:
    return list(Backend.objects.filter(tenant=tenant).order_by("name").values_list("name", "timeout_seconds"))


@pytest.mark.parametrize(("method", "path", "body", "expected"), [
    ("post", "", {"name": "new", "replicas": ["http://127.0.0.1:9/mcp"]}, 201),
    ("put", "/{backend}", {"timeout_seconds": 5}, 200),
    ("delete", "/{backend}", {}, 204),
    ("post", "/{backend}/test-connection", {}, 200),  # a check: it changes nothing even when it runs
])
def test_session_writes_need_the_csrf_token(admin_user: Any, method: str, path: str, body: dict[str, Any],
                                            expected: int) -> None:
    backend = backend_factory(urls=[f"http://127.0.0.1:{free_port()}/mcp"])  # closed: the check answers at once
    url = _api(backend.tenant) + path.format(backend=backend.pk)
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    before = _state(backend.tenant)

    refused = getattr(client, method)(url, body, content_type="application/json")
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
    assert _state(backend.tenant) == before

    allowed = getattr(client, method)(url, body, content_type="application/json",
                                      **csrf_header(client, backend.tenant.slug))
    assert allowed.status_code == expected, allowed.content
    assert (_state(backend.tenant) != before) == ("test-connection" not in path)
