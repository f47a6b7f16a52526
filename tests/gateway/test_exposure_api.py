"""The tools a virtual host serves, through the REST API: named by the gateway's naming contract,
an MCP backend's tools asked of the real demo backend."""

from __future__ import annotations

import pytest
from django.test import Client

from apps.catalog.services import ToolTarget
from apps.tenants.models import Tenant
from tests.factories import backend_factory, tenant_factory, virtual_host_factory

pytestmark = pytest.mark.django_db


def _api(tenant: Tenant) -> str:
    return f"/api/v1/tenants/{tenant.slug}/virtual-hosts"


def test_exposed_tools_use_the_gateways_naming(admin_client: Client, demo_backend_url: str) -> None:
    tenant = tenant_factory()
    demo = backend_factory(tenant=tenant, urls=[demo_backend_url])
    host = virtual_host_factory(tenant=tenant, mounts={"x": demo, "y": demo}, tool_aliases={"sum": ToolTarget("x", "add")})
    admin_client.put(f"{_api(tenant)}/{host.pk}", {"tool_search": "listed"}, content_type="application/json")
    body = admin_client.get(f"{_api(tenant)}/{host.pk}/exposed-tools").json()
    names = {t["name"]: (t["map_key"], t["upstream_name"]) for t in body["tools"]}
    assert names["sum"] == ("x", "add") and names["y-add"] == ("y", "add") and names["x-echo"] == ("x", "echo")
    assert "x-add" not in names
    assert body["tool_search"] == "tool_search" and body["unavailable"] == {} and body["dropped"] == []
