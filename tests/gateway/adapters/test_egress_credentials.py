"""Egress credentials end to end (docs/openapi.md, "The egress credential"): a backend that checks its credential receives the
right one per caller, in both protocol eras and for OpenAPI services; the caller's own credential
never reaches a backend; OAuth client-credentials tokens are fetched once for every instance; a
caller's token is exchanged (RFC 8693) once per token, and only a token of the named issuer is."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import httpx
import pytest
import redis.asyncio
from channels.db import database_sync_to_async
from django.conf import settings
from django.forms.models import model_to_dict

from apps.catalog.credentials import IdentitySecret, egress_credential_set
from apps.catalog.specs import spec_upload
from apps.gateway.adapters.egress_credentials import TOKEN_EXCHANGE, OAuthClient, OAuthTokens
from apps.gateway.pipeline.ports import CredentialUnavailable
from apps.tenants.services import token_issuer_set
from tests import factories
from tests.audit.helpers import audit_rows
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
        "--tokens", f"tok-agent,tok-ops,{GATEWAY_TOKEN}", "--pattern", r"(oauth-token|xchg-[a-z]+)-\d+",
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


# --- token exchange: each caller's own token, exchanged at its issuer -----------------------------

AUDIENCE = "https://gateway.example.test/mcp"  # what the issuer's tokens are for (the gateway)
BACKEND_AUDIENCE = "https://tools.example.test"  # what the exchanged tokens are for


def mint(token_url: str, subject: str) -> str:
    """An access token of the token server's, for the gateway, as a person's client would hold."""
    return httpx.post(f"{token_url}/__mint", json={"sub": subject, "aud": AUDIENCE}).json()["token"]


def exchange_host(gateway_url: str, auth_backend_url: str, token_url: str, *, also: str = "") -> tuple[str, str, str]:
    """(the MCP URL, an API key, the scope) of a host mounting the credential-checking backend as
    `svc`, whose credential is each caller's token of the token server exchanged there (and `demo`
    at `also`, when given). The scope is the test's own: the token cache is keyed by the client."""
    tenant = factories.tenant_factory()
    token_issuer_set(tenant=tenant, issuer=token_url, audience=AUDIENCE, jwks_url=f"{token_url}/jwks")
    key = factories.api_key_factory(tenant=tenant, name="agent").secret
    backend = factories.backend_factory(tenant=tenant, name="tracker", urls=[f"{auth_backend_url}/mcp"])
    scope = f"tools.exchange.{free_port()}"
    egress_credential_set(backend=backend, source="token_exchange", token_url=f"{token_url}/token",
                          client_id="gw client", secret="s3cret:x", audience=BACKEND_AUDIENCE, scope=scope,
                          subject_issuer=token_url)
    mounts = {"svc": backend} | ({"demo": factories.backend_factory(tenant=tenant, urls=[also])} if also else {})
    host = factories.virtual_host_factory(tenant=tenant, mounts=mounts)
    return f"{gateway_url}/mcp/{tenant.slug}/{host.slug}", key, scope


def exchanges(token_url: str, scope: str) -> list[dict[str, Any]]:
    return [r for r in httpx.get(f"{token_url}/__stats").json()["requests"]
            if r.get("scope") == scope and r["grant_type"].endswith(":token-exchange")]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_each_callers_token_is_exchanged_once_and_the_backend_gets_only_the_exchanged_one(
    transactional_db: None, gateway_url: str, auth_backend_url: str, token_url: str, mode: str
) -> None:
    configure(token_url)
    url, _, scope = await database_sync_to_async(exchange_host)(gateway_url, auth_backend_url, token_url)
    tokens = {person: mint(token_url, person) for person in ("alice", "bob")}
    sent: dict[str, set[str]] = {}
    for person, token in tokens.items():
        httpx.post(f"{auth_backend_url}/__reset")
        async with mcp_client(url, token, mode) as client:
            for _ in range(3):
                assert (await client.call_tool("add", {"a": 1, "b": 2})).content[0].text == "3.0"
        seen = recorded(auth_backend_url)
        sent[person] = {r["authorization"] for r in seen if r["method"] == "tools/call"}
        assert all(token not in str(r) for r in seen)  # the person's own token stays at the gateway
    assert sent["alice"] != sent["bob"]
    assert all(len(found) == 1 and found.pop().startswith(f"Bearer xchg-{person}-") for person, found in sent.items())
    asked = exchanges(token_url, scope)
    # One exchange per person's token, whatever the number of calls; it names what RFC 8693 asks for.
    assert [r["subject_token"] for r in asked] == [tokens["alice"], tokens["bob"]]
    assert all(r["subject_token_type"] == r["requested_token_type"] == "urn:ietf:params:oauth:token-type:access_token"
               and r["audience"] == BACKEND_AUDIENCE and r["via"] == "basic" for r in asked)


