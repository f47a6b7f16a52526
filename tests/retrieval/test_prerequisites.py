"""Prerequisite chains derived from a small synthetic catalog (pure)."""

from __future__ import annotations

from typing import Any

from apps.retrieval.prerequisites import ToolSchemas, prerequisite_chains


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
    # Two tools require a subnet, none an image: only a subnet is a type many tools need.
    tool("net", "DeleteSubnet", schema("SubnetId")),
    tool("net", "CreateNetworkInterface", schema("SubnetId"), answer("NetworkInterfaceId")),
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


def prerequisite_closures(catalog: list[ToolSchemas]) -> dict[Any, list[Any]]:
    return {key: list(chain.closure) for key, chain in prerequisite_chains(catalog).items() if chain.closure}


def closures() -> dict[str, list[str]]:
    return {f"{k[0]}:{k[1]}": [f"{b}:{n}" for b, n in v] for k, v in prerequisite_closures(CATALOG).items()}


def test_required_ids_lead_to_the_tools_that_make_them_dependencies_first() -> None:
    found = closures()
    assert found["net:CreateSubnet"] == ["net:CreateVpc"]
    assert found["net:DeleteVpc"] == ["net:CreateVpc"]
    # An instance runs in a subnet of a VPC, from an image: of those optional ids of RunInstances,
    # only the subnet's is of a type many tools require; an image is made from an instance, so the
    # first instance runs from one that exists already.
    assert found["net:StopInstances"] == ["net:CreateVpc", "net:CreateSubnet", "net:RunInstances"]
    assert found["net:RunInstances"] == ["net:CreateVpc", "net:CreateSubnet"]


def test_the_tools_own_name_reads_a_bare_parameter() -> None:
    # GroupId of AuthorizeSecurityGroupIngress is a security group's; GroupName of
    # CreateSecurityGroup names what it makes, no prerequisite.
    assert closures()["net:AuthorizeSecurityGroupIngress"] == ["net:CreateVpc", "net:CreateSecurityGroup"]
    assert closures()["net:CreateSecurityGroup"] == ["net:CreateVpc"]


def test_an_id_no_name_explains_is_found_in_a_making_tools_answer() -> None:
    assert closures()["net:AssociateAddress"] == [
        "net:AllocateAddress", "net:CreateVpc", "net:CreateSubnet", "net:RunInstances"]


def test_types_named_outright_and_made_elsewhere_and_nested_ids_count() -> None:
    found = closures()
    assert found["store:PutObject"] == ["store:CreateBucket"]
    # vpcConfig.subnetIds is optional: not walked.
    assert found["net:CreateCluster"] == ["id:CreateRole"]
    # A name joining two types makes neither: LoadBalancerName is a load balancer's.
    assert found["net:RegisterInstancesWithLoadBalancer"] == [
        "net:CreateLoadBalancer", "net:CreateVpc", "net:CreateSubnet", "net:RunInstances"]


def test_cycles_end_and_a_tool_is_never_its_own_prerequisite() -> None:
    found = closures()
    # CreateImage needs an instance, which may run from an image: the chain stops where it closes.
    assert "net:CreateImage" not in found["net:CreateImage"]
    assert found["net:CreateImage"] == ["net:CreateVpc", "net:CreateSubnet", "net:RunInstances"]
    assert "net:RunInstances" not in found.get("net:RunInstances", [])
    assert "net:CreateVpc" not in found and "net:AllocateAddress" not in found


def described(text: str) -> dict[str, Any]:
    return {"type": "string", "description": text}


