"""Clients registering themselves (RFC 7591) at a tenant's authorization server, as the official
SDK's OAuth client does it: public clients only, redirect URIs a person's browser may be sent to."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from django.test import Client

from apps.oauth.models import OAuthClient
from apps.oauth.services import authorization_server_enable
from tests.factories import tenant_factory

pytestmark = pytest.mark.django_db


def _register(client: Client, slug: str, body: Any, **extra: Any) -> Any:
    return client.post(f"/oauth/{slug}/register", body if isinstance(body, bytes | str) else json.dumps(body),
                       content_type="application/json", **extra)


async def _sdk_reads(response: Any) -> Any:
    from mcp.client.auth.oauth2 import check_registration_usable
    from mcp.client.auth.utils import handle_registration_response

    info = await handle_registration_response(httpx.Response(response.status_code, content=response.content))
    check_registration_usable(info)  # the SDK's own judgement of what the server registered
    return info


def test_the_sdks_registration_is_taken_as_a_public_client(client: Client) -> None:
    import asyncio

    from mcp.shared.auth import OAuthClientMetadata

    tenant = tenant_factory()
    authorization_server_enable(tenant=tenant)
    asked = OAuthClientMetadata(redirect_uris=["http://127.0.0.1:33418/callback"], client_name="Some agent",
                                token_endpoint_auth_method="client_secret_post")
    response = _register(client, tenant.slug, asked.model_dump(by_alias=True, mode="json", exclude_none=True))
    assert response.status_code == 201, response.content
    info = asyncio.run(_sdk_reads(response))
    assert info.client_id.startswith("gwc_") and info.client_secret is None
    assert info.token_endpoint_auth_method == "none" and info.grant_types == ["authorization_code", "refresh_token"]
    stored = OAuthClient.objects.get(tenant=tenant, client_id=info.client_id)
    assert (stored.kind, stored.client_name, stored.redirect_uris) == (
        "registered", "Some agent", ["http://127.0.0.1:33418/callback"])


@pytest.mark.parametrize(("metadata", "says"), [
    ({"redirect_uris": ["http://evil.example/cb"]}, "loopback"),
    ({"redirect_uris": ["https://a.example/cb#frag"]}, "fragment"),
    ({"redirect_uris": ["javascript://x/%0aalert(1)"]}, "may not use the scheme 'javascript'"),
    ({"redirect_uris": ["com.example.app:/cb"]}, "with a host"),
    ({"redirect_uris": ["https://good.example@evil.example/cb"]}, "user part"),
    ({"redirect_uris": ["https://a.example;report-uri https://evil/x/cb"]}, "host name or an IP address"),
    ({"redirect_uris": []}, "redirect_uris"),
    ({}, "redirect_uris"),
    ({"redirect_uris": [f"https://a.example/{i}" for i in range(11)]}, "at most 10"),
    ({"redirect_uris": ["https://a.example/cb"], "grant_types": ["password"]}, "authorization_code"),
    ({"redirect_uris": ["https://a.example/cb"], "response_types": ["token"]}, "response_types"),
    ({"redirect_uris": ["https://a.example/cb"], "client_name": "x" * 201}, "client_name"),
])
def test_what_cannot_sign_a_person_in_is_refused_with_the_reason(client: Client, metadata: dict[str, Any], says: str) -> None:
    tenant = tenant_factory()
    authorization_server_enable(tenant=tenant)
    response = _register(client, tenant.slug, metadata)
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["error"] in ("invalid_client_metadata", "invalid_redirect_uri", "invalid_request")
    assert says in body.get("error_description", ""), body
    assert not OAuthClient.objects.filter(tenant=tenant).exists()


def test_broken_bodies_get_specific_errors(client: Client) -> None:
    tenant = tenant_factory()
    authorization_server_enable(tenant=tenant)
    assert _register(client, tenant.slug, b"{not json").json()["error_description"] == "the body is not JSON"
    assert _register(client, tenant.slug, ["https://a.example/cb"]).json()["error"] == "invalid_client_metadata"
    huge = _register(client, tenant.slug, {"redirect_uris": ["https://a.example/cb"], "client_name": "x" * 20_000})
    assert huge.status_code == 413
    assert client.get(f"/oauth/{tenant.slug}/register").status_code == 405
    preflight = client.options(f"/oauth/{tenant.slug}/register")
    assert preflight.status_code == 204 and "POST" in preflight["Access-Control-Allow-Methods"]
    assert _register(client, "no-such-tenant", {"redirect_uris": ["https://a.example/cb"]}).status_code == 404
    assert not OAuthClient.objects.exists()


def test_native_and_web_redirects_are_taken(client: Client) -> None:
    tenant = tenant_factory()
    authorization_server_enable(tenant=tenant)
    uris = ["cursor://anysphere.cursor-retrieval/oauth/callback", "http://localhost:8976/cb", "http://[::1]:9/cb",
            "https://app.example/cb"]
    made = _register(client, tenant.slug, {"redirect_uris": uris})
    assert made.status_code == 201, made.content
    assert made.json()["redirect_uris"] == uris


def test_registration_is_per_tenant(client: Client) -> None:
    one, two = tenant_factory(), tenant_factory()
    authorization_server_enable(tenant=one)
    assert _register(client, two.slug, {"redirect_uris": ["https://a.example/cb"]}).status_code == 404
    made = _register(client, one.slug, {"redirect_uris": ["https://a.example/cb"], "application_type": "web"}).json()
    assert OAuthClient.objects.get(client_id=made["client_id"]).tenant == one