def test_a_caller_without_a_token_of_the_issuer_is_refused_and_nothing_is_sent(
    transactional_db: None, gateway_url: str, auth_backend_url: str, token_url: str
) -> None:
    configure(token_url, refuse=["mallory"])
    url, key, scope = exchange_host(gateway_url, auth_backend_url, token_url)
    httpx.post(f"{auth_backend_url}/__reset")
    params = {"name": "add", "arguments": {"a": 1, "b": 2}}
    error = message_of(modern(url, "tools/call", params, key=key))["error"]
    assert error["code"] == -32004
    assert error["message"].endswith(f"backend 'tracker' is called with the caller's own access token from {token_url}, "
                                     "exchanged; key:agent has none: call with a token of that issuer")
    assert exchanges(token_url, scope) == []  # the API key never went to the token endpoint
    # The issuer refuses to exchange this person's token: they are told why, and the backend gets nothing.
    mallory = mint(token_url, "mallory")
    error = message_of(modern(url, "tools/call", params, key=mallory))["error"]
    assert error["code"] == -32004 and "HTTP 400: invalid_grant (mallory may not reach that audience)" in error["message"]
    assert [r["method"] for r in recorded(auth_backend_url) if r["method"] == "tools/call"] == []
    assert len(exchanges(token_url, scope)) == 1
    rows = audit_rows(url.split("/")[-2], 2)
    assert [r.principal for r in rows] == ["key:agent", f"token:mallory@{token_url}"]
    assert all(mallory not in str(model_to_dict(r)) for r in rows)  # the token is never written down
    configure(token_url)


def test_on_a_host_of_several_backends_the_gateway_lists_with_a_token_of_its_own(
    transactional_db: None, gateway_url: str, auth_backend_url: str, token_url: str, demo_backend_url: str
) -> None:
    configure(token_url)
    url, _, scope = exchange_host(gateway_url, auth_backend_url, token_url, also=demo_backend_url)
    httpx.post(f"{auth_backend_url}/__reset")
    token = mint(token_url, "carol")
    names = [t["name"] for t in message_of(modern(url, "tools/list", key=token))["result"]["tools"]]
    listed = [r for r in recorded(auth_backend_url) if r["method"] == "tools/list"]
    # The merged list is the host's, shared by its callers: the client's own token fetched it.
    assert listed and all(r["authorization"].startswith("Bearer oauth-token-") for r in listed)
    svc_add = next(n for n in names if "svc" in n and n.endswith("add"))
    reply = message_of(modern(url, "tools/call", {"name": svc_add, "arguments": {"a": 2, "b": 3}}, key=token))
    assert reply["result"]["content"][0]["text"] == "5.0"
    call = next(r for r in recorded(auth_backend_url) if r["method"] == "tools/call")
    assert call["authorization"].startswith("Bearer xchg-carol-")
    assert len(exchanges(token_url, scope)) == 1


async def test_two_instances_exchange_one_callers_token_once(instances: list[OAuthTokens], token_url: str) -> None:
    configure(token_url, delay=0.1)
    oauth = client_for(token_url)
    alice, bob = (replace(oauth, grant=TOKEN_EXCHANGE, subject_token=mint(token_url, p)) for p in ("alice", "bob"))
    got = await asyncio.gather(*(instances[i % 2].token(alice if i % 3 else bob) for i in range(30)))
    assert {t.rsplit("-", 1)[0] for t in got} == {"xchg-alice", "xchg-bob"} and len(set(got)) == 2
    assert [r["subject_token"] for r in exchanges(token_url, oauth.scope)].count(alice.subject_token) == 1
    assert len(exchanges(token_url, oauth.scope)) == 2
    assert "subject_token" not in repr(alice) and alice.subject_token not in repr(alice)
    configure(token_url)


# --- the token cache itself, as two gateway instances sharing Redis ------------------------------

def client_for(token_url: str, **overrides: str) -> OAuthClient:
    # A scope of its own per test: the shared cache is keyed by the whole client.
    fields = {"token_url": f"{token_url}/token", "client_id": "gw client", "client_secret": "s3cret:x",
              "scope": f"tools.{free_port()}", **overrides}
    return OAuthClient(**fields, allow_private=True)  # the token service listens on loopback


def configure(token_url: str, **values: object) -> None:
    httpx.post(f"{token_url}/__config", json={"lifetime": 3600, "delay": 0.0, "fail": False, "bad": False,
                                              "refuse": [], **values})


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
