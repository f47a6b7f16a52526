"""`tool_search` through the gateway (docs/tool-search.md): listed, called by the official SDK client in both
eras, answering with the very objects tools/list shows, and never with a tool the caller may not see."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from channels.db import database_sync_to_async

from apps.audit.models import AuditRecord
from apps.catalog.models import Backend, VirtualHost
from apps.catalog.services import virtual_host_tool_search_set
from apps.catalog.specs import spec_upload
from apps.kernel.policy import RuleSpec
from apps.policies.services import access_policy_set
from tests import factories
from tests.backends.specs import OPERATIONS, network_spec
from tests.conftest import mcp_client
from tests.gateway.helpers import message_of, modern

pytestmark = pytest.mark.slow


class Cloud:
    def __init__(self, url: str, key: str, host: VirtualHost, backend: Backend) -> None:
        self.url, self.key, self.host, self.backend = url, key, host, backend

    def request(self, method: str, params: dict[str, Any] | None = None, *, key: str | None = None) -> dict[str, Any]:
        return message_of(modern(self.url, method, params or {}, key=key or self.key))

    def tools(self, *, key: str | None = None) -> list[dict[str, Any]]:
        return self.request("tools/list", key=key)["result"]["tools"]

    def search(self, arguments: dict[str, Any], *, key: str | None = None) -> dict[str, Any]:
        return self.request("tools/call", {"name": "tool_search", "arguments": arguments}, key=key)["result"]


def make_cloud(gateway_url: str, service_url: str, *, mode: str = "listed", mounts: int = 1) -> Cloud:
    tenant = factories.tenant_factory()
    issued = factories.api_key_factory(tenant=tenant, name="agent")
    backend = factories.openapi_backend_factory(tenant=tenant, name="cloud", base_url=service_url)
    spec_upload(backend=backend, document=network_spec(), filename="cloud.json")  # compiled and indexed at once
    extra = {"other": factories.openapi_backend_factory(tenant=tenant, name="other")} if mounts > 1 else {}
    host = factories.virtual_host_factory(tenant=tenant, mounts={"net": backend, **extra})
    virtual_host_tool_search_set(virtual_host=host, mode=mode)
    return Cloud(f"{gateway_url}/mcp/{tenant.slug}/{host.slug}", issued.secret, host, backend)


def hits(tools: list[dict[str, Any]]) -> list[str]:
    """The names of the tools found, without the prerequisites added after them."""
    return [tool["name"] for tool in tools if "gateway/prerequisiteOf" not in tool["_meta"]]


def bare(tool: dict[str, Any]) -> dict[str, Any]:
    """A found tool without what tool_search adds to it (as tools/list shows it)."""
    meta = {k: v for k, v in tool["_meta"].items() if not k.startswith("gateway/")}
    return {**{k: v for k, v in tool.items() if k != "_meta"}, **({"_meta": meta} if meta else {})}


@pytest.fixture
def cloud(transactional_db: None, indexing_on: None, gateway_url: str, recording_service_url: str) -> Cloud:
    return make_cloud(gateway_url, recording_service_url)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_sdk_client_lists_and_calls_tool_search(
    transactional_db: None, indexing_on: None, gateway_url: str, recording_service_url: str, mode: str
) -> None:
    cloud = await database_sync_to_async(make_cloud)(gateway_url, recording_service_url)
    async with mcp_client(cloud.url, cloud.key, mode) as client:
        tools = (await client.list_tools()).tools
        assert tools[0].name == "tool_search"
        assert sorted(tool.name for tool in tools[1:]) == sorted(OPERATIONS)
        result = await client.call_tool("tool_search", {"query": "shut down my servers", "k": 3})
        assert result.is_error is False
        found = hits(result.structured_content["tools"])
        assert found[0] == "TerminateInstances" and len(found) == 3
        called = await client.call_tool(found[0], {"InstanceIds": "i-1"})
    assert called.is_error is False
    assert httpx.get(f"{recording_service_url}/__recorded").json()[-1]["path"] == "/cloud/TerminateInstances"


def test_the_answer_holds_the_objects_tools_list_shows_best_first(cloud: Cloud) -> None:
    listed = {tool["name"]: tool for tool in cloud.tools()}
    result = cloud.search({"query": "create a virtual private cloud"})
    tools = result["structuredContent"]["tools"]
    assert len(tools) == len(OPERATIONS)  # k defaults to 15; the host has 12: every one is a hit
    assert all(bare(tool) == listed[tool["name"]] for tool in tools)
    assert tools[0]["name"] == "CreateVpc"
    assert "tool_search" not in [tool["name"] for tool in tools]
    assert [block["type"] for block in result["content"]] == ["text"]
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    again = cloud.search({"query": "create a virtual private cloud"})
    assert again == result  # deterministic


def test_a_multi_backend_host_answers_with_exposed_names(transactional_db: None, indexing_on: None,
                                                         gateway_url: str, recording_service_url: str) -> None:
    cloud = make_cloud(gateway_url, recording_service_url, mounts=2)
    tools = cloud.search({"query": "shut down my servers", "k": 2})["structuredContent"]["tools"]
    assert tools[0]["name"] == "net-TerminateInstances"
    called = cloud.request("tools/call", {"name": tools[0]["name"], "arguments": {"InstanceIds": "i-1"}})
    assert called["result"]["isError"] is False
    assert httpx.get(f"{cloud.backend.base_url}/__recorded").json()[-1]["path"] == "/cloud/TerminateInstances"


def test_a_hidden_tool_is_never_found_at_any_k(cloud: Cloud) -> None:
    team = factories.team_factory(tenant=cloud.host.tenant, slug="ops")
    limited = factories.api_key_factory(tenant=cloud.host.tenant, name="limited", team=team)
    access_policy_set(virtual_host=cloud.host, default="allow", rules=[
        RuleSpec("no-terminate", "team", "ops", "deny", ["Terminate*", "RunInstances"]),
        RuleSpec("subnets-of-one-vpc", "team", "ops", "allow", ["CreateSubnet"], 'arguments.VpcId == "vpc-1"'),
    ])
    for k in (1, 2, 5, 15, 50):
        tools = cloud.search({"query": "shut down my servers", "k": k}, key=limited.secret)["structuredContent"]["tools"]
        names = [tool["name"] for tool in tools]
        assert "TerminateInstances" not in names and "RunInstances" not in names
        assert not any("RunInstances" in tool["_meta"]["gateway/prerequisites"] for tool in tools)
        assert len(hits(tools)) == min(k, len(OPERATIONS) - 2)
    # A rule whose condition reads the arguments leaves the tool findable; the unrestricted key sees all.
    names = hits(cloud.search({"query": "create a subnet", "k": 1}, key=limited.secret)["structuredContent"]["tools"])
    assert names == ["CreateSubnet"]
    names = hits(cloud.search({"query": "shut down my servers", "k": 1})["structuredContent"]["tools"])
    assert names == ["TerminateInstances"]
    # tool_search itself stays listed and callable under a policy that names nothing like it.
    access_policy_set(virtual_host=cloud.host, default="deny", rules=[
        RuleSpec("vpcs", "tenant", cloud.host.tenant.slug, "allow", ["*Vpc*"]),
    ])
    assert [tool["name"] for tool in cloud.tools()][:1] == ["tool_search"]
    names = [t["name"] for t in cloud.search({"query": "shut down my servers", "k": 50})["structuredContent"]["tools"]]
    assert sorted(names) == ["CreateVpc", "DeleteVpc", "DescribeVpcs"]


def test_a_host_may_list_tool_search_alone(transactional_db: None, indexing_on: None, gateway_url: str,
                                           recording_service_url: str) -> None:
    cloud = make_cloud(gateway_url, recording_service_url, mode="only")
    assert [tool["name"] for tool in cloud.tools()] == ["tool_search"]
    answer = cloud.search({"query": "delete my vpc", "k": 1})["structuredContent"]
    found = answer["tools"]
    assert [tool["name"] for tool in found] == ["DeleteVpc"]
    assert [tool["name"] for tool in answer["prerequisites"]] == ["CreateVpc"]  # in brief
    assert found[0]["inputSchema"]["required"] == ["VpcId"]
    called = cloud.request("tools/call", {"name": "DeleteVpc", "arguments": {"VpcId": "vpc-1"}})
    assert called["result"]["isError"] is False  # callable by name though not listed
    assert httpx.get(f"{recording_service_url}/__recorded").json()[-1]["path"] == "/cloud/DeleteVpc"
    refused = cloud.request("tools/list", {"cursor": "abc"})
    assert refused["error"]["code"] == -32602


@pytest.mark.parametrize(("arguments", "message"), [
    ({}, "'query' must be a non-empty string"),
    ({"query": "   "}, "'query' must be a non-empty string"),
    ({"query": 3}, "'query' must be a non-empty string"),
    ({"query": "x" * 1001}, "at most 1000"),
    ({"query": "vpc", "k": 0}, "'k' must be an integer from 1 to 50"),
    ({"query": "vpc", "k": 51}, "'k' must be an integer from 1 to 50"),
    ({"query": "vpc", "k": True}, "'k' must be an integer from 1 to 50"),
    ({"query": "vpc", "limit": 3}, "Unknown argument(s): limit"),
    ({"query": "vpc", "also": "subnets"}, "'also' must be a list of 1 to 3"),
    ({"query": "vpc", "also": ["x" * 201]}, "at most 200"),
    ({"query": "vpc", "expand": "CreateVpc"}, "'expand' must be a list of tool names"),
    ({"query": "vpc", "expand": ["a", "b", "c", "d", "e", "f"]}, "at most 5 can be expanded"),
    ({"query": "vpc", "k": 1, "expand": ["TerminateInstances"]}, "this answer does not hold: TerminateInstances"),
])
def test_bad_arguments_are_a_tool_error(cloud: Cloud, arguments: dict[str, Any], message: str) -> None:
    result = cloud.search(arguments)
    assert result["isError"] is True
    assert message in result["content"][0]["text"]


def test_the_agent_s_other_phrasings_find_what_the_query_alone_ranks_low(cloud: Cloud) -> None:
    query = {"query": "make it reachable from the internet", "k": 5}
    alone = hits(cloud.search(query)["structuredContent"]["tools"])
    assert "AuthorizeSecurityGroupIngress" not in alone
    also = ["AuthorizeSecurityGroupIngress", "allow inbound traffic in a security group"]
    found = hits(cloud.search({**query, "also": also})["structuredContent"]["tools"])
    assert "AuthorizeSecurityGroupIngress" in found
    assert set(alone[:2]) <= set(found)  # the query's own first two stay in the first five
    assert cloud.search(query)["structuredContent"]["tools"][0]["name"] == alone[0]  # kept apart from it


def test_a_search_is_audited_and_a_host_without_it_does_not_know_the_name(cloud: Cloud) -> None:
    assert cloud.search({"query": "list my subnets"})["structuredContent"]["tools"]
    deadline = time.monotonic() + 5
    rows: list[AuditRecord] = []
    while not rows and time.monotonic() < deadline:
        time.sleep(0.1)
        rows = list(AuditRecord.objects.filter(tenant_slug=cloud.host.tenant.slug))
    assert [(r.backend, r.backend_kind, r.exposed_name, r.outcome, r.method) for r in rows] == [
        ("gateway", "gateway", "tool_search", "ok", "tools/call")]
    virtual_host_tool_search_set(virtual_host=cloud.host, mode="off")
    assert "tool_search" not in [tool["name"] for tool in cloud.tools()]
    refused = cloud.request("tools/call", {"name": "tool_search", "arguments": {"query": "subnets"}})
    assert refused["error"]["code"] == -32602


def test_found_tools_bring_their_prerequisites_in_brief_and_whole_when_expanded(cloud: Cloud) -> None:
    query = {"query": "add an inbound rule to a security group", "k": 1}
    answer = cloud.search(query)["structuredContent"]
    assert [(tool["name"], tool["_meta"]["gateway/prerequisites"]) for tool in answer["tools"]] == [
        ("AuthorizeSecurityGroupIngress", ["CreateVpc", "CreateSecurityGroup"])]
    assert [(p["name"], sorted(p), p["_meta"]["gateway/prerequisiteOf"]) for p in answer["prerequisites"]] == [
        ("CreateVpc", ["_meta", "description", "name"], ["AuthorizeSecurityGroupIngress"]),
        ("CreateSecurityGroup", ["_meta", "description", "name"], ["AuthorizeSecurityGroupIngress"]),
    ]
    assert all("gateway/produces" in p["_meta"] for p in answer["prerequisites"])
    listed = {tool["name"]: tool for tool in cloud.tools()}
    whole = cloud.search({**query, "expand": ["CreateSecurityGroup"]})["structuredContent"]
    assert [tool["name"] for tool in whole["tools"]] == ["AuthorizeSecurityGroupIngress", "CreateSecurityGroup"]
    assert bare(whole["tools"][1]) == listed["CreateSecurityGroup"]
    assert whole["tools"][1]["_meta"]["gateway/prerequisiteOf"] == ["AuthorizeSecurityGroupIngress"]
    assert [p["name"] for p in whole["prerequisites"]] == ["CreateVpc"]


def test_an_mcp_servers_tools_are_found_too(transactional_db: None, indexing_on: None, gateway_url: str,
                                            demo_backend_url: str, recording_service_url: str) -> None:
    cloud = make_cloud(gateway_url, recording_service_url)
    demo = factories.backend_factory(tenant=cloud.host.tenant, name="demo", urls=[demo_backend_url])  # indexed at once
    host = factories.virtual_host_factory(tenant=cloud.host.tenant, mounts={"net": cloud.backend, "demo": demo})
    virtual_host_tool_search_set(virtual_host=host, mode="only")
    url = f"{gateway_url}/mcp/{host.tenant.slug}/{host.slug}"
    found = message_of(modern(url, "tools/call", {"name": "tool_search", "arguments": {"query": "sum of two numbers",
                                                                                        "k": 1}}, key=cloud.key))
    tool = found["result"]["structuredContent"]["tools"][0]
    assert (tool["name"], tool["inputSchema"]["required"]) == ("demo-add", ["a", "b"])
    called = message_of(modern(url, "tools/call", {"name": "demo-add", "arguments": {"a": 2, "b": 3}}, key=cloud.key))
    assert called["result"]["structuredContent"] == {"result": 5.0}
