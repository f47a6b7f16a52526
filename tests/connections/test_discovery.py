"""Finding a backend's authorization server (apps/connections/discovery.py) against real servers: the
official SDK's server-side auth finds everything; a backend that asks for no credential, one whose
401 names no metadata, an address the guard refuses, and an admin-registered client are each told or
used as such."""

from __future__ import annotations

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from apps.catalog.credentials import egress_credential_set
from apps.connections.discovery import DiscoveryFailed, discover
from apps.connections.models import UpstreamServer
from apps.connections.services import ConnectionFailed, connection_start, upstream_server_ensure
from tests import factories
from tests.processes import backend_argv, free_port, running

pytestmark = pytest.mark.slow


def test_the_sdks_authorization_server_is_found_from_the_backends_401(upstream_url: str) -> None:
    found = discover(backend_url=f"{upstream_url}/mcp", allow_private=True)
    assert found.resource == f"{upstream_url}/mcp"
    assert found.issuer.rstrip("/") == upstream_url
    assert found.authorization_endpoint == f"{upstream_url}/authorize"
    assert found.token_endpoint == f"{upstream_url}/token" and found.registration_endpoint == f"{upstream_url}/register"
    assert found.scope == "tracker" and found.auth_methods[0] == "client_secret_post"


def test_what_cannot_be_used_is_said_at_its_step(demo_backend_url: str) -> None:
    with pytest.raises(DiscoveryFailed, match="answered HTTP 200 without a credential, not 401: it does not ask"):
        discover(backend_url=demo_backend_url, allow_private=True)
    port = free_port()
    argv = backend_argv("tests.backends.auth_server", port) + ["--tokens", "t"]
    with running(argv, port, log_name="auth-backend"):  # 401 with a bare `Bearer` challenge, and no metadata
        with pytest.raises(DiscoveryFailed, match="publishes no protected-resource metadata"):
            discover(backend_url=f"http://127.0.0.1:{port}/mcp", allow_private=True)
    with pytest.raises(DiscoveryFailed, match="the address is not allowed"):
        discover(backend_url=demo_backend_url, allow_private=False)
    with pytest.raises(DiscoveryFailed, match="is not an https URL"):
        discover(backend_url="http://tracker.example.test/mcp", allow_private=True)


def test_a_client_an_admin_registered_is_used_as_given(transactional_db: None, upstream_url: str) -> None:
    redirect = "http://127.0.0.1:8000/console/t/acme/accounts/callback/"
    registered = httpx.post(f"{upstream_url}/register", json={
        "redirect_uris": [redirect], "client_name": "gateway (by hand)", "token_endpoint_auth_method": "client_secret_post",
        "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"], "scope": "tracker"}).json()
    tenant = factories.tenant_factory(slug="acme")
    backend = factories.backend_factory(tenant=tenant, urls=[f"{upstream_url}/mcp"])
    egress_credential_set(backend=backend, source="per_person", client_id=registered["client_id"],
                          secret=registered["client_secret"], client_auth="client_secret_post", scope="tracker")
    before = httpx.get(f"{upstream_url}/__stats").json()["registered"]
    server = upstream_server_ensure(backend=backend, redirect_uri=redirect)
    assert (server.registration, server.client_id, server.client_auth) == ("preregistered", registered["client_id"],
                                                                           "client_secret_post")
    assert httpx.get(f"{upstream_url}/__stats").json()["registered"] == before  # the gateway registered nothing
    assert registered["client_secret"] not in server.client_secret  # encrypted at rest
    user = get_user_model().objects.create_user(username="ada")
    url = connection_start(backend=backend, user=user, redirect_uri=redirect)
    assert httpx.get(url).status_code == 302  # the server knows the client and its redirect URI
    # Changing the credential finds the server again (the client is the new one).
    egress_credential_set(backend=backend, source="per_person")
    assert upstream_server_ensure(backend=backend, redirect_uri=redirect).registration == "dynamic"
    assert UpstreamServer.objects.count() == 1


def test_only_a_per_person_backend_is_connected(transactional_db: None, upstream_url: str, admin_client: Client) -> None:
    backend = factories.backend_factory(urls=[f"{upstream_url}/mcp"])
    with pytest.raises(ConnectionFailed, match="does not take each person's own account"):
        upstream_server_ensure(backend=backend, redirect_uri="http://127.0.0.1/cb")
    response = admin_client.get(f"/console/t/{backend.tenant.slug}/accounts/{backend.pk}/connect/")
    assert response.status_code == 404
