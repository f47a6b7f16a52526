"""The log's pages read first the day next to their cursor: whether that day holds a page or not,
every row is on exactly one page, in order, both ways."""

from __future__ import annotations

import time

import pytest

from apps.audit.selectors import audit_record_page
from apps.tenants.models import Tenant
from tests.audit.factories import audit_rows_create
from tests.factories import tenant_factory

pytestmark = pytest.mark.django_db

HOUR = 3600.0


def _walk(tenant: Tenant, size: int) -> tuple[list[list[str]], list[list[str]]]:
    """Every page older, then every page newer back from the last one: each page's session ids."""
    older, cursor = [], ""
    while True:
        page = audit_record_page(tenant=tenant, cursor=cursor, size=size)
        older.append([row.session_id for row in page.rows])
        if page.older is None:
            break
        cursor = page.older
    newer = []
    while page.newer is not None:
        page = audit_record_page(tenant=tenant, cursor=page.newer, size=size)
        newer.append([row.session_id for row in page.rows])
    return older, newer


def _rows(tenant: Tenant, hours_ago: float, *labels: str) -> None:
    for n, label in enumerate(labels):  # the first label the newest
        audit_rows_create(tenant=tenant, start=time.time() - hours_ago * HOUR - n, session_id=label)


def test_pages_reach_past_days_that_hold_less_than_a_page() -> None:
    tenant = tenant_factory()
    _rows(tenant, 0, "a", "b", "c")
    _rows(tenant, 48, "d", "e", "f")
    _rows(tenant, 120, "g", "h", "i")
    older, newer = _walk(tenant, 4)
    assert older == [["a", "b", "c", "d"], ["e", "f", "g", "h"], ["i"]]
    assert newer == [["e", "f", "g", "h"], ["a", "b", "c", "d"]]


def test_pages_within_a_day_that_holds_them_and_rows_dated_ahead_come_first() -> None:
    tenant = tenant_factory()
    _rows(tenant, -48, "ahead")  # a clock two days fast
    _rows(tenant, 0, "a", "b", "c", "d", "e")
    _rows(tenant, 30, "old")
    older, newer = _walk(tenant, 2)
    assert older == [["ahead", "a"], ["b", "c"], ["d", "e"], ["old"]]
    assert newer == [["d", "e"], ["b", "c"], ["ahead", "a"]]
