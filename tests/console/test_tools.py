"""The tools pages: every tool of the tenant (catalog tools and MCP servers' indexed ones), searched
and narrowed to a backend, paginated with a bounded number of queries; one tool in full; and who
may see what."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.postgres.search import SearchVector
from django.db.models import Value
from django.test import Client

from apps.catalog.models import Backend, Tool
from apps.catalog.specs import spec_upload
from apps.retrieval.models import IndexedTool
from apps.tenants.models import Tenant
from apps.tenants.services import membership_set
from tests.backends.specs import network_spec
from tests.factories import backend_factory, openapi_backend_factory, tenant_factory

pytestmark = pytest.mark.django_db


def many_operations(count: int, prefix: str = "Describe") -> dict[str, tuple[str, list[str]]]:
    return {f"{prefix}Thing{i:04d}": (f"Describes thing number {i}.", ["ThingId"]) for i in range(count)}


def mcp_entry(backend: Backend, name: str, description: str, parameters: list[str] | None = None) -> IndexedTool:
    """An MCP server's tool as the index holds it (what its server listed; no server is asked here)."""
    entry = IndexedTool.objects.create(
        tenant=backend.tenant, backend=backend, name=name, document=name, description=description,
        parameters=parameters or [], digest="x", search="", embedding=[0.0] * 383 + [1.0])
    IndexedTool.objects.filter(pk=entry.pk).update(search=SearchVector(Value(name), weight="A", config="english")
                                                   .__add__(SearchVector(Value(description), weight="D", config="english")))
    return entry


def publisher(capture: Any) -> Any:
    """Upload and compile a spec now (compiling is queued for after the commit); `capture` is
    pytest-django's `django_capture_on_commit_callbacks`."""

    def publish(backend: Backend, document: bytes) -> None:
        with capture(execute=True):
            spec_upload(backend=backend, document=document)

    return publish


def catalog_make(publish: Any) -> dict[str, Any]:
    """Tenant acme: an OpenAPI backend `cloud` (the network spec) and an MCP backend `demo` with one
    indexed tool; tenant other: an OpenAPI backend with one tool."""
    tenant = tenant_factory(slug="acme")
    cloud = openapi_backend_factory(tenant=tenant, name="cloud")
    publish(cloud, network_spec())
    demo = backend_factory(tenant=tenant, name="demo")
    add = mcp_entry(demo, "add_numbers", "Add two numbers.", ["a", "b"])
    other = tenant_factory(slug="other")
    secret = openapi_backend_factory(tenant=other, name="secret-api")
    publish(secret, network_spec({"LaunchRocket": ("Launches the secret rocket.", [])}))
    return {"tenant": tenant, "cloud": cloud, "demo": demo, "add": add, "other": other, "secret": secret}


@pytest.fixture
def publish(django_capture_on_commit_callbacks: Any) -> Any:
    return publisher(django_capture_on_commit_callbacks)


@pytest.fixture
def catalog(publish: Any) -> dict[str, Any]:
    return catalog_make(publish)


def _list(client: Client, tenant: Tenant, **params: Any) -> Any:
    return client.get(f"/console/t/{tenant.slug}/tools/", params)


def test_the_list_shows_the_tenants_catalog_and_mcp_tools_only(admin_client: Client, catalog: dict) -> None:
    page = _list(admin_client, catalog["tenant"]).content.decode()
    assert "CreateVpc" in page and "AuthorizeSecurityGroupIngress" in page and "add_numbers" in page
    assert "LaunchRocket" not in page
    assert f"/console/t/acme/tools/mcp/{catalog['add'].pk}/" in page
    tool = Tool.objects.get(backend=catalog["cloud"], name="CreateVpc")
    assert f"/console/t/acme/tools/{tool.pk}/" in page
    assert "13 tools" in page


