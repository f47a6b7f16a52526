"""`ToolSearch` (pure): what the index is asked for a caller's view of a host, how its answer is shown,
and the answers it keeps — with a fake index and fake backends."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import orjson
import pytest

from apps.gateway.pipeline.listing import PageLimits
from apps.gateway.pipeline.metrics import Counters
from apps.gateway.pipeline.standalone import NoFinder
from apps.gateway.pipeline.tool_search import ToolSearch
from apps.gateway.pipeline.values import ToolSearchConfig, VirtualHostView
from apps.kernel.curation import Curation, ToolRuleSpec
from apps.kernel.policy import RuleSpec, policy_compile
from apps.kernel.search_tool import Found, IdNeed
from tests.gateway.pipeline.test_gateway import PRINCIPAL
from tests.gateway.pipeline.test_host_lists import Clock, FakeClient, backend, make


def wire(result: dict) -> dict:
    """A result as the client reads it (answers hold parts already encoded)."""
    return orjson.loads(orjson.dumps(result))


class FakeIndex:
    """Answers with a fixed ranking, keeping only what the caller's view allows (as the SQL does)."""

    def __init__(self, ranking: list[tuple[int, str]],
                 prerequisites: dict[tuple[int, str], tuple[tuple[int, str], ...]] | None = None,
                 needs: dict[tuple[int, str], tuple[IdNeed, ...]] | None = None) -> None:
        self.ranking = ranking
        self.prerequisites = prerequisites or {}
        self.needs = needs or {}
        self.asked: list[dict[str, Any]] = []

    async def find(self, *, tenant_id: int, backends: Sequence[int], restricted: Sequence[tuple[int, Sequence[str]]],
                   query: str, k: int, also: Sequence[str] = ()) -> Found:
        self.asked.append({"backends": tuple(backends), "restricted": tuple(restricted), "query": query, "k": k,
                           "also": tuple(also)})
        allowed = dict(restricted)
        return Found([(b, n) for b, n in self.ranking if b in backends or n in allowed.get(b, ())][:k],
                     self.prerequisites, self.needs)


def vhost(mounts: dict[str, int], *, policy: Any = None, aliases: dict[str, tuple[str, str]] | None = None,
          only: bool = False) -> VirtualHostView:
    return VirtualHostView(1, "acme", "main", MappingProxyType({k: backend(b) for k, b in mounts.items()}),
                           MappingProxyType(aliases or {}), policy=policy, tool_search=ToolSearchConfig(only=only))


@pytest.fixture
def client() -> FakeClient:
    client = FakeClient()
    client.tools = {1: ["DescribeVpcs", "CreateVpc", "DeleteVpc"], 2: ["SendMessage"]}
    return client


async def test_a_whole_backend_is_searched_whole_and_answers_carry_exposed_names(client: FakeClient) -> None:
    lists, _ = make(client, Clock())
    index = FakeIndex([(2, "SendMessage"), (1, "CreateVpc"), (1, "DescribeVpcs")])
    search = ToolSearch(lists, index)
    result = await search.result(vhost({"net": 1, "mq": 2}), PRINCIPAL, {"query": " create   a vpc ", "k": 2})
    assert index.asked == [{"backends": (1, 2), "restricted": (), "query": " create   a vpc ", "k": 2, "also": ()}]
    assert [tool["name"] for tool in wire(result)["structuredContent"]["tools"]] == ["mq-SendMessage", "net-CreateVpc"]
    assert orjson.loads(wire(result)["content"][0]["text"]) == wire(result)["structuredContent"]


async def test_a_policy_narrows_the_search_to_the_names_the_caller_sees(client: FakeClient) -> None:
    lists, _ = make(client, Clock())
    index = FakeIndex([(1, "DeleteVpc"), (2, "SendMessage"), (1, "CreateVpc")])
    policy = policy_compile("allow", [RuleSpec("no-delete", "tenant", "acme", "deny", ["*Delete*"]),
                                      RuleSpec("small", "tenant", "acme", "allow", ["*Create*"], "arguments.n < 3")])
    host = vhost({"net": 1, "mq": 2}, policy=policy)
    result = await ToolSearch(lists, index).result(host, PRINCIPAL, {"query": "vpc"})
    assert index.asked[0]["backends"] == (2,)
    assert index.asked[0]["restricted"] == ((1, ("CreateVpc", "DescribeVpcs")),)
    assert [tool["name"] for tool in wire(result)["structuredContent"]["tools"]] == ["mq-SendMessage", "net-CreateVpc"]


