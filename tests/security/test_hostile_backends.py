"""What a hostile backend sends back cannot exhaust, subvert or outlast the gateway: a huge tools
list is left out (and never read to its end), a malformed answer becomes a clear error under the
client's own id, a backend's own `tool_search` does not double the host's, one tenant's tool names
cannot evict another's metric labels, and a call's event stream ends at its caps.

One gateway under Daphne with small caps, in front of tests/backends/hostile_server.py."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from apps.audit.models import AuditRecord
from apps.catalog.models import VirtualHost
from apps.catalog.services import virtual_host_tool_search_set
from apps.gateway.pipeline.listing import ListTooLarge
from apps.gateway.tool_lists import mcp_tools_fetch
from gatewaysite.celery import app as celery_app
from tests import factories
from tests.gateway.helpers import message_of, modern, open_session, post
from tests.processes import ROOT, backend_argv, free_port, gateway_argv, gateway_env, log_path, running

MAX_TOOLS = 500
MAX_MESSAGES = 20
MAX_SECONDS = 3
MAX_LABELS = 20  # tool label values of the whole process; 3 per tenant


@pytest.fixture(scope="module")
def hostile_url() -> Iterator[str]:
    port = free_port()
    argv = [*backend_argv("tests.backends.hostile_server", port), "--tools-per-page", "2000"]
    with running(argv, port, log_name="hostile-backend"):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def capped_gateway(django_db_setup: None, django_db_blocker: object) -> Iterator[tuple[str, Path]]:
    """A gateway with small caps; its URL and its log."""
    port = free_port()
    env = gateway_env(
        settings.DATABASES["default"]["NAME"], settings.REDIS_URL, GATEWAY_INSTANCE_ID="gw-hostile",
        GATEWAY_BACKEND_MAX_TOOLS=str(MAX_TOOLS), GATEWAY_CALL_MAX_BACKEND_MESSAGES=str(MAX_MESSAGES),
        GATEWAY_CALL_MAX_STREAM_SECONDS=str(MAX_SECONDS), GATEWAY_METRICS_MAX_TOOLS=str(MAX_LABELS),
        GATEWAY_METRICS_MAX_TOOLS_PER_TENANT="3",
    )
    with running(gateway_argv(port), port, env=env, log_name="gateway-hostile"):
        yield f"http://127.0.0.1:{port}", log_path("gateway-hostile", port)


def _host(gateway: str, mounts: dict[str, str], *, tool_search: bool = False) -> tuple[str, str]:
    """A new tenant's virtual host mounting the hostile backends at `mounts` (map key -> path);
    its URL and key."""
    tenant = factories.tenant_factory()
    key = factories.api_key_factory(tenant=tenant).secret
    backends = {map_key: factories.backend_factory(tenant=tenant, urls=[url]) for map_key, url in mounts.items()}
    host = factories.virtual_host_factory(tenant=tenant, mounts=backends)
    if tool_search:
        virtual_host_tool_search_set(virtual_host=host, mode=VirtualHost.ToolSearch.LISTED)
    return f"{gateway}/mcp/{tenant.slug}/{host.slug}", key


def _session_request(url: str, key: str, method: str, params: dict, request_id: int = 77) -> dict:
    session = open_session(url, key)
    response = post(url, {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, key=key,
                    headers={"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"})
    assert response.status_code == 200, response.text
    return message_of(response)


def _tool_names(url: str, key: str) -> list[str]:
    return [tool["name"] for tool in _session_request(url, key, "tools/list", {})["result"]["tools"]]


def _stats(hostile_url: str) -> dict:
    return httpx.get(f"{hostile_url}/stats", timeout=5).json()


def _metrics(gateway: str) -> str:
    return httpx.get(f"{gateway}/metrics", timeout=10).text


def _audited(tenant_url: str, exposed: str) -> AuditRecord:
    slug = tenant_url.split("/mcp/")[1].split("/")[0]
    for _ in range(100):
        row = AuditRecord.objects.filter(tenant_slug=slug, exposed_name=exposed).first()
        if row is not None:
            return row
        time.sleep(0.05)
    raise AssertionError(f"no audit row for {exposed}")


def test_a_huge_list_leaves_its_backend_out_of_a_composed_host(
    transactional_db: None, capped_gateway: tuple[str, Path], hostile_url: str
) -> None:
    gateway, log = capped_gateway
    url, key = _host(gateway, {"big": f"{hostile_url}/huge/mcp", "ok": f"{hostile_url}/calls/mcp"})
    before = _stats(hostile_url)["pages_served"]
    assert _tool_names(url, key) == ["ok-hello", "ok-tool_search"]
    # The first page of 2,000 tools is over the cap of 500: the other four pages are never asked for.
    assert _stats(hostile_url)["pages_served"] - before == 2  # one page of each backend
    text = log.read_text()
    assert f"left out: ListTooLarge: the tools list has more than {MAX_TOOLS:,} entries" in text
    assert re.search(r'list_backend_omitted_total\{[^}]*reason="too_large"[^}]*\} 1\.0', _metrics(gateway))


def test_a_huge_list_is_capped_where_a_single_backend_host_reads_it(
    transactional_db: None, capped_gateway: tuple[str, Path], hostile_url: str
) -> None:
    url, key = _host(capped_gateway[0], {"big": f"{hostile_url}/huge/mcp"}, tool_search=True)
    assert _tool_names(url, key) == ["tool_search"]  # the gateway's own tool; the backend is left out


def test_the_indexer_refuses_a_huge_list(transactional_db: None, hostile_url: str, settings: object) -> None:
    settings.GATEWAY_BACKEND_MAX_TOOLS = MAX_TOOLS  # type: ignore[attr-defined]
    backend = factories.backend_factory(urls=[f"{hostile_url}/huge/mcp"])
    before = _stats(hostile_url)["pages_served"]
    with pytest.raises(ListTooLarge, match="more than 500 entries"):
        mcp_tools_fetch(backend=backend)
    assert _stats(hostile_url)["pages_served"] - before == 1


def test_index_builds_and_spec_compiles_have_queues_and_workers_of_their_own() -> None:
    def queue(task: str) -> str:
        return celery_app.amqp.router.route({}, task, args=(), kwargs={})["queue"].name

    assert queue("apps.retrieval.tasks.tool_index") == queue("apps.retrieval.tasks.tool_index_refresh") == "indexing"
    assert queue("apps.catalog.tasks.spec_compile") == "celery"
    workers = [line for line in (ROOT / "scripts" / "run.sh").read_text().splitlines()
               if line.startswith("celery ")]
    consumed = {queue for line in workers for queue in re.search(r" -Q (\S+)", line).group(1).split(",")}
    assert consumed == {"celery", "indexing"} and len(workers) == 2  # a build never holds up a compile


@pytest.mark.parametrize("method", ["resources/list", "prompts/list"])
def test_a_malformed_answer_nobody_audits_is_an_error_too(
    transactional_db: None, capped_gateway: tuple[str, Path], hostile_url: str, method: str
) -> None:
    """Lists pass through unparsed where nothing reads them; an answer that is not one JSON object
    (an array, a body cut short) is still an error under the client's own id."""
    url, key = _host(capped_gateway[0], {"calls": f"{hostile_url}/calls/mcp"})
    answer = _session_request(url, key, method, {}, request_id=91)
    assert answer["id"] == 91 and "result" not in answer
    assert answer["error"]["code"] == -32004 and "its answer is" in answer["error"]["message"]


