"""The virtual hosts REST API: CRUD, mounts, aliases and the client configurations, with the same
isolation as the console (the exposed tool names included; what they are: tests/gateway/test_exposure_api.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from apps.catalog.models import ToolAlias, VirtualHost, VirtualHostBackend
from apps.catalog.services import ToolTarget
from apps.tenants.models import Tenant
from apps.tenants.services import membership_set
from tests.csrf import csrf_header
from tests.factories import api_key_factory, backend_factory, tenant_factory, virtual_host_factory

pytestmark = pytest.mark.django_db


def _api(tenant: Tenant) -> str:
    return f"/api/v1/tenants/{tenant.slug}/virtual-hosts"


def test_create_read_update_delete(admin_client: Client) -> None:
    tenant = tenant_factory()
    key = api_key_factory(tenant=tenant).api_key
    created = admin_client.post(_api(tenant), {"slug": "tools", "tool_search": "only"}, content_type="application/json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["mcp_url"] == f"http://testserver/mcp/{tenant.slug}/tools/mcp"
    assert body["sse_url"] == f"http://testserver/mcp/{tenant.slug}/tools/sse"
    assert (body["tool_search"], body["mounts"], body["aliases"], body["allow_anonymous"]) == ("only", [], [], False)
    url = f"{_api(tenant)}/{body['id']}"
    updated = admin_client.put(url, {"allow_anonymous": True, "anonymous_key": key.pk, "slug": "renamed"},
                               content_type="application/json").json()
    assert (updated["slug"], updated["allow_anonymous"], updated["anonymous_key"], updated["tool_search"]) == (
        "tools", True, key.pk, "only")
    assert admin_client.get(url).json() == updated
    assert admin_client.delete(url).status_code == 204
    assert not VirtualHost.objects.filter(pk=body["id"]).exists()


def test_refusals_are_400_and_change_nothing(admin_client: Client) -> None:
    host = virtual_host_factory()
    url = f"{_api(host.tenant)}/{host.pk}"
    foreign_key = api_key_factory().api_key
    for body, message in (
        ({"allow_anonymous": True}, "needs an anonymous key"),
        ({"allow_anonymous": True, "anonymous_key": foreign_key.pk}, f"no API key with id {foreign_key.pk}"),
        ({"tool_search": "sometimes"}, "tool_search"),
        ({"tool_search": "listed", "tool_search_name": "has space"}, "Tool names are 1-128 characters"),
    ):
        response = admin_client.put(url, body, content_type="application/json")
        assert response.status_code == 400 and message in response.json()["detail"], response.json()
    host.refresh_from_db()
    assert (host.allow_anonymous, host.tool_search) == (False, "auto")
    duplicate = admin_client.post(_api(host.tenant), {"slug": host.slug}, content_type="application/json")
    assert duplicate.status_code == 400


def test_mounts_and_aliases(admin_client: Client) -> None:
    tenant = tenant_factory()
    one, two = backend_factory(tenant=tenant), backend_factory(tenant=tenant)
    host = virtual_host_factory(tenant=tenant, mounts={"a": one})
    base = f"{_api(tenant)}/{host.pk}"
    mounted = admin_client.post(f"{base}/mounts", {"map_key": "b", "backend": two.pk}, content_type="application/json")
    assert mounted.status_code == 201 and mounted.json() == {"map_key": "b", "backend": two.pk, "backend_name": two.name}
    assert [m["map_key"] for m in admin_client.get(f"{base}/mounts").json()["results"]] == ["a", "b"]
    aliased = admin_client.post(f"{base}/aliases", {"alias": "Find", "map_key": "b", "tool": "search"},
                                content_type="application/json")
    assert aliased.status_code == 201 and aliased.json() == {"alias": "Find", "map_key": "b", "tool": "search"}
    assert admin_client.get(f"{base}/aliases").json()["results"] == [aliased.json()]
    refused = admin_client.delete(f"{base}/mounts/b")
    assert refused.status_code == 400 and "target of aliases Find" in refused.json()["detail"]
    unmounted_key = admin_client.post(f"{base}/aliases", {"alias": "x", "map_key": "zz", "tool": "y"},
                                      content_type="application/json")
    assert unmounted_key.status_code == 400 and "not mounted" in unmounted_key.json()["detail"]
    assert admin_client.delete(f"{base}/aliases/Find").status_code == 204
    assert admin_client.delete(f"{base}/mounts/b").status_code == 204
    assert admin_client.delete(f"{base}/mounts/b").status_code == 404
    assert admin_client.get(base).json()["mounts"] == [{"map_key": "a", "backend": one.pk, "backend_name": one.name}]


def test_another_tenants_backend_cannot_be_mounted(admin_client: Client) -> None:
    host = virtual_host_factory()
    foreign = backend_factory()
    response = admin_client.post(f"{_api(host.tenant)}/{host.pk}/mounts", {"map_key": "x", "backend": foreign.pk},
                                 content_type="application/json")
    assert response.status_code == 400 and f"no backend with id {foreign.pk} in this tenant" in response.json()["detail"]
    assert not host.mounts.filter(map_key="x").exists()


def test_connect_answers_every_client_with_a_placeholder(admin_client: Client) -> None:
    host = virtual_host_factory(slug="tools")
    body = admin_client.get(f"{_api(host.tenant)}/{host.pk}/connect").json()
    assert body["url"] == f"http://testserver/mcp/{host.tenant.slug}/tools/mcp"
    assert [c["client"] for c in body["configs"]] == [
        "claude-desktop", "claude-code", "cursor", "vscode", "windsurf", "codex", "python"]
    assert all(body["url"] in c["text"] for c in body["configs"])
    assert all(body["key_placeholder"] in c["text"] for c in body["configs"] if c["client"] != "vscode")
    assert "${input:" in next(c["text"] for c in body["configs"] if c["client"] == "vscode")  # VS Code prompts


def test_the_list_is_paginated_with_bounded_queries(admin_client: Client, django_assert_max_num_queries: Any) -> None:
    tenant = tenant_factory()
    backend = backend_factory(tenant=tenant)
    for n in range(52):
        virtual_host_factory(tenant=tenant, slug=f"h-{n:02d}", mounts={"m": backend},
                             tool_aliases={f"a{n}": ToolTarget("m", "t")})
    with django_assert_max_num_queries(10):
        page = admin_client.get(_api(tenant)).json()
    assert page["count"] == 52 and len(page["results"]) == 50
    assert page["results"][0]["aliases"] == [{"alias": "a0", "map_key": "m", "tool": "t"}]


def test_isolation_roles_and_anonymous(client: Client, django_user_model: Any) -> None:
    host, foreign = virtual_host_factory(), virtual_host_factory()
    user = django_user_model.objects.create_user(username="m", password="pw")
    membership_set(tenant=host.tenant, user=user, role="member")
    assert client.get(_api(host.tenant)).status_code == 401
    client.force_login(user)
    mine = _api(host.tenant)
    for path in ("", "/mounts", "/aliases", "/exposed-tools", "/connect"):
        assert client.get(f"{mine}/{foreign.pk}{path}").status_code == 404, path
        assert client.get(f"{mine}/{host.pk}{path}").status_code == 200, path
    assert client.get(_api(foreign.tenant)).status_code == 404
    assert client.post(mine, {"slug": "x"}, content_type="application/json").status_code == 403
    assert client.delete(f"{mine}/{host.pk}").status_code == 403
    assert client.delete(f"{mine}/{host.pk}/mounts/main").status_code == 403
    assert client.post(f"{mine}/{host.pk}/aliases", {"alias": "a", "map_key": "main", "tool": "t"},
                       content_type="application/json").status_code == 403
    assert VirtualHost.objects.filter(pk=host.pk).exists() and not ToolAlias.objects.exists()


def _state(tenant: Tenant) -> tuple[list[tuple[Any, ...]], ...]:
    hosts = VirtualHost.objects.filter(tenant=tenant)
    return (
        list(hosts.order_by("slug").values_list("slug", "tool_search")),
        list(VirtualHostBackend.objects.filter(virtual_host__in=hosts).order_by("map_key")
             .values_list("virtual_host__slug", "map_key", "backend_id")),
        list(ToolAlias.objects.filter(virtual_host__in=hosts).order_by("alias").values_list("alias", "map_key")),
    )


@pytest.mark.parametrize(("method", "path", "body", "expected"), [
    ("post", "", {"slug": "new"}, 201),
    ("put", "/{host}", {"tool_search": "only"}, 200),
    ("delete", "/{host}", {}, 204),
    ("post", "/{host}/mounts", {"map_key": "c", "backend": "{spare}"}, 201),
    ("delete", "/{host}/mounts/b", {}, 204),
    ("post", "/{host}/aliases", {"alias": "Other", "map_key": "a", "tool": "t"}, 201),
    ("delete", "/{host}/aliases/Find", {}, 204),
])
def test_session_writes_need_the_csrf_token(admin_user: Any, method: str, path: str, body: dict[str, Any],
                                            expected: int) -> None:
    tenant = tenant_factory()
    one, two, spare = (backend_factory(tenant=tenant) for _ in range(3))
    host = virtual_host_factory(tenant=tenant, mounts={"a": one, "b": two},
                                tool_aliases={"Find": ToolTarget(map_key="a", upstream_name="search")})
    ids = {"host": host.pk, "spare": spare.pk}
    url = _api(tenant) + path.format(**ids)
    body = {name: value.format(**ids) if isinstance(value, str) else value for name, value in body.items()}
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    before = _state(tenant)

    refused = getattr(client, method)(url, body, content_type="application/json")
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
    assert _state(tenant) == before

    allowed = getattr(client, method)(url, body, content_type="application/json", **csrf_header(client, tenant.slug))
    assert allowed.status_code == expected, allowed.content
    assert _state(tenant) != before
