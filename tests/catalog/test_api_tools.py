"""`GET /api/v1/tenants/<tenant>/tools[/<id>|/mcp/<id>]`: the tools pages' data over REST, with the
same search, backend filter, isolation and bounded queries; and the indexes that keep the list fast."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import Client

from apps.catalog import tool_selectors
from apps.catalog.models import Tool
from apps.tenants.services import membership_set
from tests.backends.specs import network_spec
from tests.console.test_tools import catalog_make, many_operations, mcp_entry, publisher
from tests.factories import backend_factory, openapi_backend_factory, tenant_factory

pytestmark = pytest.mark.django_db


@pytest.fixture
def publish(django_capture_on_commit_callbacks: Any) -> Any:
    return publisher(django_capture_on_commit_callbacks)


@pytest.fixture
def catalog(publish: Any) -> dict[str, Any]:
    return catalog_make(publish)


def test_the_list_is_paginated_searchable_and_narrowed_to_a_backend(admin_client: Client, catalog: dict) -> None:
    body = admin_client.get("/api/v1/tenants/acme/tools", {"limit": 5}).json()
    assert body["count"] == 13 and len(body["results"]) == 5 and body["next"]
    first = body["results"][0]
    assert first["backend"] == {"id": catalog["cloud"].pk, "name": "cloud"} and first["kind"] == "openapi"
    assert first["url"] == f"/api/v1/tenants/acme/tools/{first['id']}"
    rest = admin_client.get("/api/v1/tenants/acme/tools", {"limit": 50, "offset": 5}).json()["results"]
    assert [r["name"] for r in rest][-1] == "add_numbers" and rest[-1]["kind"] == "mcp"
    found = admin_client.get("/api/v1/tenants/acme/tools", {"search": "subnet"}).json()
    assert {r["name"] for r in found["results"]} == {"CreateSubnet", "DescribeSubnets"}
    mcp = admin_client.get("/api/v1/tenants/acme/tools", {"backend": catalog["demo"].pk}).json()
    assert [(r["name"], r["url"]) for r in mcp["results"]] == [
        ("add_numbers", f"/api/v1/tenants/acme/tools/mcp/{catalog['add'].pk}")]


def test_another_tenants_backend_or_a_long_search_is_400(admin_client: Client, catalog: dict) -> None:
    response = admin_client.get("/api/v1/tenants/acme/tools", {"backend": catalog["secret"].pk})
    assert response.status_code == 400 and "no backend" in response.json()["detail"]
    assert admin_client.get("/api/v1/tenants/acme/tools", {"search": "x" * 201}).status_code == 400


def test_a_tool_in_full(admin_client: Client, catalog: dict) -> None:
    tool = Tool.objects.get(backend=catalog["cloud"], name="CreateSubnet")
    body = admin_client.get(f"/api/v1/tenants/acme/tools/{tool.pk}").json()
    assert body["input_schema"] == tool.input_schema and body["binding"]["method"] == "POST"
    assert body["parameters"][:2] == [
        {"name": "VpcId", "type": "string", "required": True, "description": ""},
        {"name": "CidrBlock", "type": "string", "required": True, "description": ""}]
    assert body["backend"]["name"] == "cloud" and body["spec_version"] == 1
    entry = admin_client.get(f"/api/v1/tenants/acme/tools/mcp/{catalog['add'].pk}").json()
    assert (entry["kind"], entry["name"], entry["input_schema"]) == ("mcp", "add_numbers", None)
    assert [p["name"] for p in entry["parameters"]] == ["a", "b"]


def test_isolation(client: Client, catalog: dict, django_user_model: Any) -> None:
    user = django_user_model.objects.create_user(username="mia", password="pw")
    membership_set(tenant=catalog["tenant"], user=user, role="member")
    assert client.get("/api/v1/tenants/acme/tools").status_code in (401, 403)
    client.force_login(user)
    theirs = Tool.objects.get(backend=catalog["secret"])
    assert client.get("/api/v1/tenants/acme/tools").status_code == 200
    assert client.get(f"/api/v1/tenants/acme/tools/{theirs.pk}").status_code == 404
    assert client.get(f"/api/v1/tenants/other/tools/{theirs.pk}").status_code == 404
    assert client.get("/api/v1/tenants/other/tools").status_code == 404
    their_entry = mcp_entry(backend_factory(tenant=catalog["other"], name="m"), "x", "y")
    assert client.get(f"/api/v1/tenants/acme/tools/mcp/{their_entry.pk}").status_code == 404
    assert "LaunchRocket" not in client.get("/api/v1/tenants/acme/tools", {"search": "rocket"}).content.decode()


def test_the_list_takes_the_same_queries_for_many_tools(
    admin_client: Client, publish: Any, django_assert_max_num_queries: Any
) -> None:
    tenant = tenant_factory(slug="big")
    publish(openapi_backend_factory(tenant=tenant, name="few"), network_spec(many_operations(2)))
    mcp_entry(backend_factory(tenant=tenant, name="mcp"), "ping", "Answers pong.")
    admin_client.get("/api/v1/tenants/big/tools")
    with django_assert_max_num_queries(8) as few:
        admin_client.get("/api/v1/tenants/big/tools")
    publish(openapi_backend_factory(tenant=tenant, name="many"), network_spec(many_operations(120)))
    with django_assert_max_num_queries(len(few.captured_queries)) as many:
        body = admin_client.get("/api/v1/tenants/big/tools", {"offset": 50}).json()
    assert body["count"] == 123 and len(body["results"]) == 50
    assert not any("input_schema" in q["sql"] for q in many.captured_queries)


def test_the_search_expression_is_the_indexed_one_and_the_plan_uses_the_indexes(catalog: dict) -> None:
    migration = importlib.import_module("apps.retrieval.migrations.0006_tool_browser_indexes")
    assert migration.TOOL_SEARCH_SQL == tool_selectors.TOOL_SEARCH_SQL
    backends = [b for b in tool_selectors.tool_backends_list(tenant=catalog["tenant"]) if b.kind == "openapi"]
    with transaction.atomic(), connection.cursor() as cursor:
        # A handful of rows: make the planner show that it can (at 20,000 it chooses to).
        cursor.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off")
        sql, params = tool_selectors.tool_list(backends=backends).parts[0][:50].query.sql_with_params()
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        assert "Index Scan using catalog_tool_backend_name" in plan and "Sort" not in plan, plan
        # The search's condition, alone: the expression must be the index's for the index to serve it.
        cursor.execute(f"EXPLAIN SELECT id FROM catalog_tool WHERE {tool_selectors.TOOL_SEARCH_SQL} @@ "
                       "to_tsquery('english', %s)", ["'vpc':*"])
        plan = "\n".join(row[0] for row in cursor.fetchall())
        assert "catalog_tool_search" in plan, plan
