"""What the index reads of a tool (pure)."""

from __future__ import annotations

from apps.retrieval.text import (
    DESCRIPTION_CHARS,
    ToolText,
    first_sentence,
    identifier_words,
    index_text,
    singular,
    split_identifiers,
    type_words,
)


def test_identifiers_split_into_words_on_case_separators_and_acronyms() -> None:
    assert identifier_words("DescribeVpcEndpoints") == ["Describe", "Vpc", "Endpoints"]
    assert identifier_words("create_pull-request") == ["create", "pull", "request"]
    assert identifier_words("DescribeVPCEndpoints") == ["Describe", "VPC", "Endpoints"]
    assert identifier_words("AssociateIpv6CidrBlock") == ["Associate", "Ipv6", "Cidr", "Block"]
    # The plural s of an acronym stays on it: `ACLs` is one word, not `AC` and `Ls`.
    assert identifier_words("ListWebACLsForResource") == ["List", "Web", "ACLs", "For", "Resource"]
    assert identifier_words("DescribeVPCs") == ["Describe", "VPCs"]
    assert identifier_words("ec2") == ["ec2"]


def test_a_query_keeps_its_tokens_and_gains_their_words() -> None:
    assert split_identifiers("run DescribeVpcs now") == "run DescribeVpcs Describe Vpcs now"
    assert split_identifiers("sg-0123abcd rules") == "sg-0123abcd sg 0123abcd rules"


def test_the_index_text_names_the_tool_its_service_its_parameters_required_first() -> None:
    text = index_text(ToolText(
        name="CreateSubnet",
        description="Creates a subnet   in a VPC.\nMore text.",
        input_schema={"type": "object", "properties": {"DryRun": {}, "VpcId": {}, "CidrBlock": {}},
                      "required": ["VpcId", "Missing"]},
        service="ec2",
        service_title="Amazon Elastic Compute Cloud",
    ))
    assert text.name == "Create Subnet"
    assert text.service == "ec2 Amazon Elastic Compute Cloud"
    assert text.parameters == "Vpc Id, Dry Run, Cidr Block"
    assert text.description == "Creates a subnet in a VPC. More text."
    # The embedding reads the name, the service and the first sentence only.
    assert text.document() == "Create Subnet (ec2 Amazon Elastic Compute Cloud) Creates a subnet in a VPC."


def test_a_long_description_is_cut_at_a_word() -> None:
    text = index_text(ToolText("t", "word " * 1000, {}, "svc"))
    assert len(text.description) <= DESCRIPTION_CHARS
    assert text.description.endswith("word")
    assert text.parameters == ""


def test_the_first_sentence_is_cut_at_a_word() -> None:
    assert first_sentence("No full stop here") == "No full stop here"
    assert first_sentence("Version 1.2 is out. More.") == "Version 1.2 is out."
    assert len(first_sentence("word " * 100)) <= 200


def test_the_digest_changes_with_the_text_or_the_model_only() -> None:
    tool = ToolText("GetPet", "Returns a pet.", {"properties": {"petId": {}}}, "pets")
    same = ToolText("GetPet", "Returns  a pet.", {"properties": {"petId": {}}}, "pets")
    other = ToolText("GetPet", "Returns a pet by id.", {"properties": {"petId": {}}}, "pets")
    assert index_text(tool).digest("m1") == index_text(same).digest("m1")
    assert index_text(tool).digest("m1") != index_text(other).digest("m1")
    assert index_text(tool).digest("m1") != index_text(tool).digest("m2")


def test_a_resource_type_is_its_words_in_lower_case_the_last_one_singular() -> None:
    assert [singular(w) for w in ["widgets", "addresses", "policies", "status", "access", "box"]] == [
        "widget", "address", "policy", "status", "access", "box"]
    assert type_words("NetworkAcls") == type_words("network-acl") == ("network", "acl")
    assert type_words("DBInstances") == ("db", "instance")
    assert type_words("") == ()
