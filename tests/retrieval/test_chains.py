"""True prerequisite chains: only the ids a tool cannot work without, each with the read-only
lookup of its type; for MCP servers' tools too; served in `Found.needs` and the REST view."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.test import Client

from apps.catalog.models import Tool
from apps.catalog.specs import spec_upload
from apps.gateway.adapters.index_tool_finder import IndexFinder
from apps.kernel.search_tool import IdNeed
from apps.retrieval import indexing
from apps.retrieval.chains import needs_get, prerequisites_get
from apps.retrieval.prerequisites import ToolSchemas, prerequisite_chains
from tests.backends.specs import network_spec
from tests.factories import backend_factory, openapi_backend_factory
from tests.retrieval.test_prerequisites import answer, schema, tool

STRINGS = {"type": "array", "items": {"type": "string"}}

#: An EC2-like catalog whose tools take many optional ids: filters, lists of extras, things made
#: from what the tool itself makes (an image from an instance, a snapshot from a volume).
CATALOG = [
    tool("net", "CreateVpc", schema("CidrBlock"), answer("VpcId")),
    tool("net", "DescribeVpcs", schema(optional=("VpcIds", "NextToken"))),
    tool("net", "DeleteVpc", schema("VpcId")),
    tool("net", "CreateSubnet", schema("VpcId", "CidrBlock"), answer("SubnetId")),
    tool("net", "DeleteSubnet", schema("SubnetId")),
    tool("net", "DescribeSubnets", schema(optional=("VpcId", "NextToken"), nested={"SubnetIds": STRINGS})),
    tool("net", "CreateNetworkInterface", schema("SubnetId"), answer("NetworkInterfaceId")),
    tool("net", "CreateSecurityGroup", schema("GroupName", optional=("VpcId",)), answer("GroupId")),
    tool("net", "CreateKeyPair", schema("KeyName")),
    tool("net", "RunInstances", schema("MinCount", optional=("SubnetId", "ImageId", "KeyName"),
                                       nested={"SecurityGroupIds": STRINGS}), answer("InstanceId")),
    tool("net", "DescribeInstances", schema(optional=("NextToken",), nested={"InstanceIds": STRINGS})),
    tool("net", "StopInstances", schema("InstanceIds")),
    tool("net", "CreateImage", schema("InstanceId", "Name"), answer("ImageId")),
    tool("net", "CreateVolume", schema("AvailabilityZone", optional=("SnapshotId", "KmsKeyId")), answer("VolumeId")),
    tool("net", "DescribeVolumes", schema(optional=("NextToken",), nested={"VolumeIds": STRINGS})),
    tool("net", "CreateSnapshot", schema("VolumeId"), answer("SnapshotId")),
    tool("net", "AttachVolume", schema("VolumeId", "InstanceId", optional=("DryRun",))),
    tool("net", "AllocateAddress", schema(optional=("Domain",)), answer("AllocationId", "PublicIp")),
    tool("net", "DescribeAddresses", schema(optional=("NextToken",))),
    tool("net", "AssociateAddress", schema("AllocationId", optional=("InstanceId", "NetworkInterfaceId"))),
    tool("keys", "CreateKey", schema(optional=("Description",)), answer("KeyId")),
]


def chains(catalog: list[ToolSchemas] = CATALOG) -> dict[str, tuple[list[str], list[tuple[str, str | None, str | None]]]]:
    def shown(key: Any) -> str | None:
        return f"{key[0]}:{key[1]}" if key is not None else None

    return {shown(key): ([shown(k) for k in chain.closure],  # type: ignore[misc]
                         [(n.parameter, shown(n.producer), shown(n.lookup)) for n in chain.needs])
            for key, chain in prerequisite_chains(catalog).items()}


def test_a_describe_tool_whose_ids_are_all_optional_has_no_prerequisites() -> None:
    found = chains()
    for name in ("DescribeVpcs", "DescribeSubnets", "DescribeInstances", "DescribeVolumes", "DescribeAddresses"):
        assert f"net:{name}" not in found


def test_no_chain_walks_an_optional_parameter() -> None:
    found = chains()
    # Its required ids lead to an instance (in a subnet of a VPC) and a volume: not to the image
    # or key pair RunInstances may take, nor to a snapshot or key CreateVolume may start from.
    assert found["net:AttachVolume"][0] == ["net:CreateVolume", "net:CreateVpc", "net:CreateSubnet", "net:RunInstances"]
    assert found["net:StopInstances"][0] == ["net:CreateVpc", "net:CreateSubnet", "net:RunInstances"]
    assert "net:CreateVolume" not in found and found["net:CreateSnapshot"][0] == ["net:CreateVolume"]
    # The optional VpcId of CreateSecurityGroup is a placement many tools require: kept.
    assert found["net:CreateSecurityGroup"][0] == ["net:CreateVpc"]


def test_every_required_id_names_its_producer_and_its_lookup() -> None:
    found = chains()
    assert found["net:AttachVolume"][1] == [("VolumeId", "net:CreateVolume", "net:DescribeVolumes"),
                                            ("InstanceId", "net:RunInstances", "net:DescribeInstances")]
    # An id no name explains: made by AllocateAddress, found among the addresses it makes. The
    # optional InstanceId is one id of a type many tools require; NetworkInterfaceId is not.
    assert found["net:AssociateAddress"][1] == [("AllocationId", "net:AllocateAddress", "net:DescribeAddresses"),
                                                ("InstanceId", "net:RunInstances", "net:DescribeInstances")]
    assert found["net:CreateSubnet"][1] == [("VpcId", "net:CreateVpc", "net:DescribeVpcs")]
    for _, needs in found.values():
        assert all(lookup is not None for _, _, lookup in needs)


def test_mcp_tools_named_in_snake_case_get_chains() -> None:
    found = chains([
        tool("tracker", "create_project", schema("title")),
        tool("tracker", "list_projects", schema(optional=("cursor",))),
        tool("tracker", "create_issue", schema("project_id", "title")),
        tool("tracker", "list_issues", schema("project_id", optional=("assignee_id",))),
        tool("tracker", "close_issue", schema("issue_id", optional=("comment",))),
    ])
    assert found["tracker:close_issue"] == (["tracker:create_project", "tracker:create_issue"],
                                            [("issue_id", "tracker:create_issue", "tracker:list_issues")])
    assert found["tracker:list_issues"][1] == [("project_id", "tracker:create_project", "tracker:list_projects")]


MCP_TOOLS: list[dict[str, Any]] = [
    {"name": "create_project", "description": "Create a project.", "inputSchema": schema("title")},
    {"name": "list_projects", "description": "List projects.", "inputSchema": schema()},
    {"name": "create_issue", "description": "Open an issue in a project.", "inputSchema": schema("project_id", "title")},
    {"name": "list_issues", "description": "List a project's issues.", "inputSchema": schema("project_id")},
    {"name": "close_issue", "description": "Close an issue.", "inputSchema": schema("issue_id")},
]


@pytest.mark.django_db
def test_an_mcp_backend_s_tools_get_chains_from_their_input_schemas(monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(indexing, "mcp_tools_fetch", lambda *, backend: MCP_TOOLS)
    backend = backend_factory(name="tracker", urls=["http://127.0.0.1:9/mcp"])
    indexing.tool_index_sync(backend_id=backend.pk)
    b = backend.pk
    assert prerequisites_get(tenant_id=backend.tenant_id, keys=[(b, "close_issue")]) == {
        (b, "close_issue"): ((b, "create_project"), (b, "create_issue")),
        (b, "create_issue"): ((b, "create_project"),),
    }
    assert needs_get(tenant_id=backend.tenant_id, keys=[(b, "close_issue")]) == {
        (b, "close_issue"): (IdNeed("issue_id", (b, "create_issue"), (b, "list_issues")),)}
    # A schema that changes with no text changing is read again.
    changed = [*MCP_TOOLS[:4], {**MCP_TOOLS[4], "inputSchema": schema("issue_id", "project_id")}]
    monkeypatch.setattr(indexing, "mcp_tools_fetch", lambda *, backend: changed)
    indexing.tool_index_sync(backend_id=backend.pk)
    assert [n.parameter for n in needs_get(tenant_id=backend.tenant_id, keys=[(b, "close_issue")])[(b, "close_issue")]] \
        == ["issue_id", "project_id"]


@pytest.fixture
def cloud(indexing_on, django_capture_on_commit_callbacks):  # noqa: ANN001, ANN201 - pytest-django fixtures
    backend = openapi_backend_factory(name="cloud")
    with django_capture_on_commit_callbacks(execute=True):
        spec_upload(backend=backend, document=network_spec())
    return backend


@pytest.mark.django_db
def test_the_rest_view_shows_each_required_id_with_its_lookup(admin_client: Client, cloud) -> None:  # noqa: ANN001
    tool = Tool.objects.get(backend=cloud, name="CreateSubnet")
    body = admin_client.get(f"/api/v1/tenants/{cloud.tenant.slug}/tools/{tool.pk}/prerequisites").json()
    ids = dict(Tool.objects.filter(backend=cloud).values_list("name", "pk"))
    assert body["prerequisites"] == [{"id": ids["CreateVpc"], "backend": "cloud", "name": "CreateVpc"}]
    assert body["needs"] == [{
        "parameter": "VpcId",
        "producer": {"id": ids["CreateVpc"], "backend": "cloud", "name": "CreateVpc"},
        "lookup": {"id": ids["DescribeVpcs"], "backend": "cloud", "name": "DescribeVpcs"},
    }]
    create_vpc = ids["CreateVpc"]
    assert admin_client.get(f"/api/v1/tenants/{cloud.tenant.slug}/tools/{create_vpc}/prerequisites").json()["needs"] == []


@pytest.mark.django_db(transaction=True)
def test_found_carries_the_needs_of_every_hit_and_chain_member(cloud) -> None:  # noqa: ANN001
    found = asyncio.run(IndexFinder().find(tenant_id=cloud.tenant_id, backends=[cloud.pk], restricted=[],
                                           query="add inbound rules to a security group", k=15))
    b = cloud.pk
    assert (b, "AuthorizeSecurityGroupIngress") in found.hits
    assert found.needs[(b, "AuthorizeSecurityGroupIngress")] == (IdNeed("GroupId", (b, "CreateSecurityGroup"), None),)
    assert found.needs[(b, "CreateSecurityGroup")] == (IdNeed("VpcId", (b, "CreateVpc"), (b, "DescribeVpcs")),)
    members = {*found.hits, *(key for chain in found.prerequisites.values() for key in chain)}
    assert set(found.needs) == {key for key in members if needs_get(tenant_id=cloud.tenant_id, keys=[key])}
