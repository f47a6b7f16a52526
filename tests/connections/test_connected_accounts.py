"""Per-person upstream accounts end to end (docs/identity.md, "Connected accounts"): a backend that is
an MCP server protected by its own authorization server (the official SDK's server-side auth,
tests/backends/oauth_backend.py) is reached by each person with their own account. The gateway
discovers the server from the backend's 401, registers itself, and runs the authorization code flow
with PKCE per person from the console; a person not connected yet is answered with where to connect
(URL-mode elicitation, in each era); tokens are refreshed by one instance, revocable, never shown."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from apps.catalog.credentials import egress_credential_set
from apps.catalog.services import backend_update
from apps.common.redis import redis_client
from apps.common.secrets import secret_encrypt
from apps.connections.models import Connection, UpstreamServer
from apps.connections.services import token_cache_key
from apps.oauth.services import authorization_server_enable
from apps.tenants.models import Membership
from apps.tenants.services import membership_set
from tests import factories
from tests.audit.helpers import audit_rows
from tests.gateway.helpers import MODERN, message_of, post

pytestmark = pytest.mark.slow


def stats(upstream_url: str) -> dict[str, Any]:
    return httpx.get(f"{upstream_url}/__stats").json()


@dataclass
class Site:
    tenant: Any
    backend: Any
    url: str  # the host's MCP URL at the gateway
    console: Client  # the in-process console, as reached at the gateway's address
    users: dict[str, Any]

    def login(self, name: str) -> Client:
        self.console.force_login(self.users[name])
        return self.console


@pytest.fixture
def site(transactional_db: None, gateway_url: str, upstream_url: str, demo_backend_url: str) -> Site:
    tenant = factories.tenant_factory()
    authorization_server_enable(tenant=tenant)
    backend = factories.backend_factory(tenant=tenant, name="tracker", urls=[f"{upstream_url}/mcp"])
    egress_credential_set(backend=backend, source="per_person")
    factories.virtual_host_factory(tenant=tenant, slug="main", mounts={"tracker": backend})
    users = {}
    for name, role in (("alice", "member"), ("bob", "member"), ("admin", "admin")):
        users[name] = get_user_model().objects.create_user(username=f"{name}-{tenant.slug}", password="pw")
        membership_set(tenant=tenant, user=users[name], role=role)
    host = urlsplit(gateway_url).netloc
    return Site(tenant, backend, f"{gateway_url}/mcp/{tenant.slug}/main", Client(HTTP_HOST=host), users)


def person_token(site: Site, name: str) -> str:
    """An access token of the gateway's own authorization server for the person, as an MCP client
    signed in by them holds (the flow itself: tests/oauth)."""
    http = site.login(name)
    origin = f"http://{http.defaults['HTTP_HOST']}"
    redirect = "http://127.0.0.1:45111/callback"
    client_id = http.post(f"/oauth/{site.tenant.slug}/register", {"redirect_uris": [redirect], "client_name": "Agent"},
                          content_type="application/json").json()["client_id"]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = {"response_type": "code", "client_id": client_id, "redirect_uri": redirect, "state": "s",
             "code_challenge": challenge, "code_challenge_method": "S256", "resource": site.url}
    answer = http.post(f"/oauth/{site.tenant.slug}/authorize?{urlencode(query)}", {"decision": "allow"})
    code = parse_qs(urlsplit(answer["Location"]).query)["code"][0]
    token = http.post(f"/oauth/{site.tenant.slug}/token", {"client_id": client_id, "grant_type": "authorization_code",
                      "code": code, "redirect_uri": redirect, "code_verifier": verifier})
    assert token.status_code == 200, (origin, token.content)
    return token.json()["access_token"]


def connect(site: Site, name: str, upstream_url: str, *, account: str, gateway: bool = False) -> Any:
    """`name` connects an account (the gateway's own, `gateway`) as a person does: the console's page,
    the backend's sign-in page, back to the console."""
    http = site.login(name)
    page = f"/console/t/{site.tenant.slug}/accounts/{site.backend.pk}/connect/" + ("?gateway=1" if gateway else "")
    shown = http.get(page)
    assert shown.status_code == 200 and upstream_url in shown.content.decode()
    # The form's answer leads to the backend's authorization server: the page's policy lets it.
    assert f"form-action 'self' {upstream_url}" in shown["Content-Security-Policy"]
    started = http.post(page, {"gateway": "1"} if gateway else {})
    assert started.status_code == 302 and started["Location"].startswith(f"{upstream_url}/authorize?")
    login_page = httpx.get(started["Location"])
    assert login_page.status_code == 302, login_page.text
    request_id = parse_qs(urlsplit(login_page.headers["location"]).query)["request"][0]
    back = httpx.post(f"{upstream_url}/login", data={"request": request_id, "account": account, "decision": "allow"})
    target = urlsplit(back.headers["location"])
    assert target.netloc == http.defaults["HTTP_HOST"], target  # the gateway's own redirect URI
    done = http.get(f"{target.path}?{target.query}")
    shown = [str(m) for m in done.wsgi_request._messages]
    assert done.status_code == 302 and any("is connected" in m for m in shown), shown
    return done


def call(site: Site, token: str, name: str = "whoami", *, capabilities: Any = None) -> dict[str, Any]:
    """A stateless-era tools/call, the client declaring `capabilities`."""
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": capabilities or {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "1"}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": name, "arguments": {"a": 1, "b": 2} if name == "add" else {}, "_meta": meta}}
    headers = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": name}
    return message_of(post(site.url, body, key=token, headers=headers))