def test_a_parameter_s_description_names_the_type_its_name_does_not() -> None:
    catalog = [*CATALOG,
        tool("scale", "CreateGroup", schema("GroupName", nested={
            "ZoneIdentifier": described("A comma-separated list of subnet IDs for a VPC where instances run."),
            "PermissionArn": described("The ARN of the IAM role that allows the group to publish."),
        }) | {"required": ["GroupName", "ZoneIdentifier", "PermissionArn"]}),
        tool("net", "CreateFlowLogs", schema(nested={
            "ResourceIds": {"type": "array", "items": {"type": "string"},
                            "description": "The IDs of the resources to monitor, for example the IDs of the VPCs."}},
            ) | {"required": ["ResourceIds"]}),
        tool("lb", "RegisterTargets", schema(nested={"Targets": {"type": "array", "items": {
            "type": "object", "required": ["Id"], "properties": {"Id": described(
                "The ID of the target. If the target type is instance, specify an instance ID.")}}}}) | {
            "required": ["Targets"]}),
        tool("lb", "CreateTargetGroup", schema("Name"), answer("TargetGroupArn")),
    ]
    found = {f"{k[0]}:{k[1]}": [f"{b}:{n}" for b, n in v] for k, v in prerequisite_closures(catalog).items()}
    assert found["scale:CreateGroup"] == ["net:CreateVpc", "net:CreateSubnet", "id:CreateRole"]
    assert found["net:CreateFlowLogs"] == ["net:CreateVpc"]  # the resources: VPCs, not "resources"
    assert found["lb:RegisterTargets"] == ["net:CreateVpc", "net:CreateSubnet", "net:RunInstances"]


def test_a_list_of_strings_named_for_a_type_holds_its_ids_and_an_optional_name_does_not_count() -> None:
    catalog = [*CATALOG,
        tool("k8s", "CreateProfile", schema("clusterName", nested={
            "subnets": {"type": "array", "items": {"type": "string"}}}) | {"required": ["clusterName", "subnets"]}),
        tool("k8s", "CreateCluster", schema("clusterName")),
        tool("db", "CreateDBSubnetGroup", schema("DBSubnetGroupName")),
        tool("db", "RestoreDBInstance", schema("DBInstanceIdentifier", optional=("DBSubnetGroupName", "KeyName"))),
        tool("db", "CreateDBInstance", schema("DBInstanceIdentifier")),
    ]
    found = {f"{k[0]}:{k[1]}": [f"{b}:{n}" for b, n in v] for k, v in prerequisite_closures(catalog).items()}
    assert found["k8s:CreateProfile"] == ["k8s:CreateCluster", "net:CreateVpc", "net:CreateSubnet"]
    # An optional name is never essential, not even of what the tool's own service makes.
    assert found["db:RestoreDBInstance"] == ["db:CreateDBInstance"]


def test_another_service_makes_a_plain_name_s_type_only_when_services_share_it() -> None:
    # AttachVolume's `Device` is a device name (/dev/sdh), not the device a network manager
    # registers in a global network: no other service's tools take a device. A bucket is taken by
    # the tools of two services that make none.
    catalog = [*CATALOG,
        tool("net", "CreateVolume", schema("AvailabilityZone"), answer("VolumeId")),
        tool("net", "AttachVolume", {"type": "object", "required": ["Device", "InstanceId", "VolumeId"], "properties": {
            "Device": described("The device name (for example, /dev/sdh or xvdh)."),
            "InstanceId": described("The ID of the instance."),
            "VolumeId": described("The ID of the EBS volume.")}}),
        tool("wan", "CreateGlobalNetwork", schema(optional=("Description",)), answer("GlobalNetworkId")),
        tool("wan", "CreateDevice", schema("GlobalNetworkId"), answer("DeviceId")),
        tool("wan", "GetDevices", schema("GlobalNetworkId")),
        tool("trail", "CreateTrail", schema("Name", "Bucket")),
        tool("backup", "StartExportJob", schema("Bucket", "Format")),
        # Tag keys: CreateTags is handed the tags it records, and no answer's `tags` is an id.
        tool("net", "CreateTags", schema(nested={"Resources": {"type": "array", "items": {"type": "string"}},
                                                 "Tags": {"type": "array", "items": {"type": "object"}}})
             | {"required": ["Resources", "Tags"]}),
        tool("log", "CreateLogGroup", schema("logGroupName")),
        tool("log", "CreateDelivery", schema("deliverySourceName"), answer("deliveryId", "tags")),
        tool("log", "UntagLogGroup", schema("logGroupName", nested={
            "tags": {"type": "array", "items": {"type": "string"}}}) | {"required": ["logGroupName", "tags"]}),
    ]
    found = {f"{k[0]}:{k[1]}": [f"{b}:{n}" for b, n in v] for k, v in prerequisite_closures(catalog).items()}
    assert found["net:AttachVolume"] == ["net:CreateVpc", "net:CreateSubnet", "net:RunInstances", "net:CreateVolume"]
    device = next(need for need in prerequisite_chains(catalog)[("net", "AttachVolume")].needs
                  if need.parameter == "Device")
    assert (device.producer, device.lookup) == (None, None)
    assert found["trail:CreateTrail"] == ["store:CreateBucket"]
    assert found["backup:StartExportJob"] == ["store:CreateBucket"]
    assert found["log:UntagLogGroup"] == ["log:CreateLogGroup"]


