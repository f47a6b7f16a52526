"""The TypeScript reference server (`@modelcontextprotocol/server-everything`) as a backend, alone on
a host and beside a Python SDK backend on a composed one, reached by clients on the TypeScript SDK
(v1 and v2, both transports) and on the Python SDK: through a single-backend host every list and
every deterministic result is what the server gives directly; through a composed host the same under
the host's names, and the resource links a tool returns lead back through the gateway."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from channels.db import database_sync_to_async
from django.conf import settings

from apps.audit.models import AuditRecord
from apps.catalog.models import VirtualHost
from apps.kernel.costs import ToolCostSpec
from apps.kernel.policy import RuleSpec
from apps.policies.services import access_policy_set, budget_set, tool_costs_set
from apps.tenants.models import Tenant
from tests import factories
from tests.audit.helpers import audit_rows
from tests.conftest import Host, make_composed_host, make_host, mcp_client
from tests.gateway.helpers import message_of, open_session, post
from tests.interop.node import reference_server, typescript_client
from tests.processes import free_port, gateway_argv, gateway_env, running

pytestmark = pytest.mark.slow

DOCUMENT = "demo://resource/static/document/features.md"
PLAN: dict[str, Any] = {
    "calls": [{"name": "echo", "arguments": {"message": "héllo ✓"}}, {"name": "get-sum", "arguments": {"a": 2, "b": 3}},
              {"name": "get-tiny-image", "arguments": {}}],
    "reads": [DOCUMENT],
    "prompts": [{"name": "simple-prompt", "arguments": {}}, {"name": "args-prompt", "arguments": {"city": "Paris"}}],
}
#: (sdk, transport, negotiation, the revision it speaks through the gateway); directly, the server
#: speaks 2025-11-25 to all (a v2 client probing for 2026-07-28 falls back).
CLIENTS = [
    ("v1", "http", "legacy", "2025-11-25"),
    ("v1", "sse", "legacy", "2025-11-25"),
    ("v2", "http", "legacy", "2025-11-25"),
    ("v2", "http", "auto", "2026-07-28"),
    ("v2", "sse", "auto", "2025-11-25"),
]
IDS = [f"{sdk}-{transport}-{negotiation}" for sdk, transport, negotiation, _ in CLIENTS]


@pytest.fixture(scope="module")
def everything() -> Iterator[str]:
    port = free_port()
    argv, env = reference_server(port)
    with running(argv, port, env=env, log_name="server-everything"):
        yield f"http://127.0.0.1:{port}/mcp"


def _plan(sdk: str, transport: str, negotiation: str, url: str, key: str) -> dict[str, Any]:
    return {**PLAN, "sdk": sdk, "transport": transport, "negotiation": negotiation, "url": url, "key": key}


#: Members a 2026-07-28 client sees that a 2025-11-25 one does not, and the reverse: results' cache
#: hints, and tools' `execution` (tasks are an extension in 2026-07-28, not a member of `Tool`).
ERA_ONLY = {"ttlMs", "cacheScope", "resultType", "execution"}


def _results(seen: dict[str, Any], revision: str = "2025-11-25") -> dict[str, Any]:
    """The lists and results a client saw, without what only one era has when `revision` is the newer one."""
    results = {field: seen[field] for field in ("tools", "resources", "templates", "prompts", "calls", "reads", "gets")}
    return results if revision != "2026-07-28" else _without(results, ERA_ONLY)


def _without(value: Any, members: set[str]) -> Any:
    if isinstance(value, dict):
        return {name: _without(item, members) for name, item in value.items() if name not in members}
    if isinstance(value, list):
        return [_without(item, members) for item in value]
    return value


@pytest.mark.parametrize(("sdk", "transport", "negotiation", "revision"), CLIENTS, ids=IDS)
async def test_a_single_backend_host_is_transparent(
    transactional_db: None, gateway_url: str, everything: str, sdk: str, transport: str, negotiation: str,
    revision: str,
) -> None:
    host = await database_sync_to_async(make_host)(gateway_url, everything)
    direct = await asyncio.to_thread(typescript_client, _plan(sdk, "http", negotiation, everything, "unused"))
    suffix = "/sse" if transport == "sse" else "/mcp"
    through = await asyncio.to_thread(typescript_client, _plan(sdk, transport, negotiation, host.url + suffix, host.key))
    assert (through["protocolVersion"], direct["protocolVersion"]) == (revision, "2025-11-25")
    assert _results(through, revision) == _results(direct, revision)
    assert {tool["name"] for tool in through["tools"]} >= {"echo", "get-sum", "get-resource-links"}
    assert through["calls"][0]["result"]["content"][0]["text"] == "Echo: héllo ✓"


def _renamed(seen: dict[str, Any]) -> dict[str, Any]:
    """The reference server's part of what a client saw on the composed host, under its own names."""
    def plain(name: str) -> str:
        assert name.startswith("ev-"), name
        return name[3:]

    return {
        "tools": [{**tool, "name": plain(tool["name"])} for tool in seen["tools"] if tool["name"].startswith("ev-")],
        "resources": [{**r, "uri": plain(r["uri"]), "name": plain(r["name"])} for r in seen["resources"]
                      if r["uri"].startswith("ev-")],
        "prompts": [{**p, "name": plain(p["name"])} for p in seen["prompts"] if p["name"].startswith("ev-")],
        "calls": [{**call, "name": plain(call["name"])} for call in seen["calls"]],
        "gets": [{**get, "name": plain(get["name"])} for get in seen["gets"]],
    }


