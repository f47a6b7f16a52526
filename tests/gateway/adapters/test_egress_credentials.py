"""Egress credentials end to end (docs/openapi.md, "The egress credential"): a backend that checks its credential receives the
right one per caller, in both protocol eras and for OpenAPI services; the caller's own credential
never reaches a backend; OAuth client-credentials tokens are fetched once for every instance."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import redis.asyncio
from channels.db import database_sync_to_async
from django.conf import settings

from apps.catalog.credentials import IdentitySecret, egress_credential_set
from apps.catalog.specs import spec_upload
from apps.gateway.adapters.egress_credentials import OAuthClient, OAuthTokens
from apps.gateway.pipeline.ports import CredentialUnavailable
from tests import factories
from tests.backends.specs import as_json, service_spec
from tests.conftest import mcp_client
from tests.gateway.helpers import message_of, modern
from tests.processes import backend_argv, free_port, running

pytestmark = pytest.mark.slow

GATEWAY_TOKEN = "tok-gateway"


@pytest.fixture(scope="module")
def auth_backend_url() -> Iterator[str]:
    """The demo MCP server accepting only `tok-*` bearer tokens listed here or issued by the token server."""
    port = free_port()
    argv = backend_argv("tests.backends.auth_server", port) + [
        "--tokens", f"tok-agent,tok-ops,{GATEWAY_TOKEN}", "--pattern", r"oauth-token-\d+",
    ]
    with running(argv, port, log_name="auth-backend"):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def token_url() -> Iterator[str]:
    port = free_port()
    argv = backend_argv("tests.backends.token_server", port) + ["--client-id", "gw client", "--client-secret", "s3cret:x"]
    with running(argv, port, log_name="token-server"):
        yield f"http://127.0.0.1:{port}"


@dataclass(frozen=True)
class Callers:
    url: str
    keys: dict[str, str]  # key name -> secret


def make_host(gateway_url: str, backend: Any = None, **credential: Any) -> Callers:
    """A tenant with keys `agent` (team platform), `other` (team ops) and `stranger` (no team), and a
    host mounting `backend` (built by the caller on this tenant) with the given credential."""
    tenant = factories.tenant_factory()
    platform = factories.team_factory(tenant=tenant, slug="platform")
    ops = factories.team_factory(tenant=tenant, slug="ops")
    keys = {
        "agent": factories.api_key_factory(tenant=tenant, name="agent", team=platform).secret,
        "other": factories.api_key_factory(tenant=tenant, name="other", team=ops).secret,
        "stranger": factories.api_key_factory(tenant=tenant, name="stranger").secret,
    }
    mounted = backend(tenant)
    egress_credential_set(backend=mounted, **credential)
    host = factories.virtual_host_factory(tenant=tenant, mounts={"svc": mounted})
    return Callers(f"{gateway_url}/mcp/{tenant.slug}/{host.slug}", keys)


def recorded(base_url: str) -> list[dict[str, Any]]:
    return httpx.get(f"{base_url}/__recorded").json()


PER_CALLER = {
    "source": "per_identity",
    "identities": [IdentitySecret("key", "agent", "tok-agent"), IdentitySecret("team", "ops", "tok-ops")],
    "secret": GATEWAY_TOKEN,  # unmapped callers and the gateway's own requests
}


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_an_mcp_backend_receives_each_callers_own_credential(
    transactional_db: None, gateway_url: str, auth_backend_url: str, mode: str
) -> None:
    def backend(tenant: Any) -> Any:
        return factories.backend_factory(tenant=tenant, urls=[f"{auth_backend_url}/mcp"])

    callers = await database_sync_to_async(make_host)(gateway_url, backend, **PER_CALLER)
    expected = {"agent": "tok-agent", "other": "tok-ops", "stranger": GATEWAY_TOKEN}
    for name, token in expected.items():
        httpx.post(f"{auth_backend_url}/__reset")
        async with mcp_client(callers.url, callers.keys[name], mode) as client:
            assert (await client.call_tool("add", {"a": 1, "b": 2})).content[0].text == "3.0"
        seen = recorded(auth_backend_url)
        calls = [r for r in seen if r["method"] == "tools/call"]
        assert [c["authorization"] for c in calls] == [f"Bearer {token}"], (name, seen)
        # Whatever the gateway sent for this caller (handshakes, the call, closing) carried a
        # credential of the gateway's, never the caller's own key.
        assert all(r["authorization"] in {f"Bearer {token}", f"Bearer {GATEWAY_TOKEN}"} for r in seen), seen
        assert all(callers.keys[name] not in str(r) for r in seen)


def test_an_openapi_service_receives_each_callers_credential_and_unmapped_callers_are_refused(
    transactional_db: None, gateway_url: str, recording_service_url: str
) -> None:
    def backend(tenant: Any) -> Any:
        made = factories.openapi_backend_factory(tenant=tenant, base_url=recording_service_url)
        spec_upload(backend=made, document=as_json(service_spec()), filename="service.json")
        return made

    credential = {**PER_CALLER, "kind": "api_key_header", "name": "X-Service-Key", "secret": ""}
    callers = make_host(gateway_url, backend, **credential)
    for name, token in {"agent": "tok-agent", "other": "tok-ops"}.items():
        httpx.post(f"{recording_service_url}/__reset")
        response = modern(callers.url, "tools/call", {"name": "getPet", "arguments": {"petId": "7"}}, key=callers.keys[name])
        assert message_of(response)["result"]["isError"] is False
        (request,) = recorded(recording_service_url)
        sent = {header: value for header, value in request["headers"]}
        assert sent["x-service-key"] == token
        assert "authorization" not in sent  # the caller's bearer key stays at the gateway
    httpx.post(f"{recording_service_url}/__reset")
    response = modern(callers.url, "tools/call", {"name": "getPet", "arguments": {"petId": "7"}},
                      key=callers.keys["stranger"])
    error = message_of(response)["error"]
    assert error["code"] == -32004 and "no credential for key:stranger" in error["message"]
    assert recorded(recording_service_url) == []  # nothing was sent without a credential


async def test_oauth_tokens_are_fetched_once_and_sent_to_the_backend(
    transactional_db: None, gateway_url: str, auth_backend_url: str, token_url: str
) -> None:
    def backend(tenant: Any) -> Any:
        return factories.backend_factory(tenant=tenant, urls=[f"{auth_backend_url}/mcp"])

    before = httpx.get(f"{token_url}/__stats").json()["issued"]
    callers = await database_sync_to_async(make_host)(
        gateway_url, backend, source="oauth_client_credentials", token_url=f"{token_url}/token",
        client_id="gw client", secret="s3cret:x", scope=f"tools.e2e.{free_port()}",
    )
    httpx.post(f"{auth_backend_url}/__reset")
    for name in ("agent", "other"):
        async with mcp_client(callers.url, callers.keys[name], "2026-07-28") as client:
            for _ in range(3):
                assert (await client.call_tool("add", {"a": 2, "b": 2})).content[0].text == "4.0"
    stats = httpx.get(f"{token_url}/__stats").json()
    assert stats["issued"] == before + 1
    assert stats["requests"][-1]["via"] == "basic" and stats["requests"][-1]["grant_type"] == "client_credentials"
    token = f"Bearer oauth-token-{before + 1}"
    assert {r["authorization"] for r in recorded(auth_backend_url)} == {token}


# --- the token cache itself, as two gateway instances sharing Redis ------------------------------

def client_for(token_url: str, **overrides: str) -> OAuthClient:
    # A scope of its own per test: the shared cache is keyed by the whole client.
    fields = {"token_url": f"{token_url}/token", "client_id": "gw client", "client_secret": "s3cret:x",
              "scope": f"tools.{free_port()}", **overrides}
    return OAuthClient(**fields, allow_private=True)  # the token service listens on loopback


def configure(token_url: str, **values: object) -> None:
    httpx.post(f"{token_url}/__config", json={"lifetime": 3600, "delay": 0.0, "fail": False, "bad": False, **values})


def token_requests(token_url: str, oauth: OAuthClient) -> int:
    return sum(r.get("scope") == oauth.scope for r in httpx.get(f"{token_url}/__stats").json()["requests"])


@pytest.fixture
async def instances() -> Any:
    clients = [redis.asyncio.Redis.from_url(settings.REDIS_URL) for _ in range(2)]
    yield [OAuthTokens(client, key=b"test", poll_seconds=0.01, failure_seconds=1.0) for client in clients]
    for client in clients:
        await client.aclose()


async def test_two_instances_fetch_one_token_and_refresh_it_once(instances: list[OAuthTokens], token_url: str) -> None:
    configure(token_url, lifetime=2, delay=0.2)
    oauth = client_for(token_url)
    first = await asyncio.gather(*(instances[i % 2].token(oauth) for i in range(40)))
    assert len(set(first)) == 1 and token_requests(token_url, oauth) == 1
    await asyncio.sleep(1.7)  # past the refresh point (a fifth of the lifetime before expiry)
    during = await asyncio.gather(*(instances[i % 2].token(oauth) for i in range(40)))
    assert set(during) == set(first)  # the current token serves while one instance refreshes
    await asyncio.sleep(1.5)
    after = {await instance.token(oauth) for instance in instances}
    assert len(after) == 1 and after != set(first)
    assert token_requests(token_url, oauth) == 2  # one refresh in flight across both instances
    configure(token_url)


async def test_a_failing_token_endpoint_is_asked_once_and_its_error_reported(
    instances: list[OAuthTokens], token_url: str
) -> None:
    configure(token_url, fail=True, delay=0.1)
    oauth = client_for(token_url)
    answers = await asyncio.gather(*(instances[i % 2].token(oauth) for i in range(20)), return_exceptions=True)
    assert all(isinstance(a, CredentialUnavailable) and "HTTP 503: temporarily_unavailable" in str(a) for a in answers)
    assert token_requests(token_url, oauth) == 1
    # Later callers, on an instance that has not seen the failure too, get it from the shared cache.
    client = redis.asyncio.Redis.from_url(settings.REDIS_URL)
    with pytest.raises(CredentialUnavailable, match="HTTP 503"):
        await OAuthTokens(client, key=b"test").token(oauth)
    await client.aclose()
    with pytest.raises(CredentialUnavailable, match="HTTP 503"):
        await instances[1].token(oauth)
    assert token_requests(token_url, oauth) == 1
    configure(token_url)
    await asyncio.sleep(1.1)  # the failure has passed: the endpoint is asked again
    assert (await instances[1].token(oauth)).startswith("oauth-token-")
    assert token_requests(token_url, oauth) == 2
    with pytest.raises(CredentialUnavailable, match=r"HTTP 401: invalid_client \(bad client credentials\)"):
        await instances[0].token(client_for(token_url, client_secret="wrong"))
    posted = client_for(token_url, client_auth="client_secret_post")
    assert (await instances[0].token(posted)).startswith("oauth-token-")
    assert httpx.get(f"{token_url}/__stats").json()["requests"][-1]["via"] == "post"


async def test_without_redis_each_instance_fetches_its_own_token(token_url: str) -> None:
    configure(token_url)
    unreachable = redis.asyncio.Redis.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=0.5)
    oauth = client_for(token_url)
    assert (await OAuthTokens(unreachable).token(oauth)).startswith("oauth-token-")
    await unreachable.aclose()


async def test_a_token_that_cannot_go_in_a_header_is_refused(instances: list[OAuthTokens], token_url: str) -> None:
    configure(token_url, bad=True)
    with pytest.raises(CredentialUnavailable, match="cannot be sent in a header"):
        await instances[0].token(client_for(token_url))
    configure(token_url)


def test_the_tool_index_lists_an_oauth_backends_tools_with_a_token_of_its_own(
    transactional_db: None, auth_backend_url: str, token_url: str
) -> None:
    from apps.retrieval.indexing import tool_index_sync
    from apps.retrieval.models import IndexedTool

    backend = factories.backend_factory(urls=[f"{auth_backend_url}/mcp"])  # indexing is off: nothing yet
    egress_credential_set(backend=backend, source="oauth_client_credentials", token_url=f"{token_url}/token",
                          client_id="gw client", secret="s3cret:x", scope=f"tools.index.{free_port()}")
    assert tool_index_sync(backend_id=backend.pk).embedded == 4
    assert set(IndexedTool.objects.filter(backend=backend).values_list("name", flat=True)) == {
        "add", "echo", "utc_now", "countdown"}
    assert all(r["authorization"].startswith("Bearer oauth-token-") for r in recorded(auth_backend_url)[-2:])
