"""Interceptors end to end, through a real gateway under Daphne (docs/interceptors.md): the secrets
built-in masks a cloud key that `echo` sends back, for the official SDK client in both protocol
eras and over HTTP+SSE; a refusal is -32006 naming the interceptor in every transport; a streamed
answer (progress, then the result) is inspected; an interceptor scoped to one backend of a
multi-backend host leaves the other alone; a real webhook service gets signed requests, rewrites,
refuses, and — timing out — fails open or closed as configured. Each decision is on the call's
audit row and in `/metrics`."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from channels.db import database_sync_to_async
from mcp.shared.exceptions import MCPError

from apps.catalog.credentials import tenant_secret_set
from apps.kernel.interceptors import InterceptorSpec
from apps.policies.services import interceptors_set
from tests import factories
from tests.audit.helpers import audit_rows
from tests.backends.webhook_service import KEY
from tests.conftest import Host, mcp_client
from tests.gateway.test_http_sse import sse_session
from tests.gateway.test_metrics import delta, scrape

pytestmark = pytest.mark.slow

AWS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"  # AWS's documented example key
LEAK = f"aws_access_key_id={AWS_KEY_ID}"


def host_with(gateway_url: str, backends: dict[str, str], *interceptors: InterceptorSpec) -> Host:
    tenant = factories.tenant_factory()
    issued = factories.api_key_factory(tenant=tenant)
    mounts = {key: factories.backend_factory(tenant=tenant, name=key, urls=[url]) for key, url in backends.items()}
    host = factories.virtual_host_factory(tenant=tenant, mounts=mounts)
    tenant_secret_set(tenant=tenant, name="hook-key", value=KEY)
    interceptors_set(virtual_host=host, interceptors=interceptors)
    return Host(f"{gateway_url}/mcp/{tenant.slug}/{host.slug}", issued.secret, tenant.slug, host.slug)


SECRETS = InterceptorSpec("secrets", "secrets", settings={"action": "mask"})
CARDS = InterceptorSpec("cards", "personal_data", settings={"types": {"card": "refuse"}})


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_cloud_key_echoed_back_is_masked_in_both_eras(
    transactional_db: None, gateway_url: str, demo_backend_url: str, mode: str,
) -> None:
    host = await database_sync_to_async(host_with)(gateway_url, {"demo": demo_backend_url}, SECRETS)
    before = scrape(gateway_url)
    async with mcp_client(host.url, host.key, mode) as client:
        result = await client.call_tool("echo", {"text": f"my config: {LEAK}"})
        untouched = await client.call_tool("echo", {"text": "nothing to see"})
    assert result.content[0].text == "my config: aws_access_key_id=[REDACTED:aws-access-key]"
    assert untouched.content[0].text == "nothing to see"
    rows = await database_sync_to_async(audit_rows)(host.tenant, 2, method="tools/call")
    # The key went out in the arguments too: masked on the way in, so the backend never saw it.
    assert rows[0].interceptions == [
        {"interceptor": "secrets", "kind": "secrets", "phase": "request", "action": "rewrite",
         "findings": ["aws-access-key"]},
    ]
    assert rows[1].interceptions is None and rows[0].outcome == "ok"
    assert delta(before, scrape(gateway_url), "mcp_gateway_interceptions_total",
                 kind="secrets", phase="request", action="rewrite") == 1


async def test_a_secret_only_the_backend_knows_is_masked_on_the_way_back(
    transactional_db: None, gateway_url: str, demo_backend_url: str,
) -> None:
    """The result side alone: a resource whose text carries no secret passes, the arguments of a
    masked-on-the-way-out secret were already masked, so a result-only chain is checked with a
    prompt whose text is the client's own argument."""
    result_only = InterceptorSpec("secrets", "secrets", phases=("result",))
    host = await database_sync_to_async(host_with)(gateway_url, {"demo": demo_backend_url}, result_only)
    async with mcp_client(host.url, host.key, "legacy") as client:
        echoed = await client.call_tool("echo", {"text": LEAK})
        prompt = await client.get_prompt("greet", {"name": AWS_KEY_ID})
        resource = await client.read_resource("demo://readme")
    assert echoed.content[0].text == "aws_access_key_id=[REDACTED:aws-access-key]"
    assert AWS_KEY_ID not in prompt.messages[0].content.text and "[REDACTED:aws-access-key]" in prompt.messages[0].content.text
    assert resource.contents[0].text.startswith("# Demo")
    rows = await database_sync_to_async(audit_rows)(host.tenant, 3)
    assert [(r.method, [n["phase"] for n in r.interceptions or []]) for r in rows] == [
        ("tools/call", ["result"]), ("prompts/get", ["result"]), ("resources/read", [])]