async def test_an_aliased_tool_is_shown_under_its_alias(client: FakeClient) -> None:
    lists, _ = make(client, Clock())
    index = FakeIndex([(1, "CreateVpc")])
    host = vhost({"net": 1}, aliases={"make_network": ("net", "CreateVpc")})
    result = await ToolSearch(lists, index).result(host, PRINCIPAL, {"query": "vpc"})
    assert [tool["name"] for tool in wire(result)["structuredContent"]["tools"]] == ["make_network"]
    assert (index.asked[0]["backends"], index.asked[0]["restricted"]) == ((1,), ())  # every tool still shown


async def test_a_tool_the_host_does_not_serve_is_never_found(client: FakeClient) -> None:
    lists, _ = make(client, Clock())
    index = FakeIndex([(1, "DeleteVpc"), (1, "CreateVpc"), (1, "DescribeVpcs")])
    curation = Curation.build([ToolRuleSpec("exclude", "glob", "Delete*")], map_keys=["net"],
                              descriptions={("net", "CreateVpc"): "Make a network, curated."})
    host = VirtualHostView(1, "acme", "main", MappingProxyType({"net": backend(1)}), MappingProxyType({}),
                           curation=curation, tool_search=ToolSearchConfig())
    result = wire(await ToolSearch(lists, index).result(host, PRINCIPAL, {"query": "vpc"}))
    assert index.asked[0]["restricted"] == ((1, ("CreateVpc", "DescribeVpcs")),)  # the index is not asked for it
    tools = result["structuredContent"]["tools"]
    assert [tool["name"] for tool in tools] == ["CreateVpc", "DescribeVpcs"]
    assert tools[0]["description"] == "Make a network, curated."


async def test_answers_are_kept_per_host_snapshot_view_query_and_k(client: FakeClient) -> None:
    lists, _ = make(client, Clock())
    index = FakeIndex([(1, "CreateVpc")])
    search = ToolSearch(lists, index)
    host = vhost({"net": 1})
    first = await search.result(host, PRINCIPAL, {"query": "create vpc"})
    assert await search.result(host, PRINCIPAL, {"query": " create  vpc"}) == first
    assert len(index.asked) == 1
    await search.result(host, PRINCIPAL, {"query": "create vpc", "k": 3})
    await search.result(replace(host), PRINCIPAL, {"query": "create vpc"})  # a new configuration snapshot
    assert len(index.asked) == 3


async def test_answers_are_kept_per_alternative_phrasings(client: FakeClient) -> None:
    lists, _ = make(client, Clock())
    index = FakeIndex([(1, "CreateVpc")])
    search = ToolSearch(lists, index)
    host = vhost({"net": 1})
    await search.result(host, PRINCIPAL, {"query": "create vpc"})
    await search.result(host, PRINCIPAL, {"query": "create vpc", "also": ["CreateVpc"]})
    await search.result(host, PRINCIPAL, {"query": "create vpc", "also": [" CreateVpc "]})  # the same phrasing
    await search.result(host, PRINCIPAL, {"query": "create vpc", "also": ["CreateVpc", "new network"]})
    assert [asked["also"] for asked in index.asked] == [(), ("CreateVpc",), ("CreateVpc", "new network")]


@pytest.mark.parametrize(("also", "message"), [
    ("CreateVpc", "'also' must be a list of 1 to 3"),
    ([], "'also' must be a list of 1 to 3"),
    (["a", "b", "c", "d"], "'also' must be a list of 1 to 3"),
    (["fine", "  "], "'also'[1] must be a non-empty string"),
    ([3], "'also'[0] must be a non-empty string"),
    (["x" * 201], "'also'[0] is 201 characters long; at most 200"),
])
async def test_bad_also_is_a_tool_error(client: FakeClient, also: object, message: str) -> None:
    lists, _ = make(client, Clock())
    index = FakeIndex([(1, "CreateVpc")])
    result = await ToolSearch(lists, index).result(vhost({"net": 1}), PRINCIPAL, {"query": "vpc", "also": also})
    assert result["isError"] is True
    assert message in result["content"][0]["text"]
    assert index.asked == []


