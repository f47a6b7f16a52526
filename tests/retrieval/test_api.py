"""`GET /api/v1/tenants/<tenant>/virtual-hosts/<id>/tool-search`: what tool_search finds on a host, per path."""

from __future__ import annotations

import pytest
from django.test import Client

from apps.catalog.services import ToolTarget, tool_alias_set
from apps.catalog.specs import spec_upload
from tests.backends.specs import network_spec
from tests.factories import openapi_backend_factory, tenant_factory, virtual_host_factory

pytestmark = pytest.mark.django_db


def _url(host) -> str:  # noqa: ANN001
    return f"/api/v1/tenants/{host.tenant.slug}/virtual-hosts/{host.pk}/tool-search"


@pytest.fixture
def host(settings, django_capture_on_commit_callbacks):  # noqa: ANN001, ANN201 - pytest-django fixtures
    settings.GATEWAY_TOOL_INDEX = True
    tenant = tenant_factory()
    cloud = openapi_backend_factory(tenant=tenant, name="cloud")
    other = openapi_backend_factory(tenant=tenant, name="other")
    with django_capture_on_commit_callbacks(execute=True):
        spec_upload(backend=cloud, document=network_spec())
        spec_upload(backend=other, document=network_spec({"ListQueues": ("Lists your message queues.", [])}, "Other"))
    host = virtual_host_factory(tenant=tenant, mounts={"net": cloud, "mq": other})
    tool_alias_set(virtual_host=host, alias="stop_servers", target=ToolTarget("net", "TerminateInstances"))
    return host


def test_the_answer_names_each_tool_as_the_host_does_with_each_paths_rank(admin_client: Client, host) -> None:  # noqa: ANN001
    body = admin_client.get(_url(host), {"query": "list all my queues", "k": 3}).json()
    assert body["virtual_host"]["slug"] == host.slug
    first = body["results"][0]
    assert (first["backend"]["name"], first["name"], first["exposed_names"]) == ("other", "ListQueues", ["mq-ListQueues"])
    assert set(first["paths"]) == {"dense", "text"} and first["paths"]["dense"]["rank"] >= 1
    assert len(body["results"]) == 3
    assert [r["score"] for r in body["results"]] == sorted((r["score"] for r in body["results"]), reverse=True)
    body = admin_client.get(_url(host), {"query": "shut down my servers", "k": 1}).json()
    assert body["results"][0]["exposed_names"] == ["stop_servers"]  # listed under its alias only
    assert body["results"][0]["prerequisites"] == [{"backend": "cloud", "name": "RunInstances"}]


@pytest.mark.parametrize(("params", "field"), [({}, "query"), ({"query": " "}, "query"), ({"query": "x" * 1001}, "query"),
                                               ({"query": "vpc", "k": "0"}, "k"), ({"query": "vpc", "k": "51"}, "k"),
                                               ({"query": "vpc", "k": "two"}, "k")])
def test_bad_parameters_are_400_naming_the_field(admin_client: Client, host, params: dict, field: str) -> None:  # noqa: ANN001
    response = admin_client.get(_url(host), params)
    assert response.status_code == 400 and field in response.json()


def test_unknown_hosts_are_404_and_only_staff_may_search(admin_client: Client, client: Client, host) -> None:  # noqa: ANN001
    assert admin_client.get(f"/api/v1/tenants/{host.tenant.slug}/virtual-hosts/{host.pk + 1000}/tool-search", {"query": "vpc"}).status_code == 404
    assert client.get(_url(host), {"query": "vpc"}).status_code in (401, 403)


def test_a_tools_prerequisites_are_served_dependencies_first(admin_client: Client, host) -> None:  # noqa: ANN001
    from apps.catalog.models import Tool

    tool = Tool.objects.filter(backend__tenant=host.tenant, name="AuthorizeSecurityGroupIngress").get()
    body = admin_client.get(f"/api/v1/tenants/{tool.backend.tenant.slug}/tools/{tool.pk}/prerequisites").json()
    assert body["tool"] == {"id": tool.pk, "backend": "cloud", "name": "AuthorizeSecurityGroupIngress"}
    assert [(p["backend"], p["name"]) for p in body["prerequisites"]] == [
        ("cloud", "CreateVpc"), ("cloud", "CreateSecurityGroup")]
    assert all(isinstance(p["id"], int) for p in body["prerequisites"])
    create_vpc = Tool.objects.filter(backend__tenant=host.tenant, name="CreateVpc").get()
    assert admin_client.get(
        f"/api/v1/tenants/{create_vpc.backend.tenant.slug}/tools/{create_vpc.pk}/prerequisites").json()["prerequisites"] == []
    assert admin_client.get(f"/api/v1/tenants/{create_vpc.backend.tenant.slug}/tools/999999/prerequisites").status_code == 404
