"""The tool tester's pages in process: tenant admins only (members 403, the "Try it" link shown to
admins), CSRF, the form a tool's schema makes, the hosts that serve the tool and the callers offered.
Nothing here reaches a gateway: the calls themselves are tried in test_tool_tester_gateway.py."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from apps.audit.models import AuditRecord
from apps.catalog.models import Tool
from apps.tenants.services import api_key_revoke, membership_set
from tests.backends.specs import as_json, service_spec
from tests.console.test_tools import mcp_entry, publisher
from tests.factories import (
    api_key_factory,
    backend_factory,
    openapi_backend_factory,
    tenant_factory,
    virtual_host_factory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def shop(django_capture_on_commit_callbacks: Any) -> dict[str, Any]:
    """Tenant shop: an OpenAPI backend `svc` (the recording service's spec) on hosts `main` and
    `extra`, an MCP backend on no host; keys `agent`, `old` (revoked); admin ada and member max."""
    tenant = tenant_factory(slug="shop")
    svc = openapi_backend_factory(tenant=tenant, name="svc")
    publisher(django_capture_on_commit_callbacks)(svc, as_json(service_spec()))
    virtual_host_factory(tenant=tenant, slug="main", mounts={"svc": svc})
    virtual_host_factory(tenant=tenant, slug="extra", mounts={"rest": svc})
    lonely = backend_factory(tenant=tenant, name="lonely")
    users = get_user_model().objects
    ada, max_ = users.create_user(username="ada", password="pw"), users.create_user(username="max", password="pw")
    membership_set(tenant=tenant, user=ada, role="admin")
    membership_set(tenant=tenant, user=max_, role="member")
    agent = api_key_factory(tenant=tenant, name="agent").api_key
    api_key_revoke(api_key=api_key_factory(tenant=tenant, name="old").api_key)
    return {"tenant": tenant, "create": Tool.objects.get(backend=svc, name="createPet"), "agent": agent,
            "old": tenant.api_keys.get(name="old"), "mcp": mcp_entry(lonely, "add", "Adds."), "ada": ada, "max": max_}


def _client(user: Any, **options: Any) -> Client:
    client = Client(**options)
    client.force_login(user)
    return client


def test_members_may_not_try_tools_nor_see_the_link(shop: dict[str, Any]) -> None:
    client = _client(shop["max"])
    tool = shop["create"]
    for url in (f"/console/t/shop/tools/{tool.pk}/try/", f"/console/t/shop/tools/mcp/{shop['mcp'].pk}/try/"):
        assert client.get(url).status_code == 403
        assert client.post(url, {"host": "main:svc", "caller": "me", "mode": "json", "arguments_json": "{}"}).status_code == 403
    assert "Try it" not in client.get(f"/console/t/shop/tools/{tool.pk}/").content.decode()
    admin_page = _client(shop["ada"]).get(f"/console/t/shop/tools/{tool.pk}/").content.decode()
    assert f'href="/console/t/shop/tools/{tool.pk}/try/">Try it</a>' in admin_page
    assert not AuditRecord.objects.filter(tenant_slug="shop").exists()


def test_other_tenants_and_missing_tools_are_not_found(shop: dict[str, Any]) -> None:
    client = _client(shop["ada"])
    other = tenant_factory(slug="other")
    assert client.get(f"/console/t/other/tools/{shop['create'].pk}/try/").status_code == 404
    assert client.get("/console/t/shop/tools/999999/try/").status_code == 404
    membership_set(tenant=other, user=shop["ada"], role="admin")
    assert client.get(f"/console/t/other/tools/{shop['create'].pk}/try/").status_code == 404  # not other's tool


def test_the_form_offers_the_hosts_serving_the_tool_the_usable_keys_and_the_schemas_fields(shop: dict[str, Any]) -> None:
    page = _client(shop["ada"]).get(f"/console/t/shop/tools/{shop['create'].pk}/try/").content.decode()
    assert '<option value="extra:rest">extra (as createPet)</option>' in page
    assert '<option value="main:svc">main (as createPet)</option>' in page
    assert "me: my test identity (console:ada)" in page
    assert f'<option value="{shop["agent"].pk}">key agent</option>' in page
    assert "key old" not in page  # revoked: it cannot call
    assert '<code>name</code><span class="required" aria-hidden="true"> *</span>' in page
    assert '<code>age</code><span class="required"' not in page
    assert 'name="arg_0"' in page and "required" in page.split('name="arg_0"')[1].split(">")[0]


def test_a_tool_no_host_serves_says_so(shop: dict[str, Any]) -> None:
    page = _client(shop["ada"]).get(f"/console/t/shop/tools/mcp/{shop['mcp'].pk}/try/").content.decode()
    assert "No virtual host serves this tool" in page and "<form method=\"post\" class=\"try-form\"" not in page


def test_a_revoked_key_cannot_be_chosen_and_nothing_is_called(shop: dict[str, Any]) -> None:
    response = _client(shop["ada"]).post(f"/console/t/shop/tools/{shop['create'].pk}/try/", {
        "host": "main:svc", "caller": str(shop["old"].pk), "mode": "json", "arguments_json": '{"name": "Rex"}'})
    assert response.status_code == 400
    assert "Select a valid choice" in response.content.decode() and "The call was not made" in response.content.decode()
    assert not AuditRecord.objects.filter(tenant_slug="shop").exists()


def test_a_post_without_the_csrf_token_is_refused(shop: dict[str, Any]) -> None:
    client = _client(shop["ada"], enforce_csrf_checks=True)
    response = client.post(f"/console/t/shop/tools/{shop['create'].pk}/try/", {
        "host": "main:svc", "caller": "me", "mode": "json", "arguments_json": '{"name": "Rex"}'})
    assert response.status_code == 403 and b"CSRF" in response.content
