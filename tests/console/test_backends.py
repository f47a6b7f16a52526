"""The console's backend pages: list, create/edit/delete of both kinds, an MCP backend's page with
its live health and "Test connection" (against the real demo backend and a closed port)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from apps.catalog.credentials import egress_credential_set
from apps.catalog.models import Backend, BackendReplica
from apps.common.redis import redis_client
from apps.common.replica_health import REPLICA_HEALTH_KEY, STALE_SECONDS, replica_down_record
from apps.gateway.probes import backend_probe
from apps.tenants.models import Tenant
from apps.tenants.services import membership_set
from tests.factories import backend_factory, openapi_backend_factory, tenant_factory, virtual_host_factory
from tests.processes import backend_argv, free_port, running

pytestmark = pytest.mark.django_db


def _base(tenant: Tenant) -> str:
    return f"/console/t/{tenant.slug}/backends/"


def _user(django_user_model: Any, tenant: Tenant, role: str, name: str = "person") -> Any:
    user = django_user_model.objects.create_user(username=name, password="pw")
    membership_set(tenant=tenant, user=user, role=role)
    return user


@pytest.fixture
def closed_url() -> str:
    return f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens there


def test_the_list_shows_both_kinds_linked_to_their_pages_and_pages_by_50(
    admin_client: Client, django_assert_max_num_queries: Any
) -> None:
    tenant = tenant_factory()
    mcp = backend_factory(tenant=tenant, name="a-mcp")
    api = openapi_backend_factory(tenant=tenant, name="a-rest")
    for n in range(55):
        backend_factory(tenant=tenant, name=f"z-{n:02d}")
    with django_assert_max_num_queries(12):
        response = admin_client.get(_base(tenant))
    html = response.content.decode()
    assert f'href="{_base(tenant)}{mcp.pk}/"' in html
    assert f'href="{_base(tenant)}{api.pk}/spec/"' in html
    assert "Page 1 of 2 (57 in all)" in html and "z-47" in html and "z-48" not in html
    with django_assert_max_num_queries(12):
        second = admin_client.get(_base(tenant) + "?page=2").content.decode()
    assert "z-48" in second and "z-54" in second


def test_create_an_mcp_backend_with_replicas_one_per_line(admin_client: Client) -> None:
    tenant = tenant_factory()
    response = admin_client.post(_base(tenant) + "new/mcp/", {
        "name": "search", "transport": "streamable-http", "timeout_seconds": "30",
        "urls": "http://127.0.0.1:9101/mcp\n\n  http://127.0.0.1:9102/mcp  \n",
    })
    backend = Backend.objects.get(tenant=tenant, name="search")
    assert response.status_code == 302 and response["Location"] == f"{_base(tenant)}{backend.pk}/"
    assert [r.url for r in backend.replicas.order_by("position")] == [
        "http://127.0.0.1:9101/mcp", "http://127.0.0.1:9102/mcp"]
    assert backend.timeout_seconds == 30


def test_create_an_openapi_backend_goes_to_its_spec_page(admin_client: Client) -> None:
    tenant = tenant_factory()
    response = admin_client.post(_base(tenant) + "new/openapi/", {
        "name": "pets", "base_url": "http://127.0.0.1:9200/v1", "timeout_seconds": "60", "tool_name_max_length": "64",
    })
    backend = Backend.objects.get(tenant=tenant, name="pets")
    assert backend.kind == "openapi" and backend.base_url == "http://127.0.0.1:9200/v1"
    assert response["Location"] == f"{_base(tenant)}{backend.pk}/spec/"


def test_bad_input_is_refused_with_the_services_message_and_stores_nothing(admin_client: Client) -> None:
    tenant = tenant_factory()
    response = admin_client.post(_base(tenant) + "new/mcp/", {
        "name": "dup", "transport": "streamable-http", "timeout_seconds": "30",
        "urls": "http://127.0.0.1:9101/mcp\nhttp://127.0.0.1:9101/mcp",
    })
    assert response.status_code == 400 and "replica URLs must be distinct" in response.content.decode()
    response = admin_client.post(_base(tenant) + "new/mcp/", {
        "name": "bad", "transport": "streamable-http", "timeout_seconds": "30", "urls": "ftp://example.com/x",
    })
    assert response.status_code == 400
    assert not Backend.objects.filter(tenant=tenant).exists()


def test_edit_replaces_the_replicas_and_keeps_the_name(admin_client: Client) -> None:
    backend = backend_factory(name="keep", urls=["http://127.0.0.1:9301/mcp"])
    page = admin_client.get(f"{_base(backend.tenant)}{backend.pk}/edit/").content.decode()
    assert "http://127.0.0.1:9301/mcp" in page
    response = admin_client.post(f"{_base(backend.tenant)}{backend.pk}/edit/", {
        "name": "renamed", "transport": "sse", "timeout_seconds": "5", "urls": "http://127.0.0.1:9302/sse",
    })
    assert response.status_code == 302
    backend.refresh_from_db()
    assert backend.name == "keep" and backend.transport == "sse"
    assert list(backend.replicas.values_list("url", flat=True)) == ["http://127.0.0.1:9302/sse"]


def test_delete_asks_first_and_is_refused_while_mounted(admin_client: Client) -> None:
    backend = backend_factory()
    host = virtual_host_factory(tenant=backend.tenant, mounts={"main": backend})
    url = f"{_base(backend.tenant)}{backend.pk}/delete/"
    assert "Delete " in admin_client.get(url).content.decode()
    refused = admin_client.post(url)
    assert refused.status_code == 400 and f"still mounted on {host.slug}:main" in refused.content.decode()
    assert Backend.objects.filter(pk=backend.pk).exists()
    other = backend_factory(tenant=backend.tenant)
    assert admin_client.post(f"{_base(backend.tenant)}{other.pk}/delete/")["Location"] == _base(backend.tenant)
    assert not Backend.objects.filter(pk=other.pk).exists()


def test_health_and_test_connection_against_the_real_demo_backend(
    admin_client: Client, demo_backend_url: str, closed_url: str
) -> None:
    backend = backend_factory(urls=[demo_backend_url, closed_url])
    redis_client().delete(f"catalog:probe:{backend.pk}")
    page = admin_client.get(f"{_base(backend.tenant)}{backend.pk}/").content.decode()
    assert 'hx-trigger="load, every 5s"' in page and "Test connection" in page
    health = admin_client.get(f"{_base(backend.tenant)}{backend.pk}/health/").content.decode()
    up, down = health.split(closed_url)
    assert '<span class="state up">up</span>' in up and "demo" in up
    assert '<span class="state down">down</span>' in down and "Connection refused" in down
    tested = admin_client.post(f"{_base(backend.tenant)}{backend.pk}/test/", HTTP_HX_REQUEST="true").content.decode()
    assert "server <strong>demo</strong>" in tested and "protocol version <strong>2025-11-25</strong>" in tested
    assert "ConnectError" in tested
    # Without JavaScript the button posts the form and gets a whole page.
    assert "<h1>Test connection" in admin_client.post(f"{_base(backend.tenant)}{backend.pk}/test/").content.decode()


def test_health_shows_which_replicas_the_gateways_have_marked_down(
    admin_client: Client, demo_backend_url: str, closed_url: str
) -> None:
    backend = backend_factory(urls=[demo_backend_url, closed_url])
    now = time.time()
    redis_client().hset(REPLICA_HEALTH_KEY, mapping={
        closed_url: replica_down_record(since=1_764_590_400.0, instance="gw-a", checked=now),
        # Left by an instance long gone: nobody checks it any more, so it says nothing.
        demo_backend_url: replica_down_record(since=now - 999, instance="gw-gone", checked=now - STALE_SECONDS - 1),
    })
    try:
        health = admin_client.get(f"{_base(backend.tenant)}{backend.pk}/health/").content.decode()
    finally:
        redis_client().hdel(REPLICA_HEALTH_KEY, closed_url, demo_backend_url)
    assert ">Gateways</th>" in health
    up, down = health.split(closed_url)
    assert '<span class="state up">in use</span>' in up and "gw-gone" not in up
    assert "since <time" in down and "2025-12-01 12:00:00 UTC" in down and "found by <code>gw-a</code>" in down
    single = backend_factory(tenant=backend.tenant, urls=[demo_backend_url])  # every request tries it: not tracked
    assert ">Gateways</th>" not in admin_client.get(f"{_base(backend.tenant)}{single.pk}/health/").content.decode()


def test_health_is_cached_for_a_few_seconds_and_test_connection_checks_now(demo_backend_url: str) -> None:
    backend = backend_factory(urls=[demo_backend_url])
    first = backend_probe(backend=backend, fresh=True)
    assert backend_probe(backend=backend).checked_at == first.checked_at
    assert backend_probe(backend=backend, fresh=True).checked_at > first.checked_at


def test_an_openapi_backend_checks_its_base_url(admin_client: Client, demo_backend_url: str, closed_url: str) -> None:
    reachable = openapi_backend_factory(base_url=demo_backend_url.removesuffix("/mcp") + "/rest/v1")
    assert backend_probe(backend=reachable, fresh=True).up
    unreachable = openapi_backend_factory(base_url=closed_url)
    probe = backend_probe(backend=unreachable, fresh=True)
    assert not probe.up and "Connection refused" in probe.replicas[0].error
    page = admin_client.get(f"{_base(reachable.tenant)}{reachable.pk}/spec/").content.decode()
    assert "Test connection" in page and "data-drop-upload" in page
    # The MCP page of an OpenAPI backend is its spec page.
    assert admin_client.get(f"{_base(reachable.tenant)}{reachable.pk}/")["Location"].endswith("/spec/")


def test_users_of_another_tenant_get_404_everywhere(client: Client, django_user_model: Any) -> None:
    mine, theirs = tenant_factory(), tenant_factory()
    client.force_login(_user(django_user_model, mine, "admin"))
    backend = backend_factory(tenant=theirs)
    for suffix in ("", "edit/", "delete/", "health/"):
        assert client.get(f"{_base(theirs)}{backend.pk}/{suffix}").status_code == 404
        # Another tenant's id under my tenant's URL is no better.
        assert client.get(f"{_base(mine)}{backend.pk}/{suffix}").status_code == 404
    assert client.post(f"{_base(mine)}{backend.pk}/delete/").status_code == 404
    assert client.post(f"{_base(mine)}{backend.pk}/test/").status_code == 404
    assert Backend.objects.filter(pk=backend.pk).exists()


def test_members_read_and_test_but_do_not_change(client: Client, django_user_model: Any) -> None:
    backend = backend_factory(urls=[f"http://127.0.0.1:{free_port()}/mcp"])
    client.force_login(_user(django_user_model, backend.tenant, "member"))
    base = _base(backend.tenant)
    assert client.get(f"{base}{backend.pk}/").status_code == 200
    assert "New MCP backend" not in client.get(base).content.decode()
    assert client.post(base + "new/mcp/", {"name": "x", "transport": "sse", "urls": "http://a/", "timeout_seconds": 1}).status_code == 403
    assert client.post(f"{base}{backend.pk}/edit/", {"transport": "sse", "urls": "http://a/", "timeout_seconds": 1}).status_code == 403
    assert client.post(f"{base}{backend.pk}/delete/").status_code == 403
    assert client.post(f"{base}{backend.pk}/test/").status_code == 200
    assert BackendReplica.objects.filter(backend=backend).count() == 1


def test_anonymous_visitors_go_to_the_login(client: Client) -> None:
    backend = backend_factory()
    url = f"{_base(backend.tenant)}{backend.pk}/"
    assert client.get(url)["Location"] == f"/console/login/?next={url}"


def test_every_form_needs_the_csrf_token(admin_user: Any) -> None:
    backend = backend_factory()
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    base = _base(backend.tenant)
    for url in (base + "new/mcp/", base + "new/openapi/", f"{base}{backend.pk}/edit/", f"{base}{backend.pk}/delete/",
                f"{base}{backend.pk}/test/"):
        assert client.post(url, {"name": "x"}).status_code == 403, url
    assert Backend.objects.filter(pk=backend.pk).exists()


def test_an_http_sse_replica_is_up_when_its_stream_names_the_message_endpoint(sse_backend_url: str) -> None:
    backend = backend_factory(urls=[sse_backend_url], transport="sse")
    (replica,) = backend_probe(backend=backend, fresh=True).replicas
    assert replica.up and replica.detail.startswith("message endpoint /") and replica.error == ""


@pytest.fixture(scope="module")
def auth_backend_url() -> Iterator[str]:
    """The demo MCP server answering only requests with `Authorization: Bearer tok-gateway`."""
    port = free_port()
    with running(backend_argv("tests.backends.auth_server", port) + ["--tokens", "tok-gateway"], port,
                 log_name="probe-auth-backend"):
        yield f"http://127.0.0.1:{port}/mcp"


def test_the_check_carries_the_credential_the_gateway_sends(auth_backend_url: str) -> None:
    backend = backend_factory(urls=[auth_backend_url])
    (refused,) = backend_probe(backend=backend, fresh=True).replicas
    assert not refused.up and refused.error.startswith("HTTP 401 to initialize")
    egress_credential_set(backend=backend, kind="bearer", secret="tok-gateway")
    (answered,) = backend_probe(backend=Backend.objects.get(pk=backend.pk), fresh=True).replicas
    assert answered.up and answered.server_name == "demo"
