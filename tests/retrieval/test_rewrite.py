"""Reading ids as resource types (pure), from a small synthetic catalog that spells no id format out."""

from __future__ import annotations

import pytest

from apps.retrieval.rewrite import ToolFacts, Vocabulary


def tool(name: str, *parameters: str, description: str = "") -> ToolFacts:
    return ToolFacts(("svc", name), name, parameters, description)


CATALOG = [
    tool("DescribeWidgets", "WidgetIds", "MaxResults"),
    tool("DescribeWidgetAttribute", "WidgetId", "Attribute"),
    tool("CreateWidget", "BlueprintId", "SubnetId"),
    tool("StopWidgets", "WidgetIds"),
    tool("DescribeSubnets", "SubnetIds", "VpcId"),
    tool("DescribeVpcs", "VpcIds"),
    tool("DescribeRouteTables", "RouteTableIds"),
    tool("CreateRoute", "RouteTableId", "GatewayId"),
    tool("DescribeInternetGateways", "InternetGatewayIds"),
    tool("AttachInternetGateway", "InternetGatewayId", "VpcId"),
    tool("DescribeSecurityGroups", "GroupIds", description="Describes security groups."),
    tool("DescribeNetworkInterfaces", "NetworkInterfaceIds",
         description="Describes elastic network interfaces. An elastic network interface is a virtual card; "
                     "each elastic network interface has an address."),
    tool("DescribeBlueprints", "BlueprintIds",
         description="Describes a Prebuilt Server Blueprint (PSB) that widgets start from."),
    tool("DescribeNetworkAcls", "NetworkAclIds"),
    tool("GetPolicy", "PolicyArn"),
    tool("ListPolicies"),
    tool("DescribeAccountLimits"),
    tool("DescribeEnabledIpamPolicy", "EnabledIpamPolicyId"),
]


@pytest.fixture(scope="module")
def vocabulary() -> Vocabulary:
    return Vocabulary.build(CATALOG)


@pytest.mark.parametrize(("query", "kind", "tool_name"), [
    ("vpc-1a2b3c4d details", "Vpc", "DescribeVpcs"),  # the type's name
    ("subnet-6782e71e", "Subnet", "DescribeSubnets"),
    ("w-0123456789abcdef0", "Widget", "DescribeWidgets"),  # a prefix: the most used type wins
    ("rtb-3d560345 routes", "RouteTable", "DescribeRouteTables"),  # letters of each word in order
    ("is igw-c0a643a9 attached", "InternetGateway", "DescribeInternetGateways"),
    ("sg-1a2b3c4d rules", "SecurityGroup", "DescribeSecurityGroups"),  # initials
    ("eni-23c49b68?", "NetworkInterface", "DescribeNetworkInterfaces"),  # with the adjective it carries
    ("psb-0a1b2c3d", "Blueprint", "DescribeBlueprints"),  # an acronym the documentation introduces
    ("acl-5fb85d36 entries", "NetworkAcl", "DescribeNetworkAcls"),  # the head noun alone
])
def test_an_id_prefix_names_its_resource_type_and_the_tool_describing_it(
    vocabulary: Vocabulary, query: str, kind: str, tool_name: str
) -> None:
    rewrite = vocabulary.rewrite(query)
    assert rewrite is not None
    assert rewrite.matches[0].type == kind
    assert rewrite.matches[0].tools[0] == ("svc", tool_name)
    assert rewrite.weak


def test_the_rewritten_text_says_the_type_and_a_long_query_is_not_weak(vocabulary: Vocabulary) -> None:
    rewrite = vocabulary.rewrite("stop the widget w-0598c7d356eba48d7 but keep its disk so I can start it later")
    assert rewrite is not None
    assert rewrite.text == "stop the widget Widget but keep its disk so I can start it later"
    assert not rewrite.weak


def test_arns_name_their_resource_type(vocabulary: Vocabulary) -> None:
    rewrite = vocabulary.rewrite("arn:aws:iam::123456789012:policy/ReadOnly")
    assert rewrite is not None and rewrite.matches[0].type == "Policy"
    assert set(rewrite.matches[0].tools) == {("svc", "GetPolicy"), ("svc", "ListPolicies")}


@pytest.mark.parametrize("query", ["create a widget", "t3-micro", "zzz-12345678", "well-known", "x-1"])
def test_queries_without_an_explained_id_are_left_alone(vocabulary: Vocabulary, query: str) -> None:
    assert vocabulary.rewrite(query) is None


def test_only_types_some_tool_describes_are_kept(vocabulary: Vocabulary) -> None:
    assert "Gateway" not in {t.name for t in vocabulary.types.values()}  # GatewayId: nothing describes a Gateway
    assert {"Widget", "Subnet", "Vpc", "RouteTable"} <= {t.name for t in vocabulary.types.values()}


def test_an_arn_prefers_its_own_services_tools_and_says_its_service() -> None:
    vocabulary = Vocabulary.build([
        ToolFacts(("cdn", "DescribeFunction"), "DescribeFunction", ["FunctionArn"], "", "cdn"),
        ToolFacts(("lambda", "GetFunction"), "GetFunction", ["FunctionName"], "", "lambda"),
        ToolFacts(("lambda", "ListFunctions"), "ListFunctions", [], "", "lambda"),
        ToolFacts(("queue", "GetQueueAttributes"), "GetQueueAttributes", ["QueueUrl"], "", "queue"),
    ])
    rewrite = vocabulary.rewrite("arn:aws:lambda:us-west-2:123412341234:function:My_Authorizer_Function")
    assert rewrite is not None and rewrite.text == "lambda Function"
    assert rewrite.matches[0].tools[:2] == (("lambda", "GetFunction"), ("lambda", "ListFunctions"))
    # An ARN whose resource has no type in it still names its service.
    rewrite = vocabulary.rewrite("arn:aws:queue:us-west-2:123456789012:orders settings")
    assert rewrite is not None and (rewrite.text, rewrite.matches) == ("queue settings", ())
    assert vocabulary.rewrite("arn:aws:unknown:us-west-2:123456789012:thing") is None