@pytest.mark.parametrize("tool", ["truncated", "wrong_id", "array"])
def test_a_malformed_answer_is_an_error_under_the_clients_own_id(
    transactional_db: None, capped_gateway: tuple[str, Path], hostile_url: str, tool: str
) -> None:
    url, key = _host(capped_gateway[0], {"calls": f"{hostile_url}/calls/mcp"})
    legacy = _session_request(url, key, "tools/call", {"name": tool, "arguments": {}}, request_id=77)
    # The stateless era: the gateway bridges to this handshake-era backend under its own ids.
    response = modern(url, "tools/call", {"name": tool, "arguments": {}}, key=key, request_id=78)
    stateless = message_of(response)
    for answer, request_id in ((legacy, 77), (stateless, 78)):
        assert answer["id"] == request_id and "result" not in answer
        assert answer["error"]["code"] == -32004
        assert "its answer is" in answer["error"]["message"]
        assert "gw-" not in json.dumps(answer)
    row = _audited(url, tool)
    assert (row.outcome, row.error_code) == ("error", -32004)


def test_a_backend_tool_search_does_not_double_the_hosts(
    transactional_db: None, capped_gateway: tuple[str, Path], hostile_url: str
) -> None:
    url, key = _host(capped_gateway[0], {"calls": f"{hostile_url}/calls/mcp"}, tool_search=True)
    tools = _session_request(url, key, "tools/list", {})["result"]["tools"]
    assert [tool["name"] for tool in tools] == ["tool_search", "hello"]
    assert tools[0]["title"] == "Find tools"  # the gateway's own


