"""A virtual host's tool curation end to end, through a real gateway (docs/virtual-hosts.md, "Curating a
host's tools"): a hidden tool is exactly like a missing one in both protocol eras — not listed, its
call answered as an unknown tool's — a curated description is what clients see, and an OpenAPI
backend's tools are chosen by their operations' tags."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.types import TextContent

from apps.catalog.curation import tool_override_set, tool_rules_add, tools_hide, tools_show
from apps.catalog.specs import spec_upload
from apps.kernel.curation import ToolRuleSpec
from tests import factories
from tests.backends.specs import as_json, service_spec
from tests.conftest import Host, make_composed_host, make_host, mcp_client
from tests.gateway.helpers import message_of, modern, open_session, post

pytestmark = pytest.mark.slow


def _host_of(host: Host) -> Any:
    from apps.catalog.models import VirtualHost

    return VirtualHost.objects.get(tenant__slug=host.tenant, slug=host.slug)


def _modern_names(host: Host) -> set[str]:
    return {tool["name"] for tool in message_of(modern(host.url, "tools/list", key=host.key))["result"]["tools"]}


def _legacy_call(host: Host, session: str, name: str) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": {"text": "hi"}}}
    return message_of(post(host.url, body, key=host.key,
                           headers={"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}))


@pytest.mark.django_db(transaction=True)
def test_a_hidden_tool_is_exactly_like_a_missing_one(gateway_url: str, demo_backend_url: str) -> None:
    host = make_composed_host(gateway_url, {"a": demo_backend_url, "b": demo_backend_url})
    before = _modern_names(host)
    assert {"a-echo", "b-echo", "a-add"} <= before
    tools_hide(virtual_host=_host_of(host), tools=[("a", "echo")])

    assert _modern_names(host) == before - {"a-echo"}
    # A name no backend of the host has a place for: the gateway's own unknown-tool answer.
    missing = message_of(modern(host.url, "tools/call", {"name": "nope-echo", "arguments": {}}, key=host.key))
    hidden = message_of(modern(host.url, "tools/call", {"name": "a-echo", "arguments": {"text": "hi"}}, key=host.key))
    assert hidden["error"] == {**missing["error"], "message": missing["error"]["message"].replace("nope-echo", "a-echo"),
                               "data": {"name": "a-echo"}}
    # The handshake era, through a session: the same.
    session = open_session(host.url, host.key)
    listed = message_of(post(host.url, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, key=host.key,
                             headers={"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}))
    assert {t["name"] for t in listed["result"]["tools"]} == before - {"a-echo"}
    gone = _legacy_call(host, session, "nope-echo")["error"]
    assert _legacy_call(host, session, "a-echo")["error"] == {
        **gone, "message": gone["message"].replace("nope-echo", "a-echo"), "data": {"name": "a-echo"}}

    shown = tools_show(virtual_host=_host_of(host), tools=[("a", "echo")])
    assert shown.removed == 1 and not shown.still_hidden
    assert _modern_names(host) == before


@pytest.mark.django_db(transaction=True)
def test_a_single_backend_host_refuses_a_hidden_tool_as_unknown(gateway_url: str, demo_backend_url: str) -> None:
    # One backend: names pass through to it, and it answers a name it lacks itself; a hidden name the
    # gateway answers with the protocol's unknown-tool error, without asking the backend.
    host = make_host(gateway_url, demo_backend_url)
    tools_hide(virtual_host=_host_of(host), tools=[("demo", "echo")])
    assert "echo" not in _modern_names(host) and "add" in _modern_names(host)
    hidden = message_of(modern(host.url, "tools/call", {"name": "echo", "arguments": {"text": "hi"}}, key=host.key))
    assert hidden["error"] == {"code": -32602, "message": "Unknown tool: echo", "data": {"name": "echo"}}
    served = message_of(modern(host.url, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}, key=host.key))
    assert served["result"]["content"][0]["text"] == "3.0"


@pytest.mark.django_db(transaction=True)
async def test_the_sdk_client_sees_the_curated_host(gateway_url: str, demo_backend_url: str) -> None:
    from channels.db import database_sync_to_async

    host = await database_sync_to_async(make_composed_host)(gateway_url, {"a": demo_backend_url, "b": demo_backend_url})

    def curate() -> None:
        vhost = _host_of(host)
        tool_rules_add(virtual_host=vhost, rules=[ToolRuleSpec("include", "glob", "*echo"),
                                                  ToolRuleSpec("exclude", "name", "b-echo")])
        tool_override_set(virtual_host=vhost, map_key="a", upstream_name="echo", description="Repeat the text, curated.")

    await database_sync_to_async(curate)()
    async with mcp_client(host.url, host.key) as client:
        listed = await client.list_tools()
        assert [(t.name, t.description) for t in listed.tools] == [("a-echo", "Repeat the text, curated.")]
        result = await client.call_tool("a-echo", {"text": "curated"})
        assert isinstance(result.content[0], TextContent) and "curated" in result.content[0].text
    body = message_of(modern(host.url, "tools/call", {"name": "b-echo", "arguments": {"text": "x"}}, key=host.key))
    assert body["error"]["code"] == -32602 and "b-echo" in body["error"]["message"]


@pytest.mark.django_db(transaction=True)
def test_tags_choose_an_openapi_backends_tools(gateway_url: str, recording_service_url: str) -> None:
    tenant = factories.tenant_factory()
    issued = factories.api_key_factory(tenant=tenant)
    api = factories.openapi_backend_factory(tenant=tenant, base_url=recording_service_url)
    spec = service_spec(security=False)
    for path_item in spec["paths"].values():
        for operation in path_item.values():
            operation["tags"] = ["pets"] if "Pet" in operation["operationId"] else ["other"]
    spec_upload(backend=api, document=as_json(spec), filename="service.json")
    vhost = factories.virtual_host_factory(tenant=tenant, mounts={"api": api})
    tool_rules_add(virtual_host=vhost, rules=[ToolRuleSpec("include", "tag", "pets"),
                                              ToolRuleSpec("exclude", "glob", "delete*")])
    host = Host(f"{gateway_url}/mcp/{tenant.slug}/{vhost.slug}", issued.secret, tenant.slug, vhost.slug)
    names = _modern_names(host)
    pets = {op["operationId"] for item in spec["paths"].values() for op in item.values() if "Pet" in op["operationId"]}
    assert names and all("Pet" in name or "pet" in name for name in names), names
    assert not any(name.startswith("delete") for name in names)
    assert len(names) == len(pets) - sum(p.startswith("delete") for p in pets)
