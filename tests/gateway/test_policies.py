"""Tool access control end to end (docs/policies.md): the pitfalls seen in other gateways, through the
official SDK client and raw JSON-RPC, on single- and multi-backend virtual hosts."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest
from channels.db import database_sync_to_async
from mcp.shared.exceptions import MCPError

from apps.kernel.policy import RuleSpec
from apps.policies.services import access_policy_set
from tests import factories
from tests.audit.helpers import audit_rows
from tests.conftest import Host, mcp_client
from tests.gateway.helpers import message_of, modern

pytestmark = pytest.mark.slow


THIS_TENANT = "<this tenant>"  # a rule subject filled in with the test's own tenant


def make_host(gateway_url: str, demo_backend_url: str, mounts: tuple[str, ...], default: str,
              rules: list[RuleSpec]) -> Host:
    """A tenant with team `platform` and its key `agent`, a host mounting the demo server under
    each of `mounts`, and the given policy."""
    tenant = factories.tenant_factory()
    team = factories.team_factory(tenant=tenant, slug="platform")
    issued = factories.api_key_factory(tenant=tenant, name="agent", team=team)
    backends = {key: factories.backend_factory(tenant=tenant, urls=[demo_backend_url]) for key in mounts}
    host = factories.virtual_host_factory(tenant=tenant, mounts=backends)
    rules = [replace(r, subject_name=tenant.slug) if r.subject_name == THIS_TENANT else r for r in rules]
    access_policy_set(virtual_host=host, default=default, rules=rules)
    return Host(f"{gateway_url}/mcp/{tenant.slug}/{host.slug}", issued.secret, tenant.slug, host.slug)


SUM_A1_ONLY = [RuleSpec("sum-a1-only", "team", "platform", "allow", ["add"], "arguments.a == 1")]


def call(host: Host, name: str, arguments: dict[str, Any]) -> Any:
    response = modern(host.url, "tools/call", {"name": name, "arguments": arguments}, key=host.key)
    assert response.status_code == 200  # a decision is a JSON-RPC answer, never a bare 403
    return message_of(response)


def tool_names(host: Host) -> list[str]:
    return [tool["name"] for tool in message_of(modern(host.url, "tools/list", key=host.key))["result"]["tools"]]


def test_an_argument_condition_allows_a1_denies_a2_and_keeps_the_tool_listed(
    transactional_db: None, gateway_url: str, demo_backend_url: str
) -> None:
    host = make_host(gateway_url, demo_backend_url, ("demo",), "deny", SUM_A1_ONLY)
    assert tool_names(host) == ["add"]  # default deny: only what a rule could allow
    assert call(host, "add", {"a": 1, "b": 2})["result"]["content"][0]["text"] == "3.0"
    denied = call(host, "add", {"a": 2, "b": 2})["error"]
    assert denied["code"] == -32003 and denied["data"] == {"rule": None}
    assert "denied by default" in denied["message"]


def test_a_hidden_tool_answers_exactly_like_a_missing_one(
    transactional_db: None, gateway_url: str, demo_backend_url: str
) -> None:
    host = make_host(gateway_url, demo_backend_url, ("demo",), "deny", SUM_A1_ONLY)
    hidden = call(host, "echo", {"text": "x"})["error"]
    missing = call(host, "no_such_tool", {})["error"]
    assert hidden == {**missing, "message": missing["message"].replace("no_such_tool", "echo"),
                      "data": {"name": "echo"}}
    assert hidden["code"] == -32602


def test_rules_naming_the_upstream_or_the_exposed_name_both_match(
    transactional_db: None, gateway_url: str, demo_backend_url: str
) -> None:
    rules = [RuleSpec("no-add", "tenant", THIS_TENANT, "deny", ["add"]),
             RuleSpec("no-echo", "key", "agent", "deny", ["one-echo"])]
    host = make_host(gateway_url, demo_backend_url, ("one", "two"), "allow", rules)
    names = tool_names(host)
    assert "one-add" not in names and "two-add" not in names  # upstream name `add`: both backends
    assert "one-echo" not in names and "two-echo" in names  # exposed name `one-echo`: that one only
    assert call(host, "two-echo", {"text": "hi"})["result"]["content"][0]["text"] == "hi"
    assert call(host, "one-add", {"a": 1, "b": 1})["error"]["code"] == -32602  # hidden: unknown


async def test_the_sdk_client_gets_a_json_rpc_error_with_the_rule(
    transactional_db: None, gateway_url: str, demo_backend_url: str
) -> None:
    rules = [RuleSpec("all", "tenant", THIS_TENANT, "allow", ["*"]),
             RuleSpec("no-big", "team", "platform", "deny", ["add"], "arguments.a > 100")]
    host = await database_sync_to_async(make_host)(gateway_url, demo_backend_url, ("demo",), "deny", rules)
    for mode in ("legacy", "2026-07-28"):
        async with mcp_client(host.url, host.key, mode) as client:
            assert "add" in {tool.name for tool in (await client.list_tools()).tools}
            assert (await client.call_tool("add", {"a": 1, "b": 2})).content[0].text == "3.0"
            with pytest.raises(MCPError) as raised:
                await client.call_tool("add", {"a": 101, "b": 2})
            assert raised.value.error.code == -32003
            assert raised.value.error.data == {"rule": "no-big"}

    rows = await database_sync_to_async(audit_rows)(host.tenant, 4, method="tools/call")
    found = [(r.outcome, r.rule, r.exposed_name) for r in rows]
    assert found == [("ok", "all", "add"), ("denied", "no-big", "add")] * 2


def test_a_rule_can_read_the_keys_scopes(transactional_db: None, gateway_url: str, demo_backend_url: str) -> None:
    from apps.tenants.models import ApiKey
    from apps.tenants.services import api_key_update

    rules = [RuleSpec("writers", "tenant", THIS_TENANT, "allow", ["add"], '"tools:write" in principal.scopes')]
    host = make_host(gateway_url, demo_backend_url, ("demo",), "deny", rules)
    assert call(host, "add", {"a": 1, "b": 1})["error"]["code"] == -32602  # hidden: the key lacks the scope
    key = ApiKey.objects.get(tenant__slug=host.tenant, name="agent")
    api_key_update(api_key=key, team=key.team, expires_at=None, scopes=["tools:write"])
    deadline = time.monotonic() + 5
    while "error" in (answer := call(host, "add", {"a": 1, "b": 1})) and time.monotonic() < deadline:
        time.sleep(0.1)  # the new snapshot arrives within the check interval
    assert answer["result"]["content"][0]["text"] == "2.0"
