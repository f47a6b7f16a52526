"""`Gateway.call_as`: a request by a caller known already (the console's tool tester) walks the
path of every call — the access policy, the audit row — and the row says who ran it from the console."""

from __future__ import annotations

import json
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from apps.gateway.pipeline.values import BackendView, VirtualHostView
from apps.gateway.protocol.jsonrpc import classify
from apps.kernel.policy import Policy, RuleSpec, policy_compile
from tests.gateway.pipeline.test_gateway import PRINCIPAL, Audit, standalone_gateway
from tests.gateway.pipeline.test_local import FakeTools

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def _host(server: FakeTools, policy: Policy | None = None) -> VirtualHostView:
    backend = BackendView(id=3, name="rest", transport="", urls=(), timeout=2, kind="openapi", server=server)
    return VirtualHostView(1, "acme", "main", MappingProxyType({"rest": backend}), MappingProxyType({}), policy=policy)


def _call(name: str, arguments: dict[str, Any]) -> Any:
    return classify({"jsonrpc": "2.0", "id": "console-1", "method": "tools/call",
                     "params": {"name": name, "arguments": arguments, "_meta": META}})


async def test_a_call_is_answered_and_audited_as_made_from_the_console() -> None:
    audit, server = Audit(), FakeTools()
    principal = replace(PRINCIPAL, console_user="alice")
    reply = await standalone_gateway(audit=audit).call_as(
        _host(server), principal, _call("add", {"a": 1}), headers={"traceparent": f"00-{TRACE_ID}-b7ad6b7169203331-01"})
    message = json.loads(reply.body)
    assert reply.status == 200 and message["id"] == "console-1"
    assert message["result"]["content"] == [{"type": "text", "text": "3"}]
    assert server.calls[0][:2] == ("add", {"a": 1})
    [entry] = audit.entries
    assert (entry.origin, entry.principal.console_user, entry.outcome) == ("console", "alice", "ok")
    assert (entry.trace_id, entry.api_key_id) == (TRACE_ID, PRINCIPAL.key_id)


async def test_an_mcp_clients_call_is_audited_with_origin_mcp() -> None:
    audit = Audit()
    await standalone_gateway(audit=audit).call_as(_host(FakeTools()), PRINCIPAL, _call("add", {}))
    [entry] = audit.entries
    assert (entry.origin, entry.principal.console_user) == ("mcp", "")


async def test_the_access_policy_refuses_the_caller_naming_the_rule() -> None:
    audit, server = Audit(), FakeTools()
    # (a rule that holds whatever the arguments hides the tool instead: -32602, as for a missing one)
    policy = policy_compile("allow", [RuleSpec("no-agent", "key", "agent", "deny", ["add"], "arguments.a == 2")])
    reply = await standalone_gateway(audit=audit).call_as(
        _host(server, policy), replace(PRINCIPAL, console_user="alice"), _call("add", {"a": 2}))
    error = json.loads(reply.body)["error"]
    assert error["code"] == -32003 and error["data"] == {"rule": "no-agent"}
    assert server.calls == []
    [entry] = audit.entries
    assert (entry.outcome, entry.rule, entry.origin) == ("denied", "no-agent", "console")


async def test_a_request_over_the_body_limit_is_refused_before_anything_runs() -> None:
    audit, server = Audit(), FakeTools()
    reply = await standalone_gateway(audit=audit).call_as(_host(server), PRINCIPAL, _call("add", {"text": "x" * 2000}))
    error = json.loads(reply.body)["error"]
    assert error["code"] == -32600 and "the limit is 1000" in error["message"]
    assert (server.calls, audit.entries) == ([], [])
