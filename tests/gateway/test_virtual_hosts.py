"""Virtual hosts with several backends, end to end through the official SDK client (docs/virtual-hosts.md):
an MCP server of each era, a paginating one, an OpenAPI service, one that is down and one that is
too slow, under map keys that contain `-` (`gateway` and `gateway-one`), with aliases."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import pytest
from channels.db import database_sync_to_async
from django.conf import settings
from mcp.types import CreateMessageResult, PromptReference, TextContent

from apps.catalog.specs import spec_upload
from tests import factories
from tests.audit.helpers import audit_rows
from tests.backends.specs import as_json, service_spec
from tests.conftest import mcp_client
from tests.gateway.helpers import message_of, modern, open_session, post
from tests.processes import backend_argv, free_port, gateway_argv, gateway_env, running

pytestmark = pytest.mark.slow

PAGE_SIZE = 7  # the gateway's downstream page size here: several pages for every client


@dataclass(frozen=True)
class Backends:
    modern_demo: str  # the demo server, 2026-07-28 only
    fixture: str  # the conformance fixture, both eras: sampling, subscriptions, list changes
    paging: str  # handshake era only, lists in pages of 2
    slow: str  # like paging, but every list takes 30 s
    down: str  # nothing listens here
    gateway: str  # a gateway with a small page size and a 2 s list timeout


@pytest.fixture(scope="module")
def backends(django_db_setup: None, django_db_blocker: object) -> Iterator[Backends]:
    ports = [free_port() for _ in range(5)]
    env = gateway_env(settings.DATABASES["default"]["NAME"], settings.REDIS_URL, GATEWAY_INSTANCE_ID="gw-vhosts",
                      GATEWAY_LIST_PAGE_SIZE=str(PAGE_SIZE), GATEWAY_LIST_TIMEOUT_SECONDS="2")
    with (
        running(backend_argv("tests.backends.era_server", ports[0]) + ["--era", "modern"], ports[0], log_name="vh-modern"),
        running(backend_argv("tests.backends.conformance_server", ports[1]), ports[1], log_name="vh-fixture"),
        running(backend_argv("tests.backends.paging_server", ports[2]), ports[2], log_name="vh-paging"),
        running(backend_argv("tests.backends.paging_server", ports[3]) + ["--delay", "30"], ports[3], log_name="vh-slow"),
        running(gateway_argv(ports[4]), ports[4], env=env, log_name="gateway-vhosts"),
    ):
        yield Backends(
            *(f"http://127.0.0.1:{port}/mcp" for port in ports[:4]), f"http://127.0.0.1:{free_port()}/mcp",
            f"http://127.0.0.1:{ports[4]}",
        )


@dataclass(frozen=True)
class Host:
    url: str
    key: str
    tenant: str


ALIASES = {"Sum.Numbers_v2": ("gateway", "add"), "fixture.simple_Text": ("gateway-one", "test_simple_text")}


def make_host(backends: Backends, recording_service_url: str) -> Host:
    tenant = factories.tenant_factory()
    issued = factories.api_key_factory(tenant=tenant)
    api = factories.openapi_backend_factory(tenant=tenant, base_url=recording_service_url)
    spec_upload(backend=api, document=as_json(service_spec()), filename="service.json")
    mounts = {
        "gateway": factories.backend_factory(tenant=tenant, urls=[backends.modern_demo]),
        "gateway-one": factories.backend_factory(tenant=tenant, urls=[backends.fixture]),
        "pages": factories.backend_factory(tenant=tenant, urls=[backends.paging]),
        "slow": factories.backend_factory(tenant=tenant, urls=[backends.slow]),
        "down": factories.backend_factory(tenant=tenant, urls=[backends.down]),
        "api": api,
    }
    from apps.catalog.services import ToolTarget

    aliases = {alias: ToolTarget(map_key=key, upstream_name=name) for alias, (key, name) in ALIASES.items()}
    host = factories.virtual_host_factory(tenant=tenant, mounts=mounts, tool_aliases=aliases)
    return Host(f"{backends.gateway}/mcp/{tenant.slug}/{host.slug}", issued.secret, tenant.slug)


@pytest.fixture
def host(transactional_db: None, backends: Backends, recording_service_url: str) -> Host:
    return make_host(backends, recording_service_url)


async def everything(client: Any, kind: str) -> list[Any]:
    """Every item of a list (`tools`, `prompts`, `resources`, `resource_templates`), page by page."""
    items, cursor = [], None
    while True:
        page = await getattr(client, f"list_{kind}")(cursor=cursor)
        assert len(getattr(page, kind)) <= PAGE_SIZE
        items.extend(getattr(page, kind))
        cursor = page.next_cursor
        if not cursor:
            return items


async def all_tools(client: Any) -> list[Any]:
    return await everything(client, "tools")


def expected_tools() -> list[str]:
    demo = ["countdown", "echo", "utc_now"]  # `add` is shown as its alias only
    paging = ["alpha", "beta", "delta", "epsilon", "gamma"]
    api = sorted(op["operationId"] for path in service_spec()["paths"].values() for op in path.values()
                 if isinstance(op, dict) and "operationId" in op)
    return sorted(["Sum.Numbers_v2", "fixture.simple_Text"] + [f"gateway-{n}" for n in demo]
                  + [f"pages-{n}" for n in paging] + [f"api-{n}" for n in api])


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_one_server_with_every_backend_under_its_prefix(backends: Backends, recording_service_url: str,
                                                              transactional_db: None, mode: str) -> None:
    host = await database_sync_to_async(make_host)(backends, recording_service_url)
    async with mcp_client(host.url, host.key, mode) as client:
        names = [tool.name for tool in await all_tools(client)]
        fixture_tools = [n for n in names if n.startswith("gateway-one-")]
        others = [n for n in names if not n.startswith("gateway-one-")]
        assert others == [n for n in expected_tools() if n in others] and set(expected_tools()) <= set(names)
        assert names == sorted(names)  # one deterministic order, whichever backend answered first
        assert "gateway-one-test_sampling" in fixture_tools
        assert "gateway-one-test_simple_text" not in names  # aliased: shown under its alias only
        assert not any(n.startswith(("slow-", "down-")) for n in names)  # too slow / down: left out

        assert (await client.call_tool("Sum.Numbers_v2", {"a": 2, "b": 3})).content[0].text == "5.0"
        assert (await client.call_tool("gateway-echo", {"text": "hi"})).content[0].text == "hi"
        simple = await client.call_tool("fixture.simple_Text", {})
        assert "simple" in simple.content[0].text.lower()
        paged = await client.call_tool("pages-gamma", {"x": 1})
        assert paged.content[0].text == 'gamma: {"x": 1}'
        pet = await client.call_tool("api-getPet", {"petId": "7"})
        assert pet.structured_content["received"]["path"] == "/pets/7"


def test_names_that_do_not_route_are_unknown(host: Host) -> None:
    for name in ("gateway-oneincrement", "gateway-add", "gateway-one-test_simple_text", "nokey-x", "sum.numbers_v2",
                 "gateway-", "-add", "gateway-one-"):
        error = message_of(modern(host.url, "tools/call", {"name": name, "arguments": {}}, key=host.key))["error"]
        assert error["code"] == -32602, name
        assert name in error["message"]
    # A name that routes reaches its backend, which has the last word: `gateway-one` has no `add`.
    routed = message_of(modern(host.url, "tools/call", {"name": "gateway-one-add", "arguments": {}}, key=host.key))
    assert "add" in json.dumps(routed) and ("error" in routed or routed["result"]["isError"] is True)


def test_lists_come_in_signed_pages(host: Host) -> None:
    first = message_of(modern(host.url, "tools/list", key=host.key))["result"]
    assert len(first["tools"]) == PAGE_SIZE and first["cacheScope"] == "private" and first["ttlMs"] >= 0
    cursor = first["nextCursor"]
    second = message_of(modern(host.url, "tools/list", {"cursor": cursor}, key=host.key))["result"]
    assert second["tools"][0]["name"] > first["tools"][-1]["name"]
    tampered = cursor[:-2] + ("AA" if cursor[-2:] != "AA" else "BB")
    for bad in (tampered, "garbage", 42):
        error = message_of(modern(host.url, "tools/list", {"cursor": bad}, key=host.key))["error"]
        assert error["code"] == -32602 and "cursor" in error["message"]
    wrong_list = message_of(modern(host.url, "prompts/list", {"cursor": cursor}, key=host.key))["error"]
    assert wrong_list["code"] == -32602
    session = open_session(host.url, host.key)
    legacy = post(host.url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": cursor}},
                  key=host.key, headers={"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"})
    assert message_of(legacy)["result"]["tools"] == second["tools"]  # the same cursor in either era


async def test_resources_prompts_and_completion_route_back(host: Host) -> None:
    async with mcp_client(host.url, host.key, "legacy") as client:
        resources = await everything(client, "resources")
        uris = {str(r.uri) for r in resources}
        assert {"gateway-one-test://static-text", "pages-page://doc/0", "pages-page://doc/2"} <= uris
        read = await client.read_resource("pages-page://doc/1")
        assert read.contents[0].text == "content of page://doc/1"
        assert str(read.contents[0].uri) == "pages-page://doc/1"  # shown as the client named it
        templates = {t.uri_template for t in await everything(client, "resource_templates")}
        assert {"gateway-one-test://template/{id}/data", "pages-page://doc/{n}"} <= templates
        expanded = await client.read_resource("gateway-one-test://template/42/data")
        assert "42" in expanded.contents[0].text

        prompts = {p.name for p in await everything(client, "prompts")}
        assert {"pages-p0", "pages-p2", "gateway-one-test_simple_prompt"} <= prompts
        got = await client.get_prompt("pages-p1")
        assert got.messages[0].content.text == "prompt p1"
        embedded = await client.get_prompt("gateway-one-test_prompt_with_embedded_resource",
                                           {"resourceUri": "test://example"})
        uris_in_prompt = [m.content.resource.uri for m in embedded.messages if m.content.type == "resource"]
        assert [str(u) for u in uris_in_prompt] == ["gateway-one-test://example"]

        completion = await client.complete(PromptReference(type="ref/prompt", name="gateway-one-test_prompt_with_arguments"),
                                           {"name": "arg1", "value": "a"})
        assert completion.completion is not None


def test_unknown_resources_and_prompts(host: Host) -> None:
    session = open_session(host.url, host.key)
    headers = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    read = post(host.url, {"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": "nokey-x://y"}},
                key=host.key, headers=headers)
    assert message_of(read)["error"]["code"] == -32002  # resource not found, handshake era
    modern_read = modern(host.url, "resources/read", {"uri": "nokey-x://y"}, key=host.key,
                         headers={"mcp-name": "nokey-x://y"})
    assert message_of(modern_read)["error"]["code"] == -32602  # 2026-07-28 (SEP-2164)
    prompt = post(host.url, {"jsonrpc": "2.0", "id": 4, "method": "prompts/get", "params": {"name": "pagesp1"}},
                  key=host.key, headers=headers)
    assert message_of(prompt)["error"]["code"] == -32602


@pytest.mark.parametrize("method", ["resources/subscribe", "resources/unsubscribe"])
def test_methods_2026_07_28_removed_are_unknown_on_a_composed_host(host: Host, method: str) -> None:
    """They route by `uri` in the handshake era; a stateless client gets 404 + -32601 for them,
    whatever the URI (the conformance suite sends one no backend of the host has)."""
    for uri in ("gateway-one-test://watched-resource", "test://watched-resource"):
        answer = modern(host.url, method, {"uri": uri}, key=host.key, headers={"mcp-name": uri})
        assert answer.status_code == 404 and message_of(answer)["error"]["code"] == -32601, uri


@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")
async def test_subscription_updates_arrive_with_the_uri_the_client_was_shown(host: Host) -> None:
    updated: list[str] = []
    arrived = anyio.Event()

    async def on_message(message: object) -> None:
        if getattr(message, "method", None) == "notifications/resources/updated":
            updated.append(str(message.params.uri))  # type: ignore[attr-defined]
            arrived.set()

    async with mcp_client(host.url, host.key, "legacy", message_handler=on_message) as client:
        await client.subscribe_resource("gateway-one-test://watched-resource")
        await client.call_tool("gateway-one-test_update_watched_resource", {})
        with anyio.fail_after(10):
            await arrived.wait()
    assert updated[0] == "gateway-one-test://watched-resource"


async def test_a_sampling_request_reaches_the_client_and_its_answer_the_backend(host: Host) -> None:
    asked: list[str] = []

    async def sample(context: object, params: Any) -> CreateMessageResult:
        asked.append(params.messages[0].content.text)
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text="sampled!"), model="m")

    async with mcp_client(host.url, host.key, "legacy", sampling_callback=sample) as client:
        result = await client.call_tool("gateway-one-test_sampling", {"prompt": "What is 2+2?"})
    assert asked == ["What is 2+2?"]
    assert "sampled!" in result.content[0].text


async def test_list_changed_refreshes_the_cached_list_and_reaches_the_client(host: Host) -> None:
    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            changed.set()

    async with mcp_client(host.url, host.key, "legacy", message_handler=on_message) as client:
        before = {tool.name for tool in await all_tools(client)}
        await client.call_tool("gateway-one-test_trigger_tool_change", {})
        with anyio.fail_after(10):
            await changed.wait()
        after = {tool.name for tool in await all_tools(client)}
    assert before ^ after == {"gateway-one-test_dynamic_tool"}


def test_initialize_answers_for_the_whole_host(host: Host) -> None:
    response = post(host.url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}, key=host.key)
    result = message_of(response)["result"]
    assert result["serverInfo"]["name"] == "mcp-gateway"
    assert {"tools", "resources", "prompts", "completions"} <= set(result["capabilities"])
    assert result["capabilities"]["resources"].get("subscribe") is True  # the fixture offers it
    assert "Fixture server for the MCP conformance suite." in result["instructions"]
    discover = message_of(modern(host.url, "server/discover", key=host.key))["result"]
    assert {"tools", "resources", "prompts"} <= set(discover["capabilities"])


def test_backend_request_ids_are_distinct_per_backend(host: Host) -> None:
    """Each backend's own request to the client carries an id naming that backend, so two backends'
    `id: 0` never meet and the answer finds the one that asked (the raw view of the sampling test)."""
    session = open_session(host.url, host.key)
    headers = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    body = {"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": "gateway-one-test_sampling", "arguments": {"prompt": "hi"}}}
    with httpx.stream("POST", host.url, content=json.dumps(body), timeout=30,
                      headers={"content-type": "application/json", "accept": "application/json, text/event-stream",
                               "authorization": f"Bearer {host.key}", **headers}) as response:
        lines = response.iter_lines()
        for line in lines:
            if line.startswith("data: ") and "sampling/createMessage" in line:
                asked = json.loads(line[6:])
                break
        assert asked["id"].startswith("gw/gateway-one/")
        answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {
            "role": "assistant", "content": {"type": "text", "text": "raw!"}, "model": "m"}}
        assert post(host.url, answer, key=host.key, headers=headers).status_code == 202
        for line in lines:
            if line.startswith("data: ") and '"id":9' in line.replace(" ", ""):
                assert "raw!" in line
                break


def test_a_stateless_backend_announces_list_changes_to_the_gateway(host: Host) -> None:
    """The gateway subscribes (`subscriptions/listen`) to each stateless-era backend that announces
    `listChanged`, so it keeps their lists and yet sees a change at once, whoever caused it."""
    def names() -> set[str]:
        found, cursor = set(), None
        while True:
            result = message_of(modern(host.url, "tools/list", {"cursor": cursor} if cursor else {}, key=host.key))
            found |= {tool["name"] for tool in result["result"]["tools"]}
            cursor = result["result"].get("nextCursor")
            if not cursor:
                return found

    before = names()
    call = message_of(modern(host.url, "tools/call", {"name": "gateway-one-test_trigger_tool_change", "arguments": {}},
                             key=host.key))
    assert "result" in call
    deadline = time.monotonic() + 10
    while (after := names()) == before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert before ^ after == {"gateway-one-test_dynamic_tool"}


async def test_a_stateless_client_listens_to_list_changes_and_resource_updates(host: Host) -> None:
    from mcp.shared.subscriptions import ResourceUpdated, ToolsListChanged

    watched = "gateway-one-test://watched-resource"
    async with mcp_client(host.url, host.key, "2026-07-28") as client:
        await all_tools(client)  # the gateway now holds its own subscription to the fixture
        async with client.listen(tools_list_changed=True, resource_subscriptions=[watched, "pages-page://doc/0"]) as sub:
            assert sub.honored.tools_list_changed is True
            # The fixture takes resource subscriptions in this era; the handshake-era `pages` does not here.
            assert sub.honored.resource_subscriptions == [watched]
            await client.call_tool("gateway-one-test_update_watched_resource", {})
            await client.call_tool("gateway-one-test_trigger_tool_change", {})
            seen: list[object] = []
            with anyio.fail_after(10):
                async for event in sub:
                    seen.append(event)
                    if any(isinstance(e, ToolsListChanged) for e in seen) and any(
                        isinstance(e, ResourceUpdated) for e in seen
                    ):
                        break
    assert ResourceUpdated(uri=watched) in seen


def test_audit_rows_name_what_the_client_called_and_what_the_backend_ran(host: Host) -> None:
    for name, arguments in (("Sum.Numbers_v2", {"a": 1, "b": 2}), ("pages-beta", {}), ("api-getPet", {"petId": "1"})):
        assert "result" in message_of(modern(host.url, "tools/call", {"name": name, "arguments": arguments},
                                             key=host.key))
    rows = audit_rows(host.tenant, 3)
    assert [(r.exposed_name, r.upstream_name, r.backend_kind, r.outcome) for r in rows] == [
        ("Sum.Numbers_v2", "add", "mcp", "ok"),
        ("pages-beta", "beta", "mcp", "ok"),
        ("api-getPet", "getPet", "openapi", "ok"),
    ]


async def test_a_change_learnt_on_one_instance_reaches_clients_of_another(
    host: Host, backends: Backends, gateway_url: str
) -> None:
    """The client's session lives on one instance; the change happens through another (whose
    subscription or stream sees it first). The shared feed brings `list_changed` to the client."""
    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            changed.set()

    other = host.url.replace(backends.gateway, gateway_url)
    async with mcp_client(host.url, host.key, "legacy", message_handler=on_message) as client:
        before = {tool.name for tool in await all_tools(client)}
        await anyio.sleep(0.5)  # the GET stream is open
        trigger = {"name": "gateway-one-test_trigger_tool_change", "arguments": {}}
        response = await anyio.to_thread.run_sync(lambda: modern(other, "tools/call", trigger, key=host.key))
        assert "result" in message_of(response)
        with anyio.fail_after(10):
            await changed.wait()
        after = {tool.name for tool in await all_tools(client)}
    assert before ^ after == {"gateway-one-test_dynamic_tool"}


async def test_a_new_spec_version_is_announced_to_connected_clients(host: Host) -> None:
    from apps.catalog.models import Backend

    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            changed.set()

    def upload_smaller_spec() -> None:
        api = Backend.objects.get(tenant__slug=host.tenant, kind=Backend.Kind.OPENAPI)
        spec = service_spec()
        spec["paths"] = {path: item for path, item in spec["paths"].items() if path == "/text"}
        spec_upload(backend=api, document=as_json(spec), filename="smaller.json", allow_removals=True)

    async with mcp_client(host.url, host.key, "legacy", message_handler=on_message) as client:
        before = {tool.name for tool in await all_tools(client) if tool.name.startswith("api-")}
        await anyio.sleep(0.5)  # the GET stream is open
        await database_sync_to_async(upload_smaller_spec)()
        with anyio.fail_after(10):
            await changed.wait()
        after = {tool.name for tool in await all_tools(client) if tool.name.startswith("api-")}
    assert "api-getPet" in before and after == {"api-getText"}
