"""The audit log page: the tenant's rows only, filters whose choices are the tenant's own, keyset
pages, a bounded number of queries, and the CSV export."""

from __future__ import annotations

import csv
import io
import time
from typing import Any

import pytest
from django.test import Client

from apps.tenants.services import membership_set
from tests.audit.factories import audit_rows_create
from tests.factories import api_key_factory, backend_factory, team_factory, tenant_factory

pytestmark = pytest.mark.django_db


@pytest.fixture
def member(client: Client, django_user_model: Any) -> Any:
    """A member (read-only) of tenant "acme", signed in."""
    user = django_user_model.objects.create_user(username="mia", password="pw")
    membership_set(tenant=tenant_factory(slug="acme"), user=user, role="member")
    client.force_login(user)
    return user


def _rows(page: str) -> int:
    return page.count('<tr class="outcome-')


def test_the_log_shows_the_tenants_rows_newest_first(client: Client, member: Any) -> None:
    acme = member.memberships.get().tenant
    audit_rows_create(tenant=acme, count=3, exposed_name="acme-tool")
    audit_rows_create(tenant=tenant_factory(slug="other"), count=2, exposed_name="other-tool")
    page = client.get("/console/t/acme/audit/").content.decode()
    assert _rows(page) == 3 and "acme-tool" in page and "other-tool" not in page
    assert 'id="live-status"' in page  # the newest page tails live


def test_another_tenants_log_is_not_found_and_anonymous_visitors_sign_in(client: Client, member: Any) -> None:
    tenant_factory(slug="other")
    assert client.get("/console/t/other/audit/").status_code == 404
    assert client.get("/console/t/other/audit/export.csv").status_code == 404
    client.logout()
    response = client.get("/console/t/acme/audit/")
    assert response.status_code == 302 and response["Location"].startswith("/console/login/")


def test_the_pages_only_read(client: Client, member: Any) -> None:
    """The filter is a GET form: there is nothing to forge. A POST without the CSRF token is refused
    by the middleware, and with it by the view."""
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(member)
    assert strict.post("/console/t/acme/audit/").status_code == 403
    assert client.post("/console/t/acme/audit/").status_code == 405
    assert client.post("/console/t/acme/audit/export.csv").status_code == 405


def test_filters_narrow_the_log_and_offer_only_the_tenants_choices(client: Client, member: Any) -> None:
    acme = member.memberships.get().tenant
    team = team_factory(tenant=acme, slug="blue")
    key = api_key_factory(tenant=acme, name="robot", team=team).api_key
    backend_factory(tenant=acme, name="billing")
    other = tenant_factory(slug="other")
    foreign_key = api_key_factory(tenant=other, name="foreign").api_key
    backend_factory(tenant=other, name="secret-backend")
    audit_rows_create(tenant=acme, count=2, key=key, team="blue", backend="billing", exposed_name="pay")
    audit_rows_create(tenant=acme, count=3, outcome="denied", exposed_name="pay")
    audit_rows_create(tenant=acme, count=4, exposed_name="read")

    page = client.get("/console/t/acme/audit/").content.decode()
    assert "robot" in page and "billing" in page and "blue" in page
    assert "foreign" not in page and "secret-backend" not in page

    assert _rows(client.get(f"/console/t/acme/audit/?key={key.pk}").content.decode()) == 2
    assert _rows(client.get("/console/t/acme/audit/?team=blue").content.decode()) == 2
    assert _rows(client.get("/console/t/acme/audit/?backend=billing").content.decode()) == 2
    assert _rows(client.get("/console/t/acme/audit/?tool=pay").content.decode()) == 5
    assert _rows(client.get("/console/t/acme/audit/?tool=pay&outcome=denied").content.decode()) == 3
    # Another tenant's key or backend is no choice here.
    refused = client.get(f"/console/t/acme/audit/?key={foreign_key.pk}")
    assert refused.status_code == 400 and _rows(refused.content.decode()) == 0
    assert "Select a valid choice" in refused.content.decode()
    assert client.get("/console/t/acme/audit/?backend=secret-backend").status_code == 400