async def test_answers_are_kept_within_a_byte_budget(client: FakeClient) -> None:
    lists, _ = make(client, Clock())
    counters = Counters()
    search = ToolSearch(lists, FakeIndex([(1, "CreateVpc")]), counters)
    host = vhost({"net": 1})

    def misses() -> int:
        return counters.value("cache", cache="tool_search", result="miss")

    one = len(orjson.dumps(await search.result(host, PRINCIPAL, {"query": "q0"})))
    search._ANSWERS_MAX_BYTES = 2 * one  # room for two answers (each holds its tools twice)
    for n in range(1, 4):
        await search.result(host, PRINCIPAL, {"query": f"q{n}"})
    built = misses()
    await search.result(host, PRINCIPAL, {"query": "q3"})
    assert misses() == built  # kept
    await search.result(host, PRINCIPAL, {"query": "q1"})
    assert misses() == built + 1  # dropped to stay in the budget


async def test_without_an_index_a_search_is_unavailable(client: FakeClient) -> None:
    from apps.gateway.pipeline.ports import UpstreamUnavailable

    lists, _ = make(client, Clock())
    with pytest.raises(UpstreamUnavailable):
        await ToolSearch(lists, NoFinder()).result(vhost({"net": 1}), PRINCIPAL, {"query": "vpc"})
    # Bad arguments are still the caller's to fix.
    assert (await ToolSearch(lists, NoFinder()).result(vhost({"net": 1}), PRINCIPAL, {"query": ""}))["isError"] is True


async def test_the_list_leads_with_tool_search_or_holds_it_alone(client: FakeClient) -> None:
    lists, _ = make(client, Clock(), pages=PageLimits(items=2))
    result = await lists.result(vhost({"net": 1}), PRINCIPAL, "tools/list", {}, modern=False)
    first = orjson.loads(orjson.dumps(result["tools"]))
    assert [tool["name"] for tool in first] == ["tool_search", "CreateVpc"]  # two entries a page, it included
    second = await lists.result(vhost({"net": 1}), PRINCIPAL, "tools/list", {"cursor": result["nextCursor"]}, modern=False)
    assert [tool["name"] for tool in orjson.loads(orjson.dumps(second["tools"]))] == ["DeleteVpc", "DescribeVpcs"]
    alone = await lists.result(vhost({"net": 1}, only=True), PRINCIPAL, "tools/list", {}, modern=True)
    assert [tool["name"] for tool in alone["tools"]] == ["tool_search"] and "nextCursor" not in alone
    assert alone["resultType"] == "complete"


async def test_listing_a_host_s_tool_search_tells_the_index_to_get_ready(client: FakeClient) -> None:
    told: list[None] = []
    lists, _ = make(client, Clock(), search_listed=lambda: told.append(None))
    await lists.result(vhost({"net": 1}), PRINCIPAL, "tools/list", {}, modern=True)
    assert len(told) == 1
    plain = replace(vhost({"net": 1}), tool_search=None)
    await lists.result(plain, PRINCIPAL, "tools/list", {}, modern=True)
    await lists.result(vhost({"net": 1}), PRINCIPAL, "resources/list", {}, modern=True)
    assert len(told) == 1  # no search tool shown: nothing to get ready for


async def test_prerequisites_follow_the_hits_in_dependency_order_and_hidden_ones_are_never_named(
    client: FakeClient,
) -> None:
    client.tools = {1: ["CreateVpc", "CreateSubnet", "RunInstances", "StopInstances", "CreateKeyPair"]}
    lists, _ = make(client, Clock())
    chains = {
        (1, "StopInstances"): ((1, "CreateVpc"), (1, "CreateSubnet"), (1, "RunInstances")),
        (1, "RunInstances"): ((1, "CreateVpc"), (1, "CreateSubnet"), (1, "CreateKeyPair")),
        (1, "CreateSubnet"): ((1, "CreateVpc"),),
    }
    needs = {(1, "StopInstances"): (IdNeed("InstanceIds", (1, "RunInstances"), (1, "DescribeInstances")),),
             (1, "RunInstances"): (IdNeed("KeyName", (1, "CreateKeyPair"), None),
                                   IdNeed("SubnetId", (1, "CreateSubnet"), None))}
    index = FakeIndex([(1, "StopInstances"), (1, "CreateSubnet")], chains, needs)
    policy = policy_compile("allow", [RuleSpec("no-keys", "tenant", "acme", "deny", ["CreateKeyPair"])])
    result = await ToolSearch(lists, index).result(vhost({"net": 1}, policy=policy), PRINCIPAL, {"query": "stop", "k": 2})
    answer = wire(result)["structuredContent"]
    assert [(t["name"], t["_meta"]) for t in answer["tools"]] == [
        ("StopInstances", {"gateway/prerequisites": ["CreateVpc", "CreateSubnet", "RunInstances"]}),
        ("CreateSubnet", {"gateway/prerequisites": ["CreateVpc"]}),
    ]  # DescribeInstances is not on this host: no lookup is named
    assert answer["prerequisites"] == [
        {"name": "CreateVpc", "description": "",
         "_meta": {"gateway/prerequisiteOf": ["StopInstances", "CreateSubnet"], "gateway/produces": {}}},
        {"name": "RunInstances", "description": "",
         "_meta": {"gateway/prerequisiteOf": ["StopInstances"], "gateway/produces": {"StopInstances": ["InstanceIds"]}}},
    ]
    expanded = wire(await ToolSearch(lists, index).result(vhost({"net": 1}, policy=policy), PRINCIPAL,
                                                          {"query": "stop", "k": 2, "expand": ["RunInstances"]}))
    tools = expanded["structuredContent"]["tools"]
    assert [t["name"] for t in tools] == ["StopInstances", "CreateSubnet", "RunInstances"]
    assert tools[2] == {"name": "RunInstances", "inputSchema": {"type": "object"}, "_meta": {
        "gateway/prerequisites": ["CreateVpc", "CreateSubnet"], "gateway/prerequisiteOf": ["StopInstances"],
        "gateway/produces": {"StopInstances": ["InstanceIds"]}}}
    assert [p["name"] for p in expanded["structuredContent"]["prerequisites"]] == ["CreateVpc"]