def test_another_service_makes_an_id_s_type_only_when_the_name_spells_all_of_it_or_the_description_does() -> None:
    catalog = [*CATALOG,
        tool("api", "CreateResource", schema("ParentId", "PathPart")),
        tool("stack", "DescribeStackResource", {"type": "object", "required": ["StackName", "LogicalResourceId"],
                                                "properties": {"StackName": {"type": "string"}, "LogicalResourceId": (
                                                    described("The logical name of the resource in the template."))}}),
        tool("k8s", "CreateFargateProfile", {"type": "object", "required": ["podExecutionRoleArn"], "properties": {
            "podExecutionRoleArn": described("The Amazon Resource Name (ARN) of the Pod execution role to use.")}}),
    ]
    found = {f"{k[0]}:{k[1]}": [f"{b}:{n}" for b, n in v] for k, v in prerequisite_closures(catalog).items()}
    assert "stack:DescribeStackResource" not in found  # a logical resource of a template, not a REST API's
    assert found["k8s:CreateFargateProfile"] == ["id:CreateRole"]


def test_a_type_most_services_take_without_making_it_is_no_one_service_s() -> None:
    # Every service tags its own resources: a `ResourceArn` is no REST API resource.
    taggers = [tool(backend, "TagResource", schema("ResourceArn", "Tags")) for backend in ("net", "store", "k8s", "db")]
    catalog = [*CATALOG, tool("api", "CreateResource", schema("ParentId", "PathPart")), *taggers]
    chains = prerequisite_chains(catalog)
    assert [(need.parameter, need.producer, need.lookup) for need in chains[("net", "TagResource")].needs] == [
        ("ResourceArn", None, None)]
    assert not chains[("db", "TagResource")].closure
    assert list(chains[("net", "CreateCluster")].closure) == [("id", "CreateRole")]


def named(catalog: list[ToolSchemas]) -> dict[str, list[str]]:
    return {f"{k[0]}:{k[1]}": [f"{b}:{n}" for b, n in v] for k, v in prerequisite_closures(catalog).items()}


def strings() -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}}