def _refusal(raised: pytest.ExceptionInfo[MCPError]) -> tuple[int, dict[str, Any]]:
    return raised.value.error.code, raised.value.error.data


CARD = "4111 1111 1111 1111"  # a test Visa number: passes Luhn


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_refusal_is_32006_naming_the_interceptor_in_both_eras(
    transactional_db: None, gateway_url: str, demo_backend_url: str, mode: str,
) -> None:
    host = await database_sync_to_async(host_with)(gateway_url, {"demo": demo_backend_url}, CARDS)
    async with mcp_client(host.url, host.key, mode) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("echo", {"text": f"pay with {CARD}"})
        assert (await client.call_tool("echo", {"text": "4111 1111 1111 1112"})).content[0].text  # not Luhn
    code, data = _refusal(raised)
    assert code == -32006 and data == {"interceptor": "cards", "phase": "request", "findings": ["card"]}
    assert CARD not in raised.value.error.message
    rows = await database_sync_to_async(audit_rows)(host.tenant, 2, method="tools/call")
    assert [(r.outcome, r.error_code) for r in rows] == [("denied", -32006), ("ok", None)]


async def test_a_refusal_reaches_an_http_sse_client(
    transactional_db: None, gateway_url: str, demo_backend_url: str,
) -> None:
    host = await database_sync_to_async(host_with)(gateway_url, {"demo": demo_backend_url}, CARDS, SECRETS)
    async with sse_session(host) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("echo", {"text": CARD})
        masked = await client.call_tool("echo", {"text": LEAK})
    assert _refusal(raised)[0] == -32006
    assert masked.content[0].text == "aws_access_key_id=[REDACTED:aws-access-key]"


async def test_a_streamed_answer_keeps_its_progress_and_its_result_is_inspected(
    transactional_db: None, gateway_url: str, demo_backend_url: str,
) -> None:
    words = InterceptorSpec("words", "fields", phases=("result",), settings={"deny": ["lift-off"], "deny_action": "mask"})
    host = await database_sync_to_async(host_with)(gateway_url, {"demo": demo_backend_url}, words)
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with mcp_client(host.url, host.key, "legacy") as client:
        result = await client.call_tool("countdown", {"start": 3}, progress_callback=on_progress)
    assert progress == [0, 1, 2]
    assert result.content[0].text == "[REDACTED:deny]"


async def test_on_a_multi_backend_host_an_interceptor_scoped_to_one_backends_tools_leaves_the_other(
    transactional_db: None, gateway_url: str, demo_backend_url: str,
) -> None:
    scoped = InterceptorSpec("secrets", "secrets", targets=("left-*",))
    host = await database_sync_to_async(host_with)(
        gateway_url, {"left": demo_backend_url, "right": demo_backend_url}, scoped)
    async with mcp_client(host.url, host.key, "2026-07-28") as client:
        left = await client.call_tool("left-echo", {"text": LEAK})
        right = await client.call_tool("right-echo", {"text": LEAK})
    assert left.content[0].text.endswith("[REDACTED:aws-access-key]")
    assert right.content[0].text == LEAK
    rows = await database_sync_to_async(audit_rows)(host.tenant, 2, method="tools/call")
    assert [(r.exposed_name, bool(r.interceptions)) for r in rows] == [("left-echo", True), ("right-echo", False)]


def _hook(name: str, url: str, **settings: Any) -> InterceptorSpec:
    return InterceptorSpec(name, "webhook", settings={"url": url, "secret": "hook-key", **settings})


