"""The dashboard: the tenant's calls, errors, refusals, latency and top tools over the last hour or
day, from the per-minute counts the audit writer keeps; server-drawn SVG, polled by htmx."""

from __future__ import annotations

import re
import time
from typing import Any

import psycopg
import pytest
from django.db import DatabaseError, transaction
from django.test import Client

from apps.audit.models import LATENCY_BOUNDS, AuditMinute, AuditRecord
from apps.audit.selectors import _percentile, audit_dashboard_get
from apps.audit.writer import audit_records_write
from tests.audit.factories import audit_entry, audit_rows_create
from tests.factories import tenant_factory

pytestmark = pytest.mark.django_db


def _calls(acme: Any) -> None:
    now = time.time()
    audit_rows_create(tenant=acme, count=6, start=now - 120, step=0.1, exposed_name="search", latency_ms=10.0)
    audit_rows_create(tenant=acme, count=2, start=now - 120, exposed_name="pay", outcome="error", latency_ms=900.0)
    audit_rows_create(tenant=acme, count=3, start=now - 60, exposed_name="pay", outcome="denied", latency_ms=1.0)
    audit_rows_create(tenant=acme, count=1, start=now - 60, exposed_name="pay", outcome="rate_limited")
    audit_rows_create(tenant=acme, count=1, start=now - 60, exposed_name="pay", outcome="over_budget")
    audit_rows_create(tenant=acme, count=4, start=now - 5 * 3600, exposed_name="old")  # in the day only


def test_the_numbers_count_the_tenants_calls_of_the_window(acme: Any) -> None:
    _calls(acme)
    audit_rows_create(tenant=tenant_factory(slug="other"), count=50, exposed_name="other")
    hour = audit_dashboard_get(tenant=acme, window="hour")
    total = hour.total
    assert (total.calls, total.errors, total.denied, total.rate_limited, total.over_budget) == (13, 2, 3, 1, 1)
    assert len(hour.bins) == 60 and sum(b.calls for b in hour.bins) == 13
    assert [(t.tool, t.calls, t.errors) for t in hour.top_tools] == [("pay", 7, 2), ("search", 6, 0)]
    assert 10 <= total.p50 <= 10 * 1.19 and 900 <= total.p99 <= 900 * 1.19  # one bucket's width
    day = audit_dashboard_get(tenant=acme, window="day")
    assert day.total.calls == 17 and len(day.bins) == 96 and day.bin_seconds == 900
    # Per minute: one row for all calls, one per tool, counting the same calls.
    minutes = AuditMinute.objects.filter(tenant_id=acme.pk)
    assert sum(m.calls for m in minutes if m.tool == "") == 17 == sum(m.calls for m in minutes if m.tool)
    assert all((m.latency is None) == bool(m.tool) for m in minutes)


def test_a_batch_the_database_refuses_is_not_counted(acme: Any) -> None:
    # The rows are written first: a batch that fails there (and stays queued to retry) has no counts.
    with pytest.raises(psycopg.errors.DataError), transaction.atomic():
        audit_records_write([audit_entry(tenant=acme), audit_entry(tenant=acme, outcome="x" * 40)])
    assert audit_dashboard_get(tenant=acme).total.calls == 0
    audit_records_write([audit_entry(tenant=acme)])
    assert audit_dashboard_get(tenant=acme).total.calls == 1


def test_when_counting_fails_the_rows_are_still_written_once(acme: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(cursor: object, entries: object) -> None:
        raise DatabaseError("counts unavailable")

    monkeypatch.setattr("apps.audit.writer._minutes_add", broken)
    audit_records_write([audit_entry(tenant=acme), audit_entry(tenant=acme)])  # no exception: no retry
    assert AuditRecord.objects.filter(tenant_id=acme.pk).count() == 2


def test_percentiles_come_from_the_histogram() -> None:
    histogram = [0] * (len(LATENCY_BOUNDS) + 1)
    assert _percentile(histogram, 0.5) is None
    histogram[3] = 99
    histogram[50] = 1
    assert _percentile(histogram, 0.5) == LATENCY_BOUNDS[3] and _percentile(histogram, 0.99) == LATENCY_BOUNDS[3]
    assert _percentile(histogram, 1.0) == LATENCY_BOUNDS[50]


def test_the_page_draws_the_charts_and_polls(client: Client, acme: Any, django_assert_max_num_queries: Any) -> None:
    _calls(acme)
    with django_assert_max_num_queries(8):
        page = client.get("/console/t/acme/dashboard/").content.decode()
    assert '<dd id="total-calls">13</dd>' in page
    assert page.count("<svg") == 5 and "<polyline" in page and "search" in page
    assert 'hx-trigger="every 10s"' in page and "/console/t/acme/dashboard/panel/?window=hour" in page
    day = client.get("/console/t/acme/dashboard/?window=day").content.decode()
    assert '<dd id="total-calls">17</dd>' in day and 'aria-current="page">Last day' in day
    panel = client.get("/console/t/acme/dashboard/panel/?window=day").content.decode()
    assert panel.lstrip().startswith("<div id=\"dashboard-panel\"") and "<html" not in panel
    assert '<dd id="total-calls">17</dd>' in panel
    empty = client.get("/console/t/acme/dashboard/?window=week")  # unknown: the hour
    assert empty.status_code == 200 and "Last hour" in empty.content.decode()


def test_the_console_starts_on_the_dashboard(client: Client, acme: Any) -> None:
    assert client.get("/console/")["Location"] == "/console/t/acme/dashboard/"


def test_another_tenants_dashboard_is_not_found(client: Client, acme: Any) -> None:
    tenant_factory(slug="other")
    assert client.get("/console/t/other/dashboard/").status_code == 404
    assert client.get("/console/t/other/dashboard/panel/").status_code == 404
    client.logout()
    assert client.get("/console/t/acme/dashboard/").status_code == 302


def _figure(page: str, title: str) -> str:
    found = re.search(rf'<figure class="chart">\s*<figcaption>{title}.*?</figure>', page, re.S)
    assert found, title
    return found.group(0)


def test_calls_of_a_single_minute_are_drawn_as_points(client: Client, acme: Any) -> None:
    # All in one minute: each line has one point, which a polyline alone would not draw.
    audit_rows_create(tenant=acme, count=3, start=time.time() - 30, step=0.01, latency_ms=40.0)
    page = client.get("/console/t/acme/dashboard/").content.decode()
    latency = _figure(page, "Latency")
    dots = re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)" r="[\d.]+" class="dot (s1|s2)"><title>([^<]*)</title>', latency)
    assert {css for *_, css, _ in dots} == {"s1", "s2"}, latency
    assert all(tip.endswith((" ms p50", " ms p99")) and 40 <= float(tip.split(": ")[1].split(" ")[0]) <= 48
               for *_, tip in dots), dots
    assert "<polyline" not in latency  # no line of one point
    assert 'class="dot s-bad"' in _figure(page, "Error rate")


def test_a_minute_without_calls_breaks_the_line(client: Client, acme: Any) -> None:
    now = time.time()
    audit_rows_create(tenant=acme, count=2, start=now - 600, step=60, latency_ms=10.0)  # two minutes in a row
    audit_rows_create(tenant=acme, count=1, start=now - 120, latency_ms=10.0)  # alone, after a gap
    latency = _figure(client.get("/console/t/acme/dashboard/").content.decode(), "Latency")
    lines = re.findall(r'<polyline points="([^"]+)" class="line s1"', latency)
    assert [len(points.split()) for points in lines] == [2], latency
    assert len(re.findall(r'class="dot s1"', latency)) == 1