async def test_a_lookup_the_caller_sees_is_named_beside_the_id(client: FakeClient) -> None:
    client.tools = {1: ["StopInstances", "DescribeInstances"]}
    lists, _ = make(client, Clock())
    needs = {(1, "StopInstances"): (IdNeed("InstanceIds", None, (1, "DescribeInstances")),)}
    index = FakeIndex([(1, "StopInstances")], {}, needs)
    result = wire(await ToolSearch(lists, index).result(vhost({"net": 1}), PRINCIPAL, {"query": "stop", "k": 1}))
    assert result["structuredContent"]["tools"][0]["_meta"] == {
        "gateway/prerequisites": [], "gateway/lookups": {"InstanceIds": "DescribeInstances"}}


@pytest.mark.parametrize(("expand", "message"), [
    ("CreateVpc", "'expand' must be a list of tool names"),
    (None, "'expand' must be a list of tool names"),  # as the input schema says
    ([3], "'expand' must be a list of tool names"),
    ([""], "'expand' must be a list of tool names"),
    (["x" * 1001], "'expand' must be a list of tool names"),
    (["a", "b", "c", "d", "e", "f"], "'expand' names 6 tools; at most 5"),
    (["DeleteVpc"], "'expand' names tools this answer does not hold: DeleteVpc"),
])
async def test_bad_expand_is_a_tool_error(client: FakeClient, expand: object, message: str) -> None:
    lists, _ = make(client, Clock())
    index = FakeIndex([(1, "CreateVpc")])
    result = await ToolSearch(lists, index).result(vhost({"net": 1}), PRINCIPAL,
                                                   {"query": "vpc", "k": 1, "expand": expand})
    assert result["isError"] is True and message in result["content"][0]["text"]


async def test_answers_are_kept_per_expand_and_expanding_searches_no_more(client: FakeClient) -> None:
    client.tools = {1: ["CreateVpc", "CreateSubnet", "DeleteSubnet"]}
    lists, _ = make(client, Clock())
    chains = {(1, "DeleteSubnet"): ((1, "CreateVpc"), (1, "CreateSubnet"))}
    index = FakeIndex([(1, "DeleteSubnet")], chains)
    search = ToolSearch(lists, index)
    host = vhost({"net": 1})
    brief = wire(await search.result(host, PRINCIPAL, {"query": "subnet"}))["structuredContent"]
    whole = wire(await search.result(host, PRINCIPAL, {"query": "subnet", "expand": ["CreateSubnet", "CreateVpc"]}))
    again = wire(await search.result(host, PRINCIPAL, {"query": "subnet", "expand": ["CreateVpc", "CreateSubnet"]}))
    assert [p["name"] for p in brief["prerequisites"]] == ["CreateVpc", "CreateSubnet"]
    assert [t["name"] for t in whole["structuredContent"]["tools"]] == ["DeleteSubnet", "CreateVpc", "CreateSubnet"]
    assert again == whole
    assert len(index.asked) == 1  # one search: expanding builds another answer from the same finding
    await search.result(host, PRINCIPAL, {"query": "subnet", "k": 3, "expand": ["CreateVpc"]})
    assert len(index.asked) == 2  # another k is another search