def test_a_required_object_that_requires_no_member_still_needs_where_it_is_placed() -> None:
    # Making tools of five more backends require a subnet: it is where things are placed. Nothing
    # makes anything in a security group, so its ids in the same object stay optional.
    placed = [tool(backend, maker, schema("SubnetId")) for backend, maker in (
        ("cache", "CreateCacheCluster"), ("files", "CreateFileSystem"), ("db", "CreateDatabase"),
        ("fn", "CreateFunction"), ("mq", "CreateBroker"))]
    # More services than those take no subnet: a subnet is not a word each uses for its own things.
    others = [tool(backend, "ListTags", schema()) for backend in ("mail", "dns", "queue", "auth", "keys")]
    vpc_config = {"allOf": [{"type": "object", "properties": {"subnetIds": strings(), "securityGroupIds": strings()}}]}
    cluster = tool("k8s", "CreateCluster", schema("name", "roleArn", "resourcesVpcConfig",
                                                  nested={"resourcesVpcConfig": vpc_config}))
    found = named([*CATALOG, *placed, *others, cluster])
    assert found["k8s:CreateCluster"] == ["id:CreateRole", "net:CreateVpc", "net:CreateSubnet"]
    assert found["net:CreateCluster"] == ["id:CreateRole"]  # its vpcConfig is optional: nothing to hold
    # Without the other backends a subnet is one service's business: the object's ids stay optional.
    assert named([*CATALOG, *others, cluster])["k8s:CreateCluster"] == ["id:CreateRole"]


def test_a_bare_name_of_a_tool_that_makes_nothing_is_what_the_tool_acts_on() -> None:
    catalog = [*CATALOG,
               tool("k8s", "CreateCluster", schema("name", "roleArn"), answer("arn")),
               tool("k8s", "DescribeCluster", schema("name")),
               tool("k8s", "UpdateClusterConfig", schema("name")),
               tool("k8s", "DescribeAddonVersions", schema(optional=("name",)))]
    found = named(catalog)
    assert found["k8s:DescribeCluster"] == ["id:CreateRole", "k8s:CreateCluster"]
    assert found["k8s:UpdateClusterConfig"] == ["id:CreateRole", "k8s:CreateCluster"]  # a cluster's config
    assert found["k8s:CreateCluster"] == ["id:CreateRole"]  # a maker's bare name is the new one's
    assert "k8s:DescribeAddonVersions" not in found


def test_put_and_start_make_their_type_where_no_tool_is_named_for_making_it() -> None:
    targets = {"type": "array", "items": {"type": "object", "properties": {"Id": {"type": "string"}}}}
    catalog = [*CATALOG,
               tool("flow", "CreateStateMachine", schema("name", "roleArn"), answer("stateMachineArn")),
               tool("flow", "StartExecution", schema("stateMachineArn"), answer("executionArn")),
               tool("flow", "StopExecution", schema("executionArn")),
               tool("bus", "PutRule", schema("Name"), answer("RuleArn")),
               tool("bus", "PutTargets", schema("Rule", "Targets", nested={"Targets": targets})),
               tool("lb", "CreateRule", schema("ListenerArn", "Priority")),
               tool("id", "CreatePolicy", schema("PolicyName", "PolicyDocument"), answer("Arn")),
               tool("id", "PutRolePolicy", schema("RoleName", "PolicyName", "PolicyDocument")),
               tool("net", "StartInstances", schema("InstanceIds"))]
    found = named(catalog)
    assert found["flow:StopExecution"] == ["id:CreateRole", "flow:CreateStateMachine", "flow:StartExecution"]
    assert found["bus:PutTargets"] == ["bus:PutRule"]  # its own backend's rule, not a load balancer's
    # The policy PutRolePolicy names is the one it writes, no managed policy to create first.
    assert found["id:PutRolePolicy"] == ["id:CreateRole"]
    # StartInstances starts what RunInstances makes: it takes instances that exist.
    assert found["net:StartInstances"] == ["net:CreateVpc", "net:CreateSubnet", "net:RunInstances"]


