"""The retrieval playground: what tool_search finds on a host, per path, with the applied query
rewrite and the prerequisites; the extracted id-reading rules; and who may use it."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from apps.catalog.specs import spec_upload
from apps.retrieval.search import RewriteRule
from apps.tenants.services import membership_set
from tests.backends.specs import network_spec
from tests.factories import openapi_backend_factory, tenant_factory, virtual_host_factory

pytestmark = pytest.mark.django_db


def hosts_make(settings: Any, django_capture_on_commit_callbacks: Any) -> dict[str, Any]:
    """Tenant acme's host `cloud` over the network spec, indexed; tenant other's host `rockets`."""
    settings.GATEWAY_TOOL_INDEX = True
    tenant = tenant_factory(slug="acme")
    cloud = openapi_backend_factory(tenant=tenant, name="cloud")
    other = tenant_factory(slug="other")
    theirs = openapi_backend_factory(tenant=other, name="rockets")
    with django_capture_on_commit_callbacks(execute=True):
        spec_upload(backend=cloud, document=network_spec())
        spec_upload(backend=theirs, document=network_spec({"LaunchRocket": ("Launches the secret rocket.", [])}))
    return {"mine": virtual_host_factory(tenant=tenant, slug="cloud", mounts={"net": cloud}),
            "theirs": virtual_host_factory(tenant=other, slug="rockets", mounts={"r": theirs})}


@pytest.fixture
def hosts(settings: Any, django_capture_on_commit_callbacks: Any) -> dict[str, Any]:
    return hosts_make(settings, django_capture_on_commit_callbacks)


def _search(client: Client, host_id: int, query: str, k: int = 5, **headers: Any) -> Any:
    return client.get("/console/t/acme/retrieval/", {"host": host_id, "query": query, "k": k}, **headers)


def test_the_answer_shows_each_paths_rank_and_the_prerequisites(admin_client: Client, hosts: dict) -> None:
    page = _search(admin_client, hosts["mine"].pk, "open inbound rules on a security group").content.decode()
    results = page[page.index('<table class="search-results">'):]
    body = results.index("<tbody>")
    first = results[body:results.index("</tr>", body)]
    assert "<code>AuthorizeSecurityGroupIngress</code>" in first, first
    assert "/console/t/acme/tools/" in first  # linked to the tool's page
    assert "<code>CreateVpc</code> → <code>CreateSecurityGroup</code>" in first  # its chain
    assert first.count('<span class="muted">(') >= 2  # dense and full-text scores
    assert "none: the query holds no id" in page


def test_an_id_in_the_query_shows_how_it_was_read(admin_client: Client, hosts: dict) -> None:
    page = _search(admin_client, hosts["mine"].pk, "vpc-0a1b2c3d").content.decode()
    matches = page[page.index('id="rewrite-matches"'):]
    assert "<code>vpc-0a1b2c3d</code> → Vpc" in matches
    assert '<code id="searched-text">Vpc</code>' in page
    assert "tools describing these types are ranked" in page
    assert "DescribeVpcs" in page[page.index('<table class="search-results">'):]


def test_the_extracted_rules_are_listed_and_paged(admin_client: Client, hosts: dict, monkeypatch: Any) -> None:
    page = admin_client.get("/console/t/acme/retrieval/").content.decode()
    rules = page[page.index('id="rewrite-rules"'):]
    assert '<th scope="row">Vpc</th>' in rules and "<code>DescribeVpcs</code>" in rules
    many = [RewriteRule(f"Thing{i:03d}", 1, (), (("cloud", f"DescribeThing{i:03d}"),)) for i in range(60)]
    monkeypatch.setattr("apps.console.views.retrieval.rewrite_rules_list", lambda tenant_id: many)
    second = admin_client.get("/console/t/acme/retrieval/", {"rules_page": 3}).content.decode()
    assert "Thing050" in second and "Thing049" not in second and "Page 3 of 3" in second


def test_htmx_gets_the_results_alone(admin_client: Client, hosts: dict) -> None:
    body = _search(admin_client, hosts["mine"].pk, "queue", HTTP_HX_REQUEST="true").content.decode()
    assert body.lstrip().startswith('<div id="search-results"') and "<html" not in body and "SendMessage" in body


def test_another_tenants_host_cannot_be_searched(client: Client, hosts: dict, django_user_model: Any) -> None:
    user = django_user_model.objects.create_user(username="mia", password="pw")
    membership_set(tenant=hosts["mine"].tenant, user=user, role="member")
    client.force_login(user)
    assert _search(client, hosts["mine"].pk, "queue").status_code == 200  # members may use it
    refused = _search(client, hosts["theirs"].pk, "rocket")
    assert refused.status_code == 400 and "LaunchRocket" not in refused.content.decode()
    assert "Select a valid choice" in refused.content.decode()
    page = client.get("/console/t/acme/retrieval/").content.decode()
    assert "rockets" not in page  # not among the hosts offered
    assert client.get("/console/t/other/retrieval/").status_code == 404
    assert client.post("/console/t/acme/retrieval/").status_code == 405


@pytest.mark.parametrize(("query", "k"), [("", 5), ("x" * 1001, 5), ("vpc", 0), ("vpc", 51)])
def test_bad_input_is_a_clear_error(admin_client: Client, hosts: dict, query: str, k: int) -> None:
    response = _search(admin_client, hosts["mine"].pk, query, k)
    assert response.status_code == 400 and 'role="alert"' in response.content.decode()


def test_anonymous_visitors_are_sent_to_sign_in(client: Client) -> None:
    tenant_factory(slug="acme")
    assert client.get("/console/t/acme/retrieval/")["Location"].startswith("/console/login/")