def tools_list(site: Site, token: str) -> dict[str, Any]:
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}}
    return message_of(post(site.url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}},
                           key=token, headers={"mcp-protocol-version": MODERN, "mcp-method": "tools/list"}))


def legacy_call(site: Site, token: str, *, capabilities: Any) -> dict[str, Any]:
    """A handshake-era (2025-11-25) session's tools/call."""
    opened = post(site.url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "raw", "version": "1"}}},
        key=token)
    session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    post(site.url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, key=token, headers=session)
    return message_of(post(site.url, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                      "params": {"name": "whoami", "arguments": {}}}, key=token, headers=session))


URL_ELICITATION = {"elicitation": {"url": {}}}


def test_a_person_connects_their_own_account_and_their_calls_reach_the_backend_as_it(
    site: Site, upstream_url: str, gateway_url: str
) -> None:
    alice, bob = person_token(site, "alice"), person_token(site, "bob")
    connect_url = f"{gateway_url}/console/t/{site.tenant.slug}/accounts/{site.backend.pk}/connect/"

    # Not connected: each era is told where to connect, in the way it can show a person.
    answer = call(site, alice, capabilities=URL_ELICITATION)
    assert "result" in answer, answer
    asked = answer["result"]
    assert asked["resultType"] == "input_required"
    (request,) = asked["inputRequests"].values()
    assert request["method"] == "elicitation/create" and request["params"]["mode"] == "url"
    assert request["params"]["url"] == connect_url and "tracker" in request["params"]["message"]
    error = legacy_call(site, alice, capabilities=URL_ELICITATION)["error"]
    assert error["code"] == -32042 and error["data"]["elicitations"][0]["url"] == connect_url
    assert error["data"]["elicitations"][0]["mode"] == "url" and error["data"]["elicitations"][0]["elicitationId"]
    plain = call(site, alice)["error"]  # a client that cannot open URLs gets the link in words
    assert plain["code"] == -32004 and connect_url in plain["message"]

    done = connect(site, "alice", upstream_url, account="alice@tracker")
    assert done.status_code == 302 and done["Location"] == f"/console/t/{site.tenant.slug}/accounts/"
    server = UpstreamServer.objects.get(backend=site.backend)
    assert server.registration == "dynamic" and server.resource == f"{upstream_url}/mcp"
    assert stats(upstream_url)["registered"] >= 1

    answer = call(site, alice)
    assert answer.get("result", {}).get("content", [{}])[0].get("text") == "alice@tracker", answer
    assert call(site, alice, "add")["result"]["content"][0]["text"] == "3.0"
    assert call(site, bob, capabilities=URL_ELICITATION)["result"]["resultType"] == "input_required"  # bob: not yet
    connect(site, "bob", upstream_url, account="bob@tracker")
    time.sleep(0.3)  # GATEWAY_PERSON_TOKEN_FRESH_SECONDS in the tests: bob's "not connected" was kept that long
    assert call(site, bob)["result"]["content"][0]["text"] == "bob@tracker"
    assert call(site, alice)["result"]["content"][0]["text"] == "alice@tracker"

    # What the backend saw were its own tokens, never the gateway's; the tokens rest encrypted.
    bearers = set(stats(upstream_url)["bearers"])
    assert alice not in bearers and bob not in bearers and all(b.startswith("up-") for b in bearers)
    stored = Connection.objects.get(backend=site.backend, user=site.users["alice"])
    assert not stored.access_token.startswith("up-") and not stored.refresh_token.startswith("upr-")
    page = site.login("alice").get(f"/console/t/{site.tenant.slug}/accounts/").content.decode()
    assert "connected" in page and "up-" not in page
    rows = audit_rows(site.tenant.slug, 9, tenant_id=site.tenant.pk)
    assert {r.principal for r in rows} == {f"token:alice-{site.tenant.slug}@{gateway_url}/oauth/{site.tenant.slug}",
                                           f"token:bob-{site.tenant.slug}@{gateway_url}/oauth/{site.tenant.slug}"}
    assert all(alice not in str(r.__dict__) for r in rows)