def test_a_time_range_narrows_the_log(client: Client, member: Any) -> None:
    acme = member.memberships.get().tenant
    now = time.time()
    audit_rows_create(tenant=acme, count=2, start=now - 7200, exposed_name="old")
    audit_rows_create(tenant=acme, count=1, start=now - 60, exposed_name="new")
    since = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(now - 3600))
    page = client.get(f"/console/t/acme/audit/?since={since}").content.decode()
    assert _rows(page) == 1 and ">new<" in page
    until = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(now - 3600))
    assert _rows(client.get(f"/console/t/acme/audit/?until={until}").content.decode()) == 2
    backwards = client.get(f"/console/t/acme/audit/?since={since}&until={since}")
    assert backwards.status_code == 400 and "Must be later than From" in backwards.content.decode()


def test_pages_follow_each_other_by_keyset_with_bounded_queries(
    client: Client, member: Any, django_assert_max_num_queries: Any
) -> None:
    acme = member.memberships.get().tenant
    audit_rows_create(tenant=acme, count=120, start=time.time() - 1000, step=0.5)
    # Two rows at the very same instant: the id breaks the tie, none is skipped or repeated.
    audit_rows_create(tenant=acme, count=2, start=time.time() - 2000, step=0.0)
    seen: list[str] = []
    url = "/console/t/acme/audit/"
    pages = 0
    while url:
        with django_assert_max_num_queries(10):
            response = client.get(url)
        page = response.content.decode()
        seen += [line for line in page.splitlines() if "<time datetime=" in line]
        pages += 1
        marker = 'rel="next"'
        url = ""
        if marker in page:
            href = page.split(marker)[0].rsplit('href="', 1)[1].split('"')[0]
            url = "/console/t/acme/audit/" + href.replace("&amp;", "&")
    assert pages == 3 and len(seen) == 122
    # Back from the last page: "newer" leads to the rows just above it.
    last = client.get(url or "/console/t/acme/audit/")
    assert last.status_code == 200


def test_newer_links_lead_back(client: Client, member: Any) -> None:
    acme = member.memberships.get().tenant
    audit_rows_create(tenant=acme, count=60, exposed_name="t")
    first = client.get("/console/t/acme/audit/").content.decode()
    older = first.split('rel="next"')[0].rsplit('href="', 1)[1].split('"')[0].replace("&amp;", "&")
    second = client.get("/console/t/acme/audit/" + older).content.decode()
    assert _rows(second) == 10 and 'rel="prev"' in second and 'id="live-status"' not in second
    newer = second.split('rel="prev"')[0].rsplit('href="', 1)[1].split('"')[0].replace("&amp;", "&")
    back = client.get("/console/t/acme/audit/" + newer).content.decode()
    assert _rows(back) == 50 and 'rel="prev"' not in back
    assert client.get("/console/t/acme/audit/?cursor=nonsense").status_code == 400


def test_the_csv_export_streams_the_filtered_rows_safe_for_spreadsheets(client: Client, member: Any) -> None:
    acme = member.memberships.get().tenant
    audit_rows_create(tenant=acme, count=3, exposed_name="=HYPERLINK(\"http://evil\")", error_code=-32003,
                      outcome="denied")
    audit_rows_create(tenant=acme, count=2, exposed_name="@sum", virtual_host="+vh")
    audit_rows_create(tenant=tenant_factory(slug="other"), count=4)
    response = client.get("/console/t/acme/audit/export.csv?outcome=denied")
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert len(rows) == 3
    assert rows[0]["exposed_name"] == "'=HYPERLINK(\"http://evil\")" and rows[0]["error_code"] == "-32003"
    everything = list(csv.DictReader(io.StringIO(b"".join(
        client.get("/console/t/acme/audit/export.csv").streaming_content).decode())))
    assert len(everything) == 5
    assert {r["exposed_name"] for r in everything} == {"'@sum", "'=HYPERLINK(\"http://evil\")"}
    assert "'+vh" in {r["virtual_host"] for r in everything}
    assert client.get("/console/t/acme/audit/export.csv?outcome=nope").status_code == 400