def test_an_arn_names_what_exists_never_what_the_tool_makes() -> None:
    # The service assigns ARNs: RegisterTransitGateway is handed one another service made, and the
    # VPC whose ARN CreateVpcAttachment takes is no VPC attachment.
    catalog = [*CATALOG,
               tool("net", "CreateTransitGateway", schema(), answer("TransitGatewayId")),
               tool("wan", "CreateGlobalNetwork", schema(), answer("GlobalNetworkId")),
               tool("wan", "RegisterTransitGateway", schema("GlobalNetworkId", "TransitGatewayArn")),
               tool("wan", "CreateVpcAttachment", schema("VpcArn"))]
    found = named(catalog)
    assert found["wan:RegisterTransitGateway"] == ["wan:CreateGlobalNetwork", "net:CreateTransitGateway"]
    assert found["wan:CreateVpcAttachment"] == ["net:CreateVpc"]


def test_a_type_named_before_an_arn_is_what_it_identifies() -> None:
    # "The subnet ARN of the VPC attachment": a subnet's ARN, not the attachment's.
    catalog = [*CATALOG, tool("wan", "CreateVpcAttachment", {"type": "object", "required": ["SubnetArns"], "properties": {
        "SubnetArns": strings() | {"description": "The subnet ARN of the VPC attachment."}}})]
    assert named(catalog)["wan:CreateVpcAttachment"] == ["net:CreateVpc", "net:CreateSubnet"]


def test_a_plain_name_counts_when_its_description_says_it_must_be_given() -> None:
    catalog = [*CATALOG,
               tool("task", "RegisterTaskDefinition", schema("family"), answer("taskDefinitionArn")),
               tool("task", "CreateService", {"type": "object", "required": ["serviceName"], "properties": {
                   "serviceName": {"type": "string"},
                   "taskDefinition": described("The task definition to run. A task definition must be specified "
                                               "if the service uses the rolling deployment controller.")}})]
    assert named(catalog)["task:CreateService"] == ["task:RegisterTaskDefinition"]


def test_is_required_says_it_of_this_parameter_only() -> None:
    # "The service-linked role is required if …" is said of another role than the one `Role` names.
    catalog = [*CATALOG, tool("task", "CreateService", {"type": "object", "required": ["serviceName"], "properties": {
        "serviceName": {"type": "string"},
        "RoleArn": described("The ARN of the role for your load balancer. The service-linked role is required if "
                             "your tasks use the awsvpc mode."),
        "SubnetId": described("The ID of the subnet. This parameter is required if the tasks use the awsvpc mode.")}})]
    assert named(catalog)["task:CreateService"] == ["net:CreateVpc", "net:CreateSubnet"]


def test_a_description_names_a_type_as_the_name_of_it_or_an_arn_for_it() -> None:
    catalog = [*CATALOG,
               tool("log", "CreateLogGroup", schema("logGroupName")),
               tool("trail", "CreateTrail", {"type": "object", "required": ["Name", "S3BucketName"], "properties": {
                   "Name": {"type": "string"},
                   "S3BucketName": described("Specifies the name of the Amazon S3 bucket for log files.")}}),
               tool("dns", "CreateQueryLoggingConfig", {"type": "object", "required": ["WatchLogGroupArn"], "properties": {
                   "WatchLogGroupArn": described("The Amazon Resource Name (ARN) for the log group to send logs to.")}})]
    found = named(catalog)
    assert found["trail:CreateTrail"] == ["store:CreateBucket"]
    assert found["dns:CreateQueryLoggingConfig"] == ["log:CreateLogGroup"]


def test_a_bare_required_name_is_what_its_description_says_it_names() -> None:
    # StartLogging starts "logging", nothing named; its `Name` is a trail's, as the description says.
    catalog = [*CATALOG,
               tool("trail", "CreateTrail", schema("Name")),
               tool("trail", "StartLogging", {"type": "object", "required": ["Name"], "properties": {
                   "Name": described("Specifies the name or the CloudTrail ARN of the trail to log for.")}})]
    assert named(catalog)["trail:StartLogging"] == ["trail:CreateTrail"]


