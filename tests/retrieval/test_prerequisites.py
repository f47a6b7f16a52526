"""Prerequisite chains derived from a small synthetic catalog (pure)."""

from __future__ import annotations

from typing import Any

from apps.retrieval.prerequisites import ToolSchemas, prerequisite_closures


def schema(*required: str, optional: tuple[str, ...] = (), nested: dict[str, Any] | None = None) -> dict[str, Any]:
    properties: dict[str, Any] = {name: {"type": "string"} for name in (*required, *optional)}
    properties.update(nested or {})
    return {"type": "object", "required": list(required), "properties": properties}


def answer(*members: str) -> dict[str, Any]:
    return {"type": "object", "properties": {"Result": {"allOf": [
        {"type": "object", "properties": {member: {"type": "string"} for member in members}}]}}}


def tool(backend: str, name: str, inputs: dict[str, Any], outputs: dict[str, Any] | None = None) -> ToolSchemas:
    return ToolSchemas((backend, name), backend, name, inputs, outputs)


CATALOG = [
    tool("net", "CreateVpc", schema("CidrBlock"), answer("VpcId")),
    tool("net", "DeleteVpc", schema("VpcId")),
    tool("net", "CreateSubnet", schema("VpcId", "CidrBlock"), answer("SubnetId")),
    tool("net", "CreateSecurityGroup", schema("GroupName", "Description", optional=("VpcId",)), answer("GroupId")),
    tool("net", "AuthorizeSecurityGroupIngress", schema(optional=("GroupId", "IpProtocol"))),
    tool("net", "RunInstances", schema("MinCount", optional=("SubnetId", "ImageId", "KeyName", "ClientToken"))),
    tool("net", "CreateImage", schema("InstanceId", "Name"), answer("ImageId")),
    tool("net", "StopInstances", schema("InstanceIds")),
    tool("net", "AllocateAddress", schema(optional=("Domain",)), answer("AllocationId", "PublicIp")),
    tool("net", "AssociateAddress", schema("AllocationId", optional=("InstanceId",))),
    tool("net", "RegisterInstancesWithLoadBalancer", schema("LoadBalancerName", "Instances")),
    tool("net", "CreateLoadBalancer", schema("LoadBalancerName", optional=("Subnets",))),
    tool("net", "CreateCluster", schema("roleArn", nested={"vpcConfig": {"type": "object", "properties": {
        "subnetIds": {"type": "array", "items": {"type": "string"}}}}})),
    tool("id", "CreateRole", schema("RoleName"), answer("Arn")),
    tool("store", "PutObject", schema("Bucket", "Key")),
    tool("store", "CreateBucket", schema("Bucket")),
]


def closures() -> dict[str, list[str]]:
    return {f"{k[0]}:{k[1]}": [f"{b}:{n}" for b, n in v] for k, v in prerequisite_closures(CATALOG).items()}


def test_required_ids_lead_to_the_tools_that_make_them_dependencies_first() -> None:
    found = closures()
    assert found["net:CreateSubnet"] == ["net:CreateVpc"]
    assert found["net:DeleteVpc"] == ["net:CreateVpc"]
    # An instance runs in a subnet of a VPC, from an image: its own optional ids count too.
    assert found["net:StopInstances"] == ["net:CreateVpc", "net:CreateSubnet", "net:CreateImage", "net:RunInstances"]


def test_the_tools_own_name_reads_a_bare_parameter() -> None:
    # GroupId of AuthorizeSecurityGroupIngress is a security group's; GroupName of
    # CreateSecurityGroup names what it makes, no prerequisite.
    assert closures()["net:AuthorizeSecurityGroupIngress"] == ["net:CreateVpc", "net:CreateSecurityGroup"]
    assert closures()["net:CreateSecurityGroup"] == ["net:CreateVpc"]


def test_an_id_no_name_explains_is_found_in_a_making_tools_answer() -> None:
    assert closures()["net:AssociateAddress"] == [
        "net:AllocateAddress", "net:CreateVpc", "net:CreateSubnet", "net:CreateImage", "net:RunInstances"]


def test_types_named_outright_and_made_elsewhere_and_nested_ids_count() -> None:
    found = closures()
    assert found["store:PutObject"] == ["store:CreateBucket"]
    assert found["net:CreateCluster"] == ["id:CreateRole", "net:CreateVpc", "net:CreateSubnet"]
    # A name joining two types makes neither: LoadBalancerName is a load balancer's.
    assert found["net:RegisterInstancesWithLoadBalancer"] == [
        "net:CreateLoadBalancer", "net:CreateVpc", "net:CreateSubnet", "net:CreateImage", "net:RunInstances"]


def test_cycles_end_and_a_tool_is_never_its_own_prerequisite() -> None:
    found = closures()
    # CreateImage needs an instance, which may run from an image: the chain stops where it closes.
    assert "net:CreateImage" not in found["net:CreateImage"]
    assert found["net:CreateImage"] == ["net:CreateVpc", "net:CreateSubnet", "net:RunInstances"]
    assert "net:RunInstances" not in found.get("net:RunInstances", [])
    assert "net:CreateVpc" not in found and "net:AllocateAddress" not in found
