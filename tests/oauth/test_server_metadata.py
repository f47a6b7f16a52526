"""A tenant's authorization server: its metadata (RFC 8414) where MCP clients look for it, its key
set, and the protected-resource metadata (RFC 9728) of its virtual hosts naming it."""

from __future__ import annotations

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from django.test import Client

from apps.common.secrets import secret_decrypt
from apps.oauth.services import authorization_server_enable, authorization_server_settings_set
from tests.factories import tenant_factory, virtual_host_factory

pytestmark = pytest.mark.django_db

ORIGIN = "http://testserver"


def test_the_metadata_is_where_mcp_clients_look_and_says_what_the_server_does(client: Client) -> None:
    from mcp.client.auth.utils import build_oauth_authorization_server_metadata_discovery_urls
    from mcp.shared.auth import OAuthMetadata

    tenant = tenant_factory()
    authorization_server_enable(tenant=tenant)
    issuer = f"{ORIGIN}/oauth/{tenant.slug}"
    # The official SDK's discovery: the first URL it tries for an issuer with a path.
    first = build_oauth_authorization_server_metadata_discovery_urls(issuer, f"{ORIGIN}/mcp/{tenant.slug}/x")[0]
    response = client.get(first.removeprefix(ORIGIN))
    assert response.status_code == 200 and response["Access-Control-Allow-Origin"] == "*"
    metadata = OAuthMetadata.model_validate(response.json())  # as the SDK reads it
    assert str(metadata.issuer).rstrip("/") == issuer
    assert str(metadata.authorization_endpoint) == f"{issuer}/authorize"
    assert str(metadata.token_endpoint) == f"{issuer}/token" and str(metadata.registration_endpoint) == f"{issuer}/register"
    assert metadata.code_challenge_methods_supported == ["S256"]
    assert metadata.token_endpoint_auth_methods_supported == ["none"]
    body = response.json()
    assert body["authorization_response_iss_parameter_supported"] is True
    assert body["client_id_metadata_document_supported"] is True


def test_switched_off_or_unknown_it_is_not_found_and_without_registration_it_says_so(client: Client) -> None:
    tenant = tenant_factory()
    url = f"/.well-known/oauth-authorization-server/oauth/{tenant.slug}"
    assert client.get(url).status_code == 404  # never switched on
    server = authorization_server_enable(tenant=tenant)
    authorization_server_settings_set(server=server, enabled=True, allow_metadata_documents=True, allow_registration=False)
    assert "registration_endpoint" not in client.get(url).json()
    refused = client.post(f"/oauth/{tenant.slug}/register", {"redirect_uris": ["https://a.example/cb"]},
                          content_type="application/json")
    assert refused.status_code == 403 and "takes no registrations" in refused.json()["error_description"]
    authorization_server_settings_set(server=server, enabled=False, allow_metadata_documents=True, allow_registration=True)
    assert client.get(url).status_code == 404
    assert client.get("/.well-known/oauth-authorization-server/oauth/no-such-tenant").status_code == 404


def test_its_key_set_verifies_what_its_key_signs(client: Client) -> None:
    tenant = tenant_factory()
    server = authorization_server_enable(tenant=tenant)
    assert authorization_server_enable(tenant=tenant).key_id == server.key_id  # enabling again keeps the key
    private = serialization.load_pem_private_key(secret_decrypt(server.signing_key).encode(), password=None)
    assert "PRIVATE" not in server.signing_key  # encrypted at rest
    token = jwt.encode({"sub": "x"}, private, algorithm="ES256", headers={"kid": server.key_id})
    keys = jwt.PyJWKSet.from_dict(client.get(f"/oauth/{tenant.slug}/jwks").json())
    (key,) = keys.keys
    assert key.key_id == server.key_id and jwt.decode(token, key.key, algorithms=["ES256"]) == {"sub": "x"}
    other = authorization_server_enable(tenant=tenant_factory())
    assert other.key_id != server.key_id and other.signing_key != server.signing_key


def test_a_hosts_protected_resource_metadata_names_the_gateways_server_first(client: Client) -> None:
    from apps.tenants.services import token_issuer_set

    tenant = tenant_factory()
    host = virtual_host_factory(tenant=tenant, slug="main")
    url = f"/.well-known/oauth-protected-resource/mcp/{tenant.slug}/{host.slug}"
    assert client.get(url).status_code == 404  # no authorization server at all
    authorization_server_enable(tenant=tenant)
    assert client.get(url).json()["authorization_servers"] == [f"{ORIGIN}/oauth/{tenant.slug}"]
    token_issuer_set(tenant=tenant, issuer="https://login.example.com/", audience="gw", jwks_url="https://login.example.com/jwks")
    assert client.get(url).json()["authorization_servers"] == [f"{ORIGIN}/oauth/{tenant.slug}", "https://login.example.com/"]


def test_the_gateway_takes_its_tokens_only_while_it_is_on() -> None:
    from apps.oauth.selectors import own_issuer_get
    from apps.oauth.services import authorization_server_configure

    tenant = tenant_factory()
    assert own_issuer_get(tenant=tenant) is None
    authorization_server_configure(tenant=tenant, enabled=True, allow_registration=True, allow_metadata_documents=True)
    own = own_issuer_get(tenant=tenant)
    assert own is not None and "PUBLIC KEY" in own.public_key and own.revoked_grants == frozenset()
    view = own.issuer_for(origin="https://gw.example", tenant=tenant.slug, vhost="main")
    assert (view.issuer, view.audience, view.algorithms) == (
        f"https://gw.example/oauth/{tenant.slug}", f"https://gw.example/mcp/{tenant.slug}/main", ("ES256",))
    authorization_server_configure(tenant=tenant, enabled=False, allow_registration=True, allow_metadata_documents=True)
    assert own_issuer_get(tenant=tenant) is None