def test_a_tool_named_for_no_making_makes_what_it_answers_with() -> None:
    # Subscribe answers with the SubscriptionArn SetSubscriptionAttributes takes; UpdateSubscription
    # answers with one too, but is handed a subscription that exists.
    catalog = [*CATALOG,
               tool("note", "CreateTopic", schema("Name"), answer("TopicArn")),
               tool("note", "Subscribe", schema("TopicArn", "Protocol"), answer("SubscriptionArn")),
               tool("note", "SetSubscriptionAttributes", schema("SubscriptionArn", "AttributeName")),
               tool("note", "AbandonSubscription", schema("SubscriptionArn"), answer("SubscriptionArn")),
               tool("note", "CreateWatch", schema("Name"), answer("WatchId")),
               tool("note", "UpdateWatch", schema("WatchId"), answer("ParentId")),
               tool("note", "CreateChild", schema("ParentId"))]
    found = named(catalog)
    assert found["note:SetSubscriptionAttributes"] == ["note:CreateTopic", "note:Subscribe"]
    assert "note:CreateChild" not in found  # UpdateWatch changes a watch that exists


def test_an_owner_s_id_is_an_account_s() -> None:
    catalog = [*CATALOG,
               tool("id", "CreateAccessKey", schema("UserName"), answer("AccessKeyId")),
               tool("cache", "AuthorizeIngress", {"type": "object", "required": ["SecurityGroupOwnerId"], "properties": {
                   "SecurityGroupOwnerId": described("The account number of the group owner, not an access key ID.")}})]
    assert "cache:AuthorizeIngress" not in named(catalog)


def test_of_ids_that_exclude_each_other_the_one_the_tool_is_named_for_is_essential() -> None:
    catalog = [*CATALOG,
               tool("net", "CreateCustomerGateway", schema("Type"), answer("CustomerGatewayId")),
               tool("net", "CreateVpnGateway", schema("Type"), answer("VpnGatewayId")),
               tool("net", "CreateTransitGateway", schema(), answer("TransitGatewayId")),
               *[tool("net", f"Use{n}", schema("TransitGatewayId")) for n in range(20)],
               tool("net", "CreateVpnConnection", {"type": "object", "required": ["CustomerGatewayId"], "properties": {
                   "CustomerGatewayId": described("The ID of the customer gateway."),
                   "VpnGatewayId": described("The ID of the virtual private gateway. If you specify a virtual private "
                                             "gateway, you cannot specify a transit gateway."),
                   "TransitGatewayId": described("The ID of the transit gateway. If you specify a transit gateway, "
                                                 "you cannot specify a virtual private gateway.")}})]
    # A transit gateway is taken by many tools, but the connection is a VPN's.
    assert named(catalog)["net:CreateVpnConnection"] == ["net:CreateCustomerGateway", "net:CreateVpnGateway"]


def test_an_id_no_type_explains_is_what_a_maker_registered_under_the_same_keys() -> None:
    catalog = [*CATALOG,
               tool("scale", "RegisterScalableTarget", schema("ServiceNamespace", "ResourceId", "ScalableDimension")),
               tool("scale", "PutScalingPolicy", schema("PolicyName", "ServiceNamespace", "ResourceId",
                                                        "ScalableDimension")),
               tool("scale", "TagResource", schema("ResourceId", "Tags"))]
    found = named(catalog)
    assert found["scale:PutScalingPolicy"] == ["scale:RegisterScalableTarget"]
    assert "scale:TagResource" not in found  # the maker requires more than TagResource does


def test_a_plain_parameter_whose_description_opens_on_a_type_names_it() -> None:
    catalog = [*CATALOG,
               tool("log", "CreateLogGroup", schema("logGroupName")),
               tool("log", "CreateExportTask", {"type": "object", "required": ["logGroupName", "destination"],
                                                "properties": {"logGroupName": {"type": "string"},
                                                               "destination": described("The name of S3 bucket for the "
                                                                                        "exported log data.")}})]
    assert named(catalog)["log:CreateExportTask"] == ["log:CreateLogGroup", "store:CreateBucket"]
