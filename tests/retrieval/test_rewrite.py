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