@pytest.mark.parametrize(("search", "found", "missing"), [
    ("vpc", {"CreateVpc", "DescribeVpcs", "DeleteVpc"}, {"PutObject", "add_numbers"}),
    ("security gro", {"CreateSecurityGroup", "AuthorizeSecurityGroupIngress"}, {"CreateVpc"}),
    ("DescribeSubnets", {"DescribeSubnets"}, {"CreateSubnet"}),
    ("firewall", {"CreateSecurityGroup"}, {"CreateVpc"}),  # a word of the description
    ("two numbers", {"add_numbers"}, {"CreateVpc"}),  # an MCP tool's description
    ("rocket", set(), {"LaunchRocket"}),  # another tenant's
])
def test_search_matches_names_and_descriptions_by_word_prefixes(
    admin_client: Client, catalog: dict, search: str, found: set, missing: set
) -> None:
    page = _list(admin_client, catalog["tenant"], q=search).content.decode()
    assert all(f"<code>{name}</code>" in page for name in found), page
    assert not any(f"<code>{name}</code>" in page for name in missing)
    if not found:
        assert "No tool matches" in page


def test_the_backend_filter_narrows_to_one_of_the_tenants_backends(admin_client: Client, catalog: dict) -> None:
    page = _list(admin_client, catalog["tenant"], backend=catalog["demo"].pk).content.decode()
    assert "add_numbers" in page and "CreateVpc" not in page
    refused = _list(admin_client, catalog["tenant"], backend=catalog["secret"].pk)
    assert refused.status_code == 400 and "LaunchRocket" not in refused.content.decode()
    assert "Select a valid choice" in refused.content.decode()