def test_an_expired_token_is_refreshed_once_and_a_refused_refresh_asks_to_connect_again(
    site: Site, upstream_url: str
) -> None:
    alice = person_token(site, "alice")
    connect(site, "alice", upstream_url, account="alice@tracker")
    before = stats(upstream_url)["refreshed"]
    stored = Connection.objects.get(user=site.users["alice"])
    # Its access token ends: the database says so, and the instances' shared copy is gone with it.
    Connection.objects.filter(pk=stored.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    redis_client().delete(token_cache_key(backend_id=site.backend.pk, person=site.users["alice"].username))

    async def together() -> list[dict[str, Any]]:
        return await asyncio.gather(*(asyncio.to_thread(call, site, alice) for _ in range(6)))

    answers = asyncio.run(together())
    assert {a["result"]["content"][0]["text"] for a in answers} == {"alice@tracker"}
    assert stats(upstream_url)["refreshed"] == before + 1  # one refresh, whoever asked
    refreshed = Connection.objects.get(pk=stored.pk)
    assert refreshed.refresh_token != stored.refresh_token and refreshed.refreshed_at is not None  # rotated

    # The person revoked the app at the backend: the next refresh is refused, the connection ends.
    httpx.post(f"{upstream_url}/__revoke_all")
    Connection.objects.filter(pk=stored.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    redis_client().delete(token_cache_key(backend_id=site.backend.pk, person=site.users["alice"].username))
    time.sleep(0.3)  # GATEWAY_PERSON_TOKEN_FRESH_SECONDS in the tests: the instance's kept token lapses
    asked = call(site, alice, capabilities=URL_ELICITATION)["result"]
    (request,) = asked["inputRequests"].values()
    assert "ended the connection" in request["params"]["message"]
    assert not Connection.objects.filter(pk=stored.pk).exists()


def test_disconnecting_revokes_at_the_backend_and_stops_the_calls(site: Site, upstream_url: str) -> None:
    alice = person_token(site, "alice")
    connect(site, "alice", upstream_url, account="alice@tracker")
    assert call(site, alice)["result"]["content"][0]["text"] == "alice@tracker"
    connection = Connection.objects.get(user=site.users["alice"])
    http = site.login("bob")  # someone else's connection is not theirs to end
    assert http.post(f"/console/t/{site.tenant.slug}/accounts/connections/{connection.pk}/disconnect/").status_code == 404
    connect(site, "bob", upstream_url, account="bob@tracker")  # ... but a tenant admin ends anyone's
    bobs = Connection.objects.get(user=site.users["bob"])
    admin = site.login("admin")
    assert f"bob-{site.tenant.slug}" in admin.get(f"/console/t/{site.tenant.slug}/accounts/").content.decode()
    assert admin.post(f"/console/t/{site.tenant.slug}/accounts/connections/{bobs.pk}/disconnect/").status_code == 302
    assert not Connection.objects.filter(pk=bobs.pk).exists()
    http = site.login("alice")
    confirm = http.get(f"/console/t/{site.tenant.slug}/accounts/connections/{connection.pk}/disconnect/")
    assert "Disconnect your" not in confirm.content.decode() and "Disconnect" in confirm.content.decode()
    revoked = stats(upstream_url)["revoked"]
    assert http.post(f"/console/t/{site.tenant.slug}/accounts/connections/{connection.pk}/disconnect/").status_code == 302
    assert stats(upstream_url)["revoked"] > revoked and not Connection.objects.exists()
    time.sleep(0.3)  # GATEWAY_PERSON_TOKEN_FRESH_SECONDS in the tests
    assert call(site, alice)["error"]["code"] == -32004


def test_a_caller_who_is_no_person_is_told_so(site: Site, upstream_url: str) -> None:
    key = factories.api_key_factory(tenant=site.tenant, name="robot").secret
    error = call(site, key)["error"]
    assert error["code"] == -32004 and "key:robot is no person" in error["message"]


def test_the_answer_from_the_sign_in_is_bound_to_who_started_it(site: Site, upstream_url: str) -> None:
    http = site.login("alice")
    page = f"/console/t/{site.tenant.slug}/accounts/{site.backend.pk}/connect/"
    started = http.post(page)
    login_page = httpx.get(started["Location"])
    request_id = parse_qs(urlsplit(login_page.headers["location"]).query)["request"][0]
    back = urlsplit(httpx.post(f"{upstream_url}/login", data={"request": request_id, "account": "mallory@tracker",
                                                               "decision": "allow"}).headers["location"])
    # Bob is lured to alice's answer (or an attacker's code to his): refused, nothing stored.
    answer = site.login("bob").get(f"{back.path}?{back.query}", follow=True)
    assert "started by someone else" in answer.content.decode()
    # The state is good once: alice cannot use it after that either.
    answer = site.login("alice").get(f"{back.path}?{back.query}", follow=True)
    assert "unknown or too old" in answer.content.decode() and not Connection.objects.exists()
    # An answer naming another issuer (mix-up, RFC 9207) is refused.
    started = site.login("alice").post(page)
    request_id = parse_qs(urlsplit(httpx.get(started["Location"]).headers["location"]).query)["request"][0]
    back = urlsplit(httpx.post(f"{upstream_url}/login", data={"request": request_id, "account": "a",
                                                               "decision": "allow"}).headers["location"])
    answer = site.console.get(f"{back.path}?{back.query}&iss=https%3A%2F%2Fevil.example", follow=True)
    assert "did not come from the backend&#x27;s authorization server" in answer.content.decode()
    assert not Connection.objects.exists()


def test_the_gateways_own_account_lists_the_backends_tools_on_a_host_of_several(
    site: Site, upstream_url: str, demo_backend_url: str, gateway_url: str
) -> None:
    demo = factories.backend_factory(tenant=site.tenant, urls=[demo_backend_url])
    factories.virtual_host_factory(tenant=site.tenant, slug="both", mounts={"tracker": site.backend, "demo": demo})
    both = Site(site.tenant, site.backend, f"{gateway_url}/mcp/{site.tenant.slug}/both", site.console, site.users)
    alice = person_token(both, "alice")  # a token for that host
    assert site.login("alice").get(f"/console/t/{site.tenant.slug}/accounts/{site.backend.pk}/connect/?gateway=1"
                                   ).status_code == 404  # admins only
    connect(site, "admin", upstream_url, account="service@tracker", gateway=True)
    connect(site, "alice", upstream_url, account="alice@tracker")
    listed = tools_list(both, alice)
    assert "result" in listed, listed
    names = {t["name"] for t in listed["result"]["tools"]}
    whoami = next(n for n in names if n.endswith("whoami"))
    assert call(both, alice, whoami)["result"]["content"][0]["text"] == "alice@tracker"  # the call: hers
    page = site.login("admin").get(f"/console/t/{site.tenant.slug}/accounts/").content.decode()
    assert "the gateway" in page and f"alice-{site.tenant.slug}" in page


def test_a_key_its_owner_issued_to_act_as_them_reaches_the_backend_with_their_account(
    site: Site, upstream_url: str
) -> None:
    connect(site, "alice", upstream_url, account="alice@tracker")
    http = site.login("alice")
    created = http.post(f"/console/t/{site.tenant.slug}/keys/new/", {"name": "alices-agent", "acts_as_owner": "on"},
                        follow=True)
    secret = created.context["secret"]
    assert call(site, secret)["result"]["content"][0]["text"] == "alice@tracker"
    plain = http.post(f"/console/t/{site.tenant.slug}/keys/new/", {"name": "alices-robot"}, follow=True)
    error = call(site, plain.context["secret"])["error"]  # a key of hers that is not hers to act as
    assert error["code"] == -32004 and "key:alices-robot is no person" in error["message"]


def _expire(site: Site, name: str) -> None:
    """The person's access token ends: the database says so, and the instances' shared copy goes."""
    Connection.objects.filter(user=site.users[name]).update(expires_at=timezone.now() - timedelta(seconds=1))
    redis_client().delete(token_cache_key(backend_id=site.backend.pk, person=site.users[name].username))
    time.sleep(0.3)  # GATEWAY_PERSON_TOKEN_FRESH_SECONDS in the tests


def test_a_server_refusing_the_gateways_client_leaves_the_connection_standing(site: Site, upstream_url: str) -> None:
    alice = person_token(site, "alice")
    connect(site, "alice", upstream_url, account="alice@tracker")
    server = UpstreamServer.objects.get(backend=site.backend)
    right = server.client_secret
    UpstreamServer.objects.filter(pk=server.pk).update(client_secret=secret_encrypt("not-the-secret"))
    _expire(site, "alice")
    error = call(site, alice, capabilities=URL_ELICITATION)["error"]
    assert error["code"] == -32004 and "refused the gateway's client (invalid_client)" in error["message"]
    assert Connection.objects.filter(user=site.users["alice"]).exists()  # connecting again would not help
    UpstreamServer.objects.filter(pk=server.pk).update(client_secret=right)
    time.sleep(0.3)
    assert call(site, alice)["result"]["content"][0]["text"] == "alice@tracker"


def test_a_new_client_at_the_backends_server_ends_its_connections(site: Site, upstream_url: str) -> None:
    alice = person_token(site, "alice")
    connect(site, "alice", upstream_url, account="alice@tracker")
    revoked = stats(upstream_url)["revoked"]
    egress_credential_set(backend=site.backend, source="per_person", scope="tracker")  # set again: found again
    site.login("admin").get(f"/console/t/{site.tenant.slug}/accounts/{site.backend.pk}/connect/")
    assert not Connection.objects.exists() and stats(upstream_url)["revoked"] > revoked
    time.sleep(0.3)
    asked = call(site, alice, capabilities=URL_ELICITATION)["result"]
    assert asked["resultType"] == "input_required"


def test_a_person_who_left_the_tenant_loses_their_connections(site: Site, upstream_url: str) -> None:
    alice = person_token(site, "alice")
    connect(site, "alice", upstream_url, account="alice@tracker")
    Membership.objects.filter(user=site.users["alice"]).delete()
    _expire(site, "alice")
    answer = call(site, alice, capabilities=URL_ELICITATION)
    (request,) = answer["result"]["inputRequests"].values()
    assert "has left the tenant" in request["params"]["message"]
    assert not Connection.objects.exists()


def test_a_backend_moved_off_its_resource_gets_no_persons_token(
    site: Site, upstream_url: str, demo_backend_url: str
) -> None:
    alice = person_token(site, "alice")
    connect(site, "alice", upstream_url, account="alice@tracker")
    backend_update(backend=site.backend, kind="mcp", transport="streamable-http", urls=[demo_backend_url],
                   timeout_seconds=30)  # another server altogether: alice's token must not go there
    for _ in range(50):  # the instance's snapshot follows within GATEWAY_SNAPSHOT_CHECK_SECONDS
        answer = call(site, alice, capabilities=URL_ELICITATION)
        if "result" in answer and answer["result"].get("resultType") == "input_required":
            break
        time.sleep(0.1)
    (request,) = answer["result"]["inputRequests"].values()
    assert "moved off the address its sign-in was found for" in request["params"]["message"]


def test_without_the_gateways_account_a_host_of_several_still_calls_as_each_person(
    site: Site, upstream_url: str, demo_backend_url: str, gateway_url: str
) -> None:
    demo = factories.backend_factory(tenant=site.tenant, urls=[demo_backend_url])
    factories.virtual_host_factory(tenant=site.tenant, slug="both", mounts={"tracker": site.backend, "demo": demo})
    both = Site(site.tenant, site.backend, f"{gateway_url}/mcp/{site.tenant.slug}/both", site.console, site.users)
    alice = person_token(both, "alice")
    connect(site, "alice", upstream_url, account="alice@tracker")
    listed = tools_list(both, alice)
    names = {t["name"] for t in listed["result"]["tools"]}
    assert not any("whoami" in n for n in names)  # the gateway had no account to list the tracker's tools with
    # The gateway's own refusal there is not the backend's: the person's call still goes, as them.
    whoami = next(n for n in names if n.endswith("echo")).replace("demo", "tracker").replace("echo", "whoami")
    assert call(both, alice, whoami)["result"]["content"][0]["text"] == "alice@tracker"