def test_one_tenants_tool_names_cannot_evict_anothers_metric_labels(
    transactional_db: None, capped_gateway: tuple[str, Path], hostile_url: str
) -> None:
    gateway = capped_gateway[0]
    junk_url, junk_key = _host(gateway, {"calls": f"{hostile_url}/calls/mcp"})
    url, key = _host(gateway, {"calls": f"{hostile_url}/calls/mcp"})
    session = open_session(junk_url, junk_key)
    for n in range(MAX_LABELS):  # as many names as the whole process may label
        post(junk_url, {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": f"junk{n}"}},
             key=junk_key, headers={"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"})
    assert "result" in _session_request(url, key, "tools/call", {"name": "hello", "arguments": {}})
    metrics = _metrics(gateway)
    assert re.search(r'tool_call_duration_seconds_count\{[^}]*tool="hello"', metrics)
    assert not re.search(r'tool="junk([3-9]|1\d)"', metrics)  # the first tenant's share is 3 names


def test_a_flood_of_server_requests_ends_the_call(
    transactional_db: None, capped_gateway: tuple[str, Path], hostile_url: str
) -> None:
    url, key = _host(capped_gateway[0], {"calls": f"{hostile_url}/calls/mcp"})
    session = open_session(url, key)
    response = post(url, {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "flood"}}, key=key,
                    headers={"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"})
    relayed = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    assert len([m for m in relayed if m.get("method") == "roots/list"]) == MAX_MESSAGES
    last = relayed[-1]
    assert last["id"] == 5 and last["error"]["code"] == -32004
    assert f"more than {MAX_MESSAGES} requests and notifications during one call" in last["error"]["message"]


def test_an_endless_stream_ends_at_the_call_time_cap_and_is_cancelled(
    transactional_db: None, capped_gateway: tuple[str, Path], hostile_url: str
) -> None:
    url, key = _host(capped_gateway[0], {"calls": f"{hostile_url}/calls/mcp"})
    session = open_session(url, key)
    started = time.monotonic()
    # The backend sends only keep-alive comments (no event, so no message cap applies, and it is
    # never idle); JSON only: the gateway collects the stream for a response that never comes.
    response = httpx.post(
        url, json={"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "endless"}}, timeout=30,
        headers={"authorization": f"Bearer {key}", "accept": "application/json", "mcp-session-id": session,
                 "mcp-protocol-version": "2025-11-25"},
    )
    answer = response.json()
    assert answer["id"] == 6 and answer["error"]["code"] == -32004
    assert f"took longer than {MAX_SECONDS} s" in answer["error"]["message"]
    assert time.monotonic() - started < MAX_SECONDS + 5
    for _ in range(50):  # the gateway dropped the backend's stream
        if _stats(hostile_url)["open_streams"] == 0:
            break
        time.sleep(0.1)
    assert _stats(hostile_url)["open_streams"] == 0