def test_htmx_gets_the_results_fragment_alone(admin_client: Client, catalog: dict) -> None:
    response = admin_client.get("/console/t/acme/tools/", {"q": "bucket"}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="tool-results"') and "<html" not in body
    assert "CreateBucket" in body and "CreateVpc" not in body
    full = admin_client.get("/console/t/acme/tools/", {"q": "bucket"}, HTTP_HX_REQUEST="true",
                            HTTP_HX_HISTORY_RESTORE_REQUEST="true").content.decode()
    assert "<html" in full and 'hx-push-url="true"' in full and 'delay:300ms' in full


def test_the_list_pages_with_a_bounded_number_of_queries(
    admin_client: Client, django_assert_max_num_queries: Any, publish: Any
) -> None:
    tenant = tenant_factory(slug="big")
    publish(openapi_backend_factory(tenant=tenant, name="few"), network_spec(many_operations(3)))
    mcp_entry(backend_factory(tenant=tenant, name="mcp"), "ping", "Answers pong.")
    admin_client.get("/console/t/big/tools/")  # the session and the like, once
    with django_assert_max_num_queries(12) as few:
        admin_client.get("/console/t/big/tools/")
    publish(openapi_backend_factory(tenant=tenant, name="many"), network_spec(many_operations(130)))
    with django_assert_max_num_queries(len(few.captured_queries)) as many:
        page = admin_client.get("/console/t/big/tools/", {"page": 2}).content.decode()
    assert "page 2 of 3" in page and "134 tools" in page
    assert not any("input_schema" in q["sql"] or "binding" in q["sql"] for q in many.captured_queries)
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert "DescribeThing0042" in admin_client.get("/console/t/big/tools/", {"q": "describe thing0042"}).content.decode()


def test_a_catalog_tool_is_shown_in_full(admin_client: Client, catalog: dict) -> None:
    tool = Tool.objects.get(backend=catalog["cloud"], name="CreateSubnet")
    page = admin_client.get(f"/console/t/acme/tools/{tool.pk}/").content.decode()
    assert "<h1><code>CreateSubnet</code></h1>" in page
    assert '<th scope="row"><code>VpcId</code></th><td>string</td><td>required</td>' in page
    assert '<th scope="row"><code>DryRun</code></th><td>string</td><td><span class="muted">optional</span>' in page
    assert "POST /cloud/CreateSubnet" in page
    assert json.dumps(tool.input_schema, indent=2).replace('"', "&quot;")[:40] in page  # pretty JSON, escaped


def test_an_mcp_tool_shows_what_its_server_listed(admin_client: Client, catalog: dict) -> None:
    page = admin_client.get(f"/console/t/acme/tools/mcp/{catalog['add'].pk}/").content.decode()
    assert "add_numbers" in page and "Add two numbers." in page and "<code>a</code>" in page


def test_other_tenants_tools_are_404_and_members_may_read(client: Client, catalog: dict, django_user_model: Any) -> None:
    user = django_user_model.objects.create_user(username="mia", password="pw")
    membership_set(tenant=catalog["tenant"], user=user, role="member")
    client.force_login(user)
    theirs = Tool.objects.get(backend=catalog["secret"])
    mine = Tool.objects.get(backend=catalog["cloud"], name="CreateVpc")
    assert client.get(f"/console/t/acme/tools/{mine.pk}/").status_code == 200
    assert client.get(f"/console/t/acme/tools/{theirs.pk}/").status_code == 404  # id swapped into my tenant
    assert client.get(f"/console/t/other/tools/{theirs.pk}/").status_code == 404  # their tenant
    assert client.get("/console/t/other/tools/").status_code == 404
    other_mcp = mcp_entry(backend_factory(tenant=catalog["other"], name="their-mcp"), "steal", "Nope.")
    assert client.get(f"/console/t/acme/tools/mcp/{other_mcp.pk}/").status_code == 404
    # A catalog tool's id is no MCP entry's, and the other way round.
    assert client.get(f"/console/t/acme/tools/{catalog['add'].pk + 100000}/").status_code == 404
    assert client.post("/console/t/acme/tools/").status_code == 405  # the pages only read


def test_anonymous_visitors_are_sent_to_sign_in(client: Client, catalog: dict) -> None:
    response = client.get("/console/t/acme/tools/")
    assert response.status_code == 302 and response["Location"].startswith("/console/login/")


#: A chain with a diamond: AttachNetworkInterface needs an interface (a subnet and a security
#: group, each in a VPC) and an instance (in a subnet).
NETWORK = {
    "CreateVpc": ("Creates a virtual private cloud (VPC).", ["CidrBlock"]),
    "CreateSubnet": ("Creates a subnet in a VPC.", ["VpcId", "CidrBlock"]),
    "CreateSecurityGroup": ("Creates a security group.", ["GroupName", "VpcId"]),
    "CreateNetworkInterface": ("Creates a network interface in a subnet.", ["SubnetId", "SecurityGroupId"]),
    "RunInstances": ("Launches instances in a subnet.", ["ImageId", "SubnetId"]),
    "AttachNetworkInterface": ("Attaches a network interface to an instance.", ["NetworkInterfaceId", "InstanceId"]),
}


def test_a_tools_prerequisites_are_drawn_as_a_layered_graph(
    admin_client: Client, settings: Any, publish: Any, django_assert_max_num_queries: Any
) -> None:
    settings.GATEWAY_TOOL_INDEX = True
    tenant = tenant_factory(slug="net")
    backend = openapi_backend_factory(tenant=tenant, name="ec2")
    publish(backend, network_spec(NETWORK))
    ids = dict(Tool.objects.filter(backend=backend).values_list("name", "pk"))
    admin_client.get(f"/console/t/net/tools/{ids['CreateVpc']}/")
    with django_assert_max_num_queries(14):
        page = admin_client.get(f"/console/t/net/tools/{ids['AttachNetworkInterface']}/").content.decode()
    svg = page[page.index("<svg"):page.index("</svg>")]
    for name in ("CreateVpc", "CreateSubnet", "CreateSecurityGroup", "CreateNetworkInterface", "RunInstances"):
        assert f'href="/console/t/net/tools/{ids[name]}/"' in svg  # each dependency links to its page
    assert svg.count('class="edge"') == 7  # the direct needs only, not every pair of the closure
    assert '<g class="node target">' in svg and "AttachNetworkInterface" in svg
    chain = page[page.index('<ol class="chain">'):page.index("</ol>")]
    assert chain.index("CreateVpc") < chain.index("CreateSubnet") < chain.index("CreateNetworkInterface")
    vpc = admin_client.get(f"/console/t/net/tools/{ids['CreateVpc']}/").content.decode()
    assert "<svg" not in vpc and 'id="no-prerequisites"' in vpc
