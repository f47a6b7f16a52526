"""How the pipeline charges budgets, with its ports faked: the cost it asks the limiter to charge
(by the exposed or the upstream name on a multi-backend host with an alias), the -32005 refusal, and
the audit row's cost — charged at admission, so a call whose backend then fails still cost it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

from apps.gateway.pipeline.gateway import GatewaySettings
from apps.gateway.pipeline.ports import Admission
from apps.gateway.pipeline.values import BackendView, VirtualHostView
from apps.kernel.costs import ToolCostSpec, tool_costs_compile
from apps.kernel.identity import Budget, Limit, Principal
from tests.gateway.pipeline.test_gateway import Audit, _request, standalone_gateway

TEAM = Budget(1, "team", "platform", 100, None, daily_plan="starter")
PRINCIPAL = Principal(1, "acme", 1, "agent", "platform", budgets=(TEAM,))
CALC = BackendView(id=1, name="calc", transport="streamable-http", urls=("http://127.0.0.1:1/mcp",), timeout=1)
DOCS = BackendView(id=2, name="docs", transport="streamable-http", urls=("http://127.0.0.1:1/mcp",), timeout=1)
VHOST = VirtualHostView(
    1,
    "acme",
    "main",
    MappingProxyType({"calc": CALC, "docs": DOCS}),
    MappingProxyType({"get-sum": ("calc", "sum")}),
    costs=tool_costs_compile([ToolCostSpec(["get-*"], 5), ToolCostSpec(["echo"], 0), ToolCostSpec(["calc-*"], 2)]),
)


class Tenant:
    issuers = ()
    own_issuer = None

    def virtual_host(self, slug: str) -> VirtualHostView | None:
        return VHOST if slug == "main" else None

    def principal_for_credential(self, credential: str) -> Principal | None:
        return PRINCIPAL

    def principal_for_key(self, key_id: int) -> Principal | None:
        return None


class Directory:
    async def tenant(self, slug: str) -> Tenant | None:
        return Tenant()


class Limiter:
    """Records what it is asked to charge; refuses with `answer` when one is set."""

    def __init__(self, answer: Admission | None = None) -> None:
        self.asked: list[tuple[tuple[Limit, ...], tuple[Budget, ...], int]] = []
        self.answer = answer or Admission()

    async def admit(self, limits: Sequence[Limit], budgets: Sequence[Budget] = (), cost: int = 1) -> Admission:
        self.asked.append((tuple(limits), tuple(budgets), cost))
        return self.answer


async def call(limiter: Limiter, audit: Audit, method: str, params: dict[str, Any]) -> dict[str, Any]:
    gateway = standalone_gateway(
        directory=Directory(), audit=audit, limiter=limiter,
        settings=GatewaySettings(max_body_bytes=10_000, allowed_origins=frozenset(), allowed_hosts=frozenset()),
    )
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    body = {"jsonrpc": "2.0", "id": 5, "method": method, "params": {**params, "_meta": meta}}
    headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": method}
    if "name" in params or "uri" in params:
        headers["mcp-name"] = params.get("name") or params["uri"]
    reply = await gateway.handle(_request(body, **headers))
    return json.loads(reply.body)


async def test_the_cost_follows_the_exposed_or_upstream_name_and_is_charged_before_the_backend_fails() -> None:
    limiter, audit = Limiter(), Audit()
    for name in ("get-sum", "calc-add", "docs-echo", "docs-search"):
        answer = await call(limiter, audit, "tools/call", {"name": name, "arguments": {}})
        assert answer["error"]["code"] == -32004  # admitted, then the backend was unreachable
    await call(limiter, audit, "resources/read", {"uri": "calc-file:///x"})
    # get-sum: its alias (5); calc-add: calc-* (2); docs-echo: upstream `echo` is free, so no budget is
    # asked about (only rate limits would be); docs-search: no entry (1); a read: 1.
    assert [(budgets, cost) for _, budgets, cost in limiter.asked] == [
        ((TEAM,), 5),
        ((TEAM,), 2),
        ((TEAM,), 1),
        ((TEAM,), 1),
    ]
    assert [(e.exposed_name, e.outcome, e.cost) for e in audit.entries] == [
        ("get-sum", "error", 5),
        ("calc-add", "error", 2),
        ("docs-echo", "error", 0),
        ("docs-search", "error", 1),
        ("calc-file:///x", "error", 1),
    ]


async def test_an_exhausted_budget_is_32005_naming_it_and_audited_as_over_budget_with_no_cost() -> None:
    limiter = Limiter(Admission(refused_by=TEAM, retry_after=3600.0004, period="day"))
    audit = Audit()
    answer = await call(limiter, audit, "tools/call", {"name": "get-sum", "arguments": {"a": 1}})
    assert answer["error"]["code"] == -32005
    assert answer["error"]["data"] == {"limit_scope": "team", "retry_after": 3600.001}
    assert answer["error"]["message"] == (
        "Over budget: team 'platform' has spent its daily budget of 100 units (plan 'starter'); this call "
        "costs 5, and it resets at the start of the next UTC day"
    )
    [entry] = audit.entries
    assert (entry.outcome, entry.error_code, entry.cost, entry.limit_state) == ("over_budget", -32005, 0, "limited")


async def test_a_call_costing_more_than_the_whole_cap_says_so() -> None:
    small = Budget(1, "key", "agent", None, 3)
    limiter = Limiter(Admission(refused_by=small, retry_after=10.0, period="month"))
    answer = await call(limiter, Audit(), "tools/call", {"name": "get-sum", "arguments": {}})
    assert answer["error"]["message"] == (
        "Over budget: this call costs 5 units, more than the whole monthly budget of 3 units of key 'agent'"
    )


async def test_with_the_store_unreachable_the_admitted_call_is_marked_unchecked() -> None:
    limiter, audit = Limiter(Admission(checked=False)), Audit()
    await call(limiter, audit, "tools/call", {"name": "calc-add", "arguments": {}})
    [entry] = audit.entries
    assert (entry.limit_state, entry.cost) == ("unchecked", 2)