async def _recorded(service: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient() as http:
        return (await http.get(f"{service}/__recorded")).json()


async def test_a_webhook_gets_signed_requests_and_its_rewrite_is_what_the_backend_and_client_see(
    transactional_db: None, gateway_url: str, demo_backend_url: str, webhook_service_url: str,
) -> None:
    httpx.post(f"{webhook_service_url}/__reset")
    hook = _hook("reviewer", f"{webhook_service_url}/rewrite")
    host = await database_sync_to_async(host_with)(gateway_url, {"demo": demo_backend_url}, hook)
    async with mcp_client(host.url, host.key, "legacy") as client:
        result = await client.call_tool("echo", {"text": "hello world"})
    assert result.content[0].text == "checked world"
    recorded = await _recorded(webhook_service_url)
    assert [(r["path"], r["signature_valid"], r["body"]["phase"]) for r in recorded] == [
        ("/rewrite", True, "request"), ("/rewrite", True, "result")]
    request = recorded[0]["body"]
    assert request["payload"]["arguments"] == {"text": "hello world"} and request["target"] == "echo"
    assert request["caller"]["tenant"] == host.tenant and request["interceptor"] == "reviewer"
    rows = await database_sync_to_async(audit_rows)(host.tenant, 1, method="tools/call")
    notes = rows[0].interceptions
    assert [(n["phase"], n["action"]) for n in notes] == [("request", "rewrite"), ("result", "pass")]
    assert all(n["ms"] > 0 for n in notes)


@pytest.mark.parametrize(("failure", "outcome"), [("closed", "denied"), ("open", "ok")])
async def test_a_webhook_that_times_out_fails_as_configured(
    transactional_db: None, gateway_url: str, demo_backend_url: str, webhook_service_url: str,
    failure: str, outcome: str,
) -> None:
    hook = _hook("slow", f"{webhook_service_url}/slow/2", timeout_seconds=0.3, failure=failure)
    host = await database_sync_to_async(host_with)(gateway_url, {"demo": demo_backend_url}, hook)
    async with mcp_client(host.url, host.key, "2026-07-28") as client:
        if failure == "closed":
            with pytest.raises(MCPError) as raised:
                await client.call_tool("echo", {"text": "hi"})
            assert _refusal(raised)[0] == -32006 and "no answer within 0.3 s" in raised.value.error.message
        else:
            assert (await client.call_tool("echo", {"text": "hi"})).content[0].text == "hi"
    rows = await database_sync_to_async(audit_rows)(host.tenant, 1, method="tools/call")
    [first, *rest] = rows[0].interceptions
    assert rows[0].outcome == outcome and first["action"] == f"failed_{failure}"
    assert 250 < first["ms"] < 1500


async def test_a_webhook_that_refuses_or_answers_garbage_refuses_the_call(
    transactional_db: None, gateway_url: str, demo_backend_url: str, webhook_service_url: str,
) -> None:
    refuse = await database_sync_to_async(host_with)(
        gateway_url, {"demo": demo_backend_url}, _hook("judge", f"{webhook_service_url}/refuse"))
    garbage = await database_sync_to_async(host_with)(
        gateway_url, {"demo": demo_backend_url}, _hook("broken", f"{webhook_service_url}/garbage"))
    async with mcp_client(refuse.url, refuse.key, "legacy") as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("echo", {"text": "hi"})
    async with mcp_client(garbage.url, garbage.key, "legacy") as client:
        with pytest.raises(MCPError) as broken:
            await client.call_tool("echo", {"text": "hi"})
    assert refused.value.error.message == "Interceptor 'judge' refused the call's request: the service says no"
    assert _refusal(broken)[1]["interceptor"] == "broken" and "not JSON" in broken.value.error.message


async def test_the_demo_hosts_echo_of_a_cloud_key_comes_back_masked(
    transactional_db: None, gateway_url: str, demo_backend_url: str, tmp_path: Any,
) -> None:
    """What `make run` shows a new user (scripts/try_demo.py does this call)."""
    from apps.configuration.services import demo_seed

    await database_sync_to_async(demo_seed)(
        backend_url=demo_backend_url, key_file=tmp_path / "key", admin_password_file=tmp_path / "password")
    key = (tmp_path / "key").read_text().strip()
    async with mcp_client(f"{gateway_url}/mcp/demo/main", key, "legacy") as client:
        echoed = await client.call_tool("echo", {"text": LEAK})
    assert echoed.content[0].text == "aws_access_key_id=[REDACTED:aws-access-key]"