def test_the_adjectives_before_a_type_are_read_word_by_word() -> None:
    from apps.retrieval.rewrite import _adjectives

    names = [("network", "interface"), ("network", "interface", "card"), ("route", "table")]
    text = ("an elastic network interfaces; a virtual network interface card and the main route tables, "
            "main  route table (two spaces), 9th route table, main route-table")
    assert list(_adjectives(text, names)) == [
        ("elastic", ("network", "interface")),  # its last word plural
        ("virtual", ("network", "interface", "card")),  # the longest name
        ("main", ("route", "table")),
    ]
    assert list(_adjectives(text, [])) == []


@pytest.fixture(scope="module")
def services() -> Vocabulary:
    """Three services, two of them one API's versions under one title, the third named apart from its title."""

    def of(service: str, title: str, name: str, *parameters: str) -> ToolFacts:
        return ToolFacts((service, name), name, parameters, "", service, title)

    return Vocabulary.build([
        of("lb1", "Elastic Load Balancing", "DescribeLoadBalancers", "LoadBalancerNames"),
        of("lb2", "Elastic Load Balancing", "DescribeLoadBalancers", "LoadBalancerArns"),
        of("lb2", "Elastic Load Balancing", "DescribeTargetGroups", "TargetGroupArns", "LoadBalancerArn"),
        of("lattice", "Amazon VPC Lattice", "GetTargetGroup", "targetGroupIdentifier"),
        of("waf", "AWS WAFV2", "GetWebACL", "Name", "Id", "Scope"),
        of("waf", "AWS WAFV2", "ListWebACLs", "Scope"),
        of("topics", "Amazon Simple Notification Service", "GetTopicAttributes", "TopicArn"),
        of("topics", "Amazon Simple Notification Service", "ListTopics"),
        of("topics", "Amazon Simple Notification Service", "ListSubscriptionsByTopic", "TopicArn"),
        of("topics", "Amazon Simple Notification Service", "GetSMSAttributes", "attributes"),
        of("queues", "Amazon Simple Queue Service", "GetQueueAttributes", "QueueUrl", "AttributeNames"),
        of("queues", "Amazon Simple Queue Service", "ListQueues"),
        of("db", "Amazon Relational Database Service", "DescribeDBClusters", "DBClusterIdentifier"),
    ])


def test_an_arn_spells_its_type_run_together_or_after_other_parts(services: Vocabulary) -> None:
    # `targetgroup` is TargetGroup, and of the load balancing services: not VPC Lattice's, whose
    # name the ARN's namespace does not give.
    rewrite = services.rewrite("arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/web-tg/6d0ecf831eec9f09")
    assert rewrite is not None and rewrite.matches[0].type == "TargetGroup"
    assert rewrite.matches[0].tools == (("lb2", "DescribeTargetGroups"), ("lattice", "GetTargetGroup"))
    assert rewrite.text == "lb1 lb2 Target Group"  # the namespace is both services' title, run together
    # The first part that names a type, past those that do not (`regional`).
    rewrite = services.rewrite("arn:aws:wafv2:us-east-1:123456789012:regional/webacl/shop-acl/a1b2c3d4 rules")
    assert rewrite is not None and rewrite.matches[0].type == "WebAcl"  # `wafv2`: the title's last word
    assert rewrite.matches[0].tools[0] == ("waf", "GetWebACL") and rewrite.weak


def test_an_arn_without_a_type_means_its_services_main_type(services: Vocabulary) -> None:
    rewrite = services.rewrite("arn:aws:sns:us-west-2:123456789012:alerts settings")
    assert rewrite is None  # `sns` is no name of `topics`: its title is not run together to it
    rewrite = services.rewrite("arn:aws:simplenotificationservice:us-west-2:123456789012:alerts settings")
    assert rewrite is not None and rewrite.matches[0].type == "Topic"  # the type its parameters name most
    assert rewrite.text == "topics Topic settings"
    rewrite = services.rewrite("arn:aws:simplequeueservice:eu-west-1:123456789012:orders-dlq attributes")
    assert rewrite is not None and rewrite.matches[0].type == "Queue"  # named by `QueueUrl`
    assert rewrite.matches[0].tools == (("queues", "ListQueues"),)
    # The path of an object is its owner's words: a `targetgroup` in it is no type of the topics service.
    rewrite = services.rewrite("arn:aws:simplenotificationservice:::my-logs/targetgroup/2024/x.tar")
    assert rewrite is not None and (rewrite.text, rewrite.matches) == ("topics", ())
    # A type the ARN spells but the catalog does not know is not guessed at: `db` is no DBCluster.
    rewrite = services.rewrite("arn:aws:db:us-west-2:123456789012:proxy:orders engine version")
    assert rewrite is not None and (rewrite.text, rewrite.matches) == ("db engine version", ())
    # Host names are not read, not even one whose label is a backend's name.
    assert services.rewrite("get a certificate for shop.example.com") is None
    assert services.rewrite("comment on https://topics.github.com/acme/web/issues/42") is None