@pytest.mark.parametrize(("sdk", "transport", "negotiation", "revision"), CLIENTS, ids=IDS)
async def test_a_composed_host_shows_the_server_under_its_names(
    transactional_db: None, gateway_url: str, everything: str, demo_backend_url: str, sdk: str, transport: str,
    negotiation: str, revision: str,
) -> None:
    host = await database_sync_to_async(make_composed_host)(gateway_url, {"ev": everything, "demo": demo_backend_url})
    direct = await asyncio.to_thread(typescript_client, {**_plan(sdk, "http", negotiation, everything, "unused"),
                                                         "reads": []})
    composed_plan = {
        "calls": [{**call, "name": f"ev-{call['name']}"} for call in PLAN["calls"]],
        "prompts": [{**prompt, "name": f"ev-{prompt['name']}"} for prompt in PLAN["prompts"]],
        "reads": [f"ev-{DOCUMENT}"],
    }
    suffix = "/sse" if transport == "sse" else "/mcp"
    through = await asyncio.to_thread(typescript_client,
                                      {**_plan(sdk, transport, negotiation, host.url + suffix, host.key), **composed_plan})
    assert through["protocolVersion"] == revision
    shown, direct = _renamed(through), _results(direct, revision)
    if revision == "2026-07-28":
        shown = _without(shown, ERA_ONLY)
    assert shown["tools"] == sorted(direct["tools"], key=lambda tool: tool["name"])
    assert shown["resources"] == sorted(direct["resources"], key=lambda resource: resource["uri"])
    assert shown["prompts"] == sorted(direct["prompts"], key=lambda prompt: prompt["name"])
    assert shown["calls"] == direct["calls"] and shown["gets"] == direct["gets"]
    assert {"demo-add", "demo-echo"} <= {tool["name"] for tool in through["tools"]}
    (read,) = through["reads"]
    assert read["result"]["contents"][0]["uri"] == f"ev-{DOCUMENT}"
    assert read["result"]["contents"][0]["text"].startswith("#")


async def test_resource_links_of_a_tool_on_a_composed_host_lead_back_through_it(
    transactional_db: None, gateway_url: str, everything: str, demo_backend_url: str
) -> None:
    host = await database_sync_to_async(make_composed_host)(gateway_url, {"ev": everything, "demo": demo_backend_url})
    async with mcp_client(host.url + "/mcp", host.key, "legacy") as client:
        result = await client.call_tool("ev-get-resource-links", {"count": 2})
        links = [block for block in result.content if block.type == "resource_link"]
        assert len(links) == 2
        for link in links:
            assert str(link.uri).startswith("ev-demo://resource/dynamic/")
            read = await client.read_resource(str(link.uri))
            assert str(read.contents[0].uri) == str(link.uri)


