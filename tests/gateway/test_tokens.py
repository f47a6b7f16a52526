"""JWT access tokens end to end: issuers configured per tenant, keys from a local JWKS server (or a
PEM key), RS256/ES256/EdDSA; the RFC 9728 metadata and challenge; claims mapped to team and subject
so policies and audit see who called."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from apps.kernel.policy import RuleSpec
from apps.policies.services import access_policy_set
from apps.tenants.services import token_issuer_set
from tests import factories
from tests.audit.helpers import audit_rows
from tests.gateway.helpers import message_of, modern

pytestmark = pytest.mark.slow

ISSUER = "https://login.example.test/"
AUDIENCE = "https://gateway.example.test/mcp"
KEYS = {
    "rsa-1": ("RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048)),
    "ec-1": ("ES256", ec.generate_private_key(ec.SECP256R1())),
    "ed-1": ("EdDSA", ed25519.Ed25519PrivateKey.generate()),
}
STRANGER = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def jwk(kid: str, alg: str, key: Any) -> dict[str, Any]:
    algorithm = {"RS256": jwt.algorithms.RSAAlgorithm, "ES256": jwt.algorithms.ECAlgorithm,
                 "EdDSA": jwt.algorithms.OKPAlgorithm}[alg]
    return {**json.loads(algorithm.to_jwk(key.public_key())), "kid": kid, "alg": alg, "use": "sig"}


@pytest.fixture(scope="module")
def jwks_url() -> Iterator[str]:
    body = json.dumps({"keys": [jwk(kid, alg, key) for kid, (alg, key) in KEYS.items()]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/.well-known/jwks.json"
    server.shutdown()


@dataclass(frozen=True)
class Site:
    url: str
    tenant: str
    vhost: str


@pytest.fixture
def site(transactional_db: None, gateway_url: str, demo_backend_url: str, jwks_url: str) -> Site:
    tenant = factories.tenant_factory()
    factories.team_factory(tenant=tenant, slug="platform")
    factories.api_key_factory(tenant=tenant, name="agent")
    backend = factories.backend_factory(tenant=tenant, urls=[demo_backend_url])
    host = factories.virtual_host_factory(tenant=tenant, mounts={"demo": backend})
    token_issuer_set(tenant=tenant, issuer=ISSUER, audience=AUDIENCE, jwks_url=jwks_url)
    # Only the platform team may add; everyone in the tenant may echo.
    access_policy_set(virtual_host=host, default="deny", rules=[
        RuleSpec("platform-adds", "team", "platform", "allow", ["add"]),
        RuleSpec("all-echo", "tenant", tenant.slug, "allow", ["echo"]),
    ])
    return Site(f"{gateway_url}/mcp/{tenant.slug}/{host.slug}", tenant.slug, host.slug)


def token(kid: str = "rsa-1", *, key: Any = None, alg: str | None = None, **claims: Any) -> str:
    default_alg, default_key = KEYS.get(kid, ("RS256", STRANGER))
    now = int(time.time())
    payload = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "team": "platform", "iat": now, "exp": now + 300,
               "scope": "tools:call tools:list", **claims}
    return jwt.encode(payload, key or default_key, algorithm=alg or default_alg, headers={"kid": kid})


def call(site: Site, bearer: str, name: str = "add") -> Any:
    arguments = {"a": 1, "b": 2} if name == "add" else {"text": "hi"}
    return modern(site.url, "tools/call", {"name": name, "arguments": arguments}, key=bearer)


@pytest.mark.parametrize("kid", ["rsa-1", "ec-1", "ed-1"])
def test_tokens_signed_by_the_issuer_are_accepted(site: Site, kid: str) -> None:
    response = call(site, token(kid))
    assert response.status_code == 200
    assert message_of(response)["result"]["content"][0]["text"] == "3.0"


@pytest.mark.parametrize(("bad", "reason"), [
    (lambda: token(exp=int(time.time()) - 120), "expired"),
    (lambda: token(aud="https://elsewhere.test/"), "another audience"),
    (lambda: token(iss="https://impostor.test/"), "issuer is not trusted"),
    (lambda: token("rsa-unknown"), "key id 'rsa-unknown' is not in the issuer's key set"),
    (lambda: token("rsa-1", key=STRANGER), "invalid"),  # the right kid, the wrong signature
    (lambda: token(nbf=int(time.time()) + 600), "not valid yet"),
    (lambda: token("rsa-1", alg="HS256", key="a-shared-secret-that-is-long-enough-for-hs256"), "algorithm"),
    (lambda: token("rsa-1", alg="ES256", key=KEYS["ec-1"][1]), "does not fit"),  # an RSA key id, an EC signature
])
def test_bad_tokens_are_refused_with_a_challenge_naming_the_metadata(site: Site, bad: Any, reason: str) -> None:
    response = call(site, bad())
    assert response.status_code == 401
    body = response.json()["error"]["message"] if "json" in response.headers["content-type"] else response.text
    assert reason in body
    challenge = response.headers["www-authenticate"]
    metadata = f"/.well-known/oauth-protected-resource/mcp/{site.tenant}/{site.vhost}"
    assert 'resource_metadata="http://' in challenge and metadata in challenge and 'error="invalid_token"' in challenge


def test_the_protected_resource_metadata_names_the_issuers(site: Site, gateway_url: str) -> None:
    metadata = httpx.get(f"{gateway_url}/.well-known/oauth-protected-resource/mcp/{site.tenant}/{site.vhost}").json()
    assert metadata["resource"] == site.url
    assert metadata["authorization_servers"] == [ISSUER]
    missing = httpx.get(f"{gateway_url}/.well-known/oauth-protected-resource/mcp/{site.tenant}/nope")
    assert missing.status_code == 404
    unauthenticated = modern(site.url, "tools/list", key=None)
    assert "resource_metadata=" in unauthenticated.headers["www-authenticate"]


def test_claims_become_the_principal_that_policies_and_audit_see(site: Site) -> None:
    assert "result" in message_of(call(site, token(team="platform")))
    outsider = message_of(call(site, token(sub="bob", team="sales")))  # no such team: tenant rules only
    assert outsider["error"]["code"] == -32602  # `add` is hidden from bob, like a missing tool
    assert "result" in message_of(call(site, token(sub="bob", team="sales"), "echo"))
    # A token whose subject has an API key's name is still not that key.
    named_like_key = message_of(call(site, token(sub="agent", team=None)))
    assert named_like_key["error"]["code"] == -32602
    rows = [(r.principal, r.exposed_name) for r in audit_rows(site.tenant, 4)]
    assert rows[0] == (f"token:alice@{ISSUER}", "add")
    assert (f"token:bob@{ISSUER}", "echo") in rows


def test_a_static_public_key_works_without_jwks(transactional_db: None, gateway_url: str, demo_backend_url: str) -> None:
    tenant = factories.tenant_factory()
    backend = factories.backend_factory(tenant=tenant, urls=[demo_backend_url])
    host = factories.virtual_host_factory(tenant=tenant, mounts={"demo": backend})
    private = ec.generate_private_key(ec.SECP256R1())
    pem = private.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    token_issuer_set(tenant=tenant, issuer=ISSUER, audience=AUDIENCE, public_key=pem.decode(), algorithms=["ES256"])
    site = Site(f"{gateway_url}/mcp/{tenant.slug}/{host.slug}", tenant.slug, host.slug)
    assert "result" in message_of(call(site, token("any", key=private, alg="ES256")))
    assert call(site, token("any", key=ec.generate_private_key(ec.SECP256R1()), alg="ES256")).status_code == 401
