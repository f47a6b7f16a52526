"""The audit REST API: the filtered log with cursor pagination, the CSV export and the dashboard's
numbers — the pages' data, with the same isolation."""

from __future__ import annotations

import csv
import io
import time
from typing import Any

import pytest
from django.test import Client

from tests.audit.factories import audit_rows_create
from tests.factories import api_key_factory, tenant_factory

pytestmark = pytest.mark.django_db


def test_the_log_is_paged_by_cursor_and_filtered(client: Client, acme: Any,
                                                 django_assert_max_num_queries: Any) -> None:
    key = api_key_factory(tenant=acme, name="robot").api_key
    audit_rows_create(tenant=acme, count=30, key=key, exposed_name="pay", start=time.time() - 100)
    audit_rows_create(tenant=acme, count=5, exposed_name="read")
    audit_rows_create(tenant=tenant_factory(slug="other"), count=5)
    seen: list[int] = []
    url: str | None = "/api/v1/tenants/acme/audit?limit=12&tool=pay"
    while url:
        with django_assert_max_num_queries(9):  # a page short of the day next to its cursor reads twice
            body = client.get(url).json()
        seen += [row["id"] for row in body["results"]]
        assert all(row["exposed_name"] == "pay" and row["api_key_id"] == key.pk for row in body["results"])
        url = body["next"]
    assert len(seen) == 30 == len(set(seen)) and seen == sorted(seen, reverse=True)
    last = client.get(f"/api/v1/tenants/acme/audit?limit=12&tool=pay&key={key.pk}").json()
    assert last["previous"] is None and len(last["results"]) == 12
    back = client.get(client.get(last["next"]).json()["previous"]).json()
    assert [r["id"] for r in back["results"]] == [r["id"] for r in last["results"]]


def test_bad_filters_and_cursors_answer_400(client: Client, acme: Any) -> None:
    foreign = api_key_factory(tenant=tenant_factory(slug="other")).api_key
    for query in (f"key={foreign.pk}", "outcome=nope", "since=yesterday", "cursor=zzz", "limit=many"):
        response = client.get(f"/api/v1/tenants/acme/audit?{query}")
        assert response.status_code == 400 and response.json()["detail"], query
    assert client.get("/api/v1/tenants/acme/audit.csv?outcome=nope").status_code == 400
    assert client.get("/api/v1/tenants/acme/dashboard?window=week").status_code == 400


def test_the_csv_export(client: Client, acme: Any) -> None:
    audit_rows_create(tenant=acme, count=3, exposed_name="-1+1", outcome="denied")
    audit_rows_create(tenant=acme, count=2)
    response = client.get("/api/v1/tenants/acme/audit.csv?outcome=denied")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert len(rows) == 3 and rows[0]["exposed_name"] == "'-1+1"


def test_the_dashboard_as_json(client: Client, acme: Any) -> None:
    audit_rows_create(tenant=acme, count=4, exposed_name="pay", latency_ms=50.0)
    audit_rows_create(tenant=acme, count=1, exposed_name="pay", outcome="rate_limited")
    body = client.get("/api/v1/tenants/acme/dashboard?window=day").json()
    assert body["window"] == "day" and len(body["bins"]) == 96 and body["bin_seconds"] == 900
    assert (body["total"]["calls"], body["total"]["rate_limited"]) == (5, 1)
    assert body["top_tools"] == [{"tool": "pay", "calls": 5, "errors": 0}]
    assert client.get("/api/v1/tenants/acme/dashboard").json()["window"] == "hour"


def test_another_tenant_is_not_found_and_anonymous_callers_are_refused(client: Client, acme: Any) -> None:
    tenant_factory(slug="other")
    for path in ("audit", "audit.csv", "dashboard"):
        assert client.get(f"/api/v1/tenants/other/{path}").status_code == 404
        assert Client().get(f"/api/v1/tenants/acme/{path}").status_code == 401


def test_a_console_call_says_so_in_the_log_its_filters_the_csv_and_the_page(client: Client, acme: Any) -> None:
    key = api_key_factory(tenant=acme, name="robot").api_key
    audit_rows_create(tenant=acme, count=2, key=key, console_user="alice", trace_id="a" * 32)
    audit_rows_create(tenant=acme, count=3, key=key)
    rows = client.get("/api/v1/tenants/acme/audit?origin=console").json()["results"]
    assert [(r["origin"], r["console_user"], r["api_key_id"]) for r in rows] == [("console", "alice", key.pk)] * 2
    assert {r["origin"] for r in client.get("/api/v1/tenants/acme/audit?origin=mcp").json()["results"]} == {"mcp"}
    assert len(client.get(f"/api/v1/tenants/acme/audit?trace={'a' * 32}").json()["results"]) == 2
    assert client.get("/api/v1/tenants/acme/audit?trace=not-a-trace").status_code == 400
    assert client.get("/api/v1/tenants/acme/audit?origin=elsewhere").status_code == 400
    lines = list(csv.DictReader(io.StringIO(b"".join(
        client.get("/api/v1/tenants/acme/audit.csv?origin=console").streaming_content).decode())))
    assert [(r["origin"], r["console_user"], r["api_key_id"]) for r in lines] == [("console", "alice", str(key.pk))] * 2
    page = client.get(f"/console/t/acme/audit/?trace={'a' * 32}").content.decode()
    assert page.count("console · alice") == 2