def _in_session(host: Host, key: str | None = None) -> Callable[..., dict[str, Any]]:
    """A raw handshake-era session with the host (as `key`, by default the host's): call(method,
    params) -> the response message."""
    key = key or host.key
    session = open_session(host.url, key)
    headers = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    ids = iter(range(2, 10_000))

    def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
        return message_of(post(host.url, {"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params},
                               key=key, headers=headers))
    return call


def _tool_call_row(host: Host, outcome: str) -> AuditRecord:
    """The audit row of the host's one tools/call, once it has `outcome` (a task's end comes later)."""
    rows = audit_rows(host.tenant, 1, method="tools/call", outcome=outcome)
    assert len(rows) == 1, list(AuditRecord.objects.filter(tenant_slug=host.tenant).values("method", "outcome"))
    return rows[0]


def test_tasks_on_a_composed_host_reach_the_backend_that_runs_them(
    transactional_db: None, gateway_url: str, everything: str, demo_backend_url: str
) -> None:
    """2025-11-25 tasks: the reference server's task-only tool, called as a task through a composed
    host, is followed with tasks/get, tasks/list and tasks/result under an id the host shows; the
    call that created it has one audit row, which ends with the task's outcome."""
    host = make_composed_host(gateway_url, {"ev": everything, "demo": demo_backend_url})
    call = _in_session(host)
    created = call("tools/call", {"name": "ev-simulate-research-query", "arguments": {"topic": "gateways"},
                                  "task": {"ttl": 60_000}})
    task_id = created["result"]["task"]["taskId"]
    assert task_id.startswith("gwt.")
    assert _tool_call_row(host, "working").task_ended_at is None
    status = call("tasks/get", {"taskId": task_id})["result"]
    assert status["taskId"] == task_id and status["status"] in {"working", "completed"}
    assert task_id in [task["taskId"] for task in call("tasks/list", {})["result"]["tasks"]]
    done = call("tasks/result", {"taskId": task_id})["result"]
    assert "gateways" in json.dumps(done["content"])
    assert done["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] == task_id
    assert call("tasks/get", {"taskId": task_id})["result"]["status"] == "completed"
    row = _tool_call_row(host, "ok")
    assert row.task_id and row.task_id not in task_id and row.task_ended_at > row.created_at  # the backend's own id
    other = make_composed_host(gateway_url, {"ev": everything, "demo": demo_backend_url})
    for unknown in (task_id, task_id[:-2] + "AA", "not-one-of-ours"):
        answer = _in_session(other if unknown == task_id else host)("tasks/get", {"taskId": unknown})
        assert answer["error"]["code"] == -32602, unknown


def test_a_task_on_a_single_backend_host_keeps_its_id_and_its_row_ends_with_it(
    transactional_db: None, gateway_url: str, everything: str
) -> None:
    host = make_host(gateway_url, everything)
    call = _in_session(host)
    created = call("tools/call", {"name": "simulate-research-query", "arguments": {"topic": "alone"}, "task": {}})
    task_id = created["result"]["task"]["taskId"]
    assert not task_id.startswith("gwt.")  # passed through
    assert _tool_call_row(host, "working").task_id == task_id
    assert "alone" in json.dumps(call("tasks/result", {"taskId": task_id})["result"]["content"])
    assert _tool_call_row(host, "ok").task_id == task_id


def test_a_single_backend_host_with_a_policy_passes_task_ids_through_too(
    transactional_db: None, gateway_url: str, everything: str
) -> None:
    """A policy makes a host look into its messages, not rename its one backend's tasks."""
    host = make_host(gateway_url, everything)
    access_policy_set(virtual_host=VirtualHost.objects.get(slug=host.slug, tenant__slug=host.tenant),
                      default="allow", rules=[])
    call = _in_session(host)
    created = call("tools/call", {"name": "simulate-research-query", "arguments": {"topic": "policy"}, "task": {}})
    task_id = created["result"]["task"]["taskId"]
    assert not task_id.startswith("gwt.")
    assert call("tasks/get", {"taskId": task_id})["result"]["taskId"] == task_id
    assert task_id in [task["taskId"] for task in call("tasks/list", {})["result"]["tasks"]]
    assert "policy" in json.dumps(call("tasks/result", {"taskId": task_id})["result"]["content"])


def test_a_task_is_its_callers_alone(
    transactional_db: None, gateway_url: str, everything: str, demo_backend_url: str
) -> None:
    """Another key of the same tenant, on the same host, cannot follow or cancel the task."""
    host = make_composed_host(gateway_url, {"ev": everything, "demo": demo_backend_url})
    created = _in_session(host)("tools/call", {"name": "ev-simulate-research-query", "arguments": {"topic": "x"},
                                               "task": {}})
    task_id = created["result"]["task"]["taskId"]
    other_key = factories.api_key_factory(tenant=Tenant.objects.get(slug=host.tenant)).secret
    stranger = _in_session(host, other_key)
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        assert stranger(method, {"taskId": task_id})["error"]["code"] == -32602, method


def test_a_task_on_a_composed_host_can_be_cancelled(
    transactional_db: None, gateway_url: str, everything: str, demo_backend_url: str
) -> None:
    host = make_composed_host(gateway_url, {"ev": everything, "demo": demo_backend_url})
    call = _in_session(host)
    created = call("tools/call", {"name": "ev-simulate-research-query", "arguments": {"topic": "x"}, "task": {}})
    task_id = created["result"]["task"]["taskId"]
    cancelled = call("tasks/cancel", {"taskId": task_id})["result"]
    assert (cancelled["taskId"], cancelled["status"]) == (task_id, "cancelled")
    assert _tool_call_row(host, "cancelled").task_ended_at is not None


def test_a_task_that_needs_the_clients_input_gets_it_through_a_composed_host(
    transactional_db: None, gateway_url: str, everything: str, demo_backend_url: str
) -> None:
    """input_required (2025-11-25): the backend asks for a clarification on the task's
    `tasks/result` stream, naming the task as the host shows it; the client's answer (naming it so
    too) reaches the backend, and the task ends with it."""
    host = make_composed_host(gateway_url, {"ev": everything, "demo": demo_backend_url})
    initialized = post(host.url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "raw", "version": "1"}}}, key=host.key)
    headers = {"mcp-session-id": initialized.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    post(host.url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, key=host.key, headers=headers)

    def call(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        return message_of(post(host.url, body, key=host.key, headers=headers))

    created = call(2, "tools/call", {"name": "ev-simulate-research-query",
                                     "arguments": {"topic": "python", "ambiguous": True}, "task": {}})
    task_id = created["result"]["task"]["taskId"]
    for attempt in range(100):
        if call(3 + attempt, "tasks/get", {"taskId": task_id})["result"]["status"] == "input_required":
            break
        time.sleep(0.1)
    related = {"io.modelcontextprotocol/related-task": {"taskId": task_id}}
    body = {"jsonrpc": "2.0", "id": 200, "method": "tasks/result", "params": {"taskId": task_id}}
    sent = {"content-type": "application/json", "accept": "application/json, text/event-stream",
            "authorization": f"Bearer {host.key}", **headers}
    final = None
    with httpx.stream("POST", host.url, content=json.dumps(body), headers=sent, timeout=30) as stream:
        for line in stream.iter_lines():
            if not line.startswith("data: ") or not line[6:].strip():  # a priming event has no data
                continue
            message = json.loads(line[6:])
            if message.get("method") == "elicitation/create":
                assert message["id"].startswith("gw/ev/")
                assert message["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] == task_id
                answer = {"jsonrpc": "2.0", "id": message["id"], "result": {
                    "action": "accept", "content": {"interpretation": "the snake"}, "_meta": related}}
                assert post(host.url, answer, key=host.key, headers=headers).status_code == 202
            elif message.get("id") == 200:
                final = message
                break
    assert final is not None and "the snake" in json.dumps(final["result"]["content"])
    assert _tool_call_row(host, "ok").task_id


@pytest.fixture(scope="module")
def small_pages_gateway(django_db_setup: None, django_db_blocker: object) -> Iterator[str]:
    """A gateway of the same deployment whose lists hold two entries a page."""
    port = free_port()
    env = gateway_env(settings.DATABASES["default"]["NAME"], settings.REDIS_URL, GATEWAY_INSTANCE_ID="gw-small-pages",
                      GATEWAY_LIST_PAGE_SIZE="2")
    with running(gateway_argv(port), port, env=env, log_name="gateway-small-pages"):
        yield f"http://127.0.0.1:{port}"


def test_the_tasks_of_every_backend_are_listed_in_pages(
    transactional_db: None, small_pages_gateway: str, everything: str
) -> None:
    """`tasks/list` on a host with two task-running backends: every task once, in pages of at most
    the host's page size, one backend after the other, under the ids the host showed."""
    host = make_composed_host(small_pages_gateway, {"ev": everything, "ev2": everything})
    call = _in_session(host)
    created = [call("tools/call", {"name": f"{key}-simulate-research-query", "arguments": {"topic": str(n)},
                                   "task": {}})["result"]["task"]["taskId"]
               for key, n in (("ev", 1), ("ev", 2), ("ev", 3), ("ev2", 4), ("ev2", 5))]
    listed: list[str] = []
    cursor = None
    for _ in range(20):
        result = call("tasks/list", {} if cursor is None else {"cursor": cursor})["result"]
        assert len(result["tasks"]) <= 2
        listed.extend(task["taskId"] for task in result["tasks"])
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    mine = [task_id for task_id in listed if task_id in created]
    assert sorted(mine) == sorted(created) and len(listed) == len(set(listed))
    assert call("tasks/list", {"cursor": "not-ours"})["error"]["code"] == -32602


def test_a_task_is_a_call_the_access_rules_decide_and_its_budget_pays_once(
    transactional_db: None, gateway_url: str, everything: str, demo_backend_url: str
) -> None:
    """Creating a task is a `tools/call`: the host's rules decide it with its arguments, and it is
    charged when admitted; following it (tasks/get, tasks/result) costs nothing."""
    tenant = factories.tenant_factory()
    issued = factories.api_key_factory(tenant=tenant, name="agent")
    mounts = {key: factories.backend_factory(tenant=tenant, name=key, urls=[url])
              for key, url in (("ev", everything), ("demo", demo_backend_url))}
    vhost = factories.virtual_host_factory(tenant=tenant, mounts=mounts)
    access_policy_set(virtual_host=vhost, default="allow", rules=[
        RuleSpec("no-secrets", "tenant", tenant.slug, "deny", ["ev-simulate-research-query"], 'arguments.topic == "secret"')])
    tool_costs_set(virtual_host=vhost, costs=[ToolCostSpec(["ev-simulate-research-query"], 2)])
    budget_set(tenant=tenant, scope="key", name="agent", daily=3, monthly=None)
    host = Host(f"{gateway_url}/mcp/{tenant.slug}/{vhost.slug}", issued.secret, tenant.slug, vhost.slug)
    call = _in_session(host)

    def research(topic: str) -> dict[str, Any]:
        return call("tools/call", {"name": "ev-simulate-research-query", "arguments": {"topic": topic}, "task": {}})

    assert research("secret")["error"]["code"] == -32003
    task_id = research("open")["result"]["task"]["taskId"]
    for _ in range(3):
        call("tasks/get", {"taskId": task_id})
    assert "open" in json.dumps(call("tasks/result", {"taskId": task_id})["result"]["content"])
    assert research("more")["error"]["code"] == -32005  # 2 of 3 units spent: the polls cost nothing
    assert _tool_call_row(host, "ok").cost == 2  # once the task's end is written
    rows = audit_rows(host.tenant, 3, method="tools/call")
    assert [(row.outcome, row.cost) for row in rows] == [("denied", 0), ("ok", 2), ("over_budget", 0)]
