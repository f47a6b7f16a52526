"""A backend that is another tenant's virtual host on a gateway, protected by that tenant's own
authorization server (apps/oauth), reached per person: the gateway discovers and registers with a
server it did not write for this (RFC 7591), the person consents there, and their calls reach the
other host as them. And with an https address, the gateway is known by its client metadata document
instead of registering."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.core.wsgi import get_wsgi_application
from django.test import Client

from apps.catalog.credentials import egress_credential_set
from apps.connections.models import Connection, UpstreamServer
from apps.connections.services import upstream_server_ensure
from apps.oauth.client_documents import client_document_get
from apps.oauth.models import Grant, OAuthClient
from apps.oauth.services import authorization_server_enable
from apps.tenants.services import membership_set
from tests import factories
from tests.connections.test_connected_accounts import Site, call, person_token

pytestmark = pytest.mark.slow


def test_a_person_reaches_another_tenants_host_as_themselves(
    transactional_db: None, gateway_url: str, demo_backend_url: str
) -> None:
    upstream = factories.tenant_factory(name="Upstream Co")
    authorization_server_enable(tenant=upstream)
    factories.virtual_host_factory(tenant=upstream, slug="main", mounts={"demo": factories.backend_factory(
        tenant=upstream, urls=[demo_backend_url])})
    tenant = factories.tenant_factory()
    authorization_server_enable(tenant=tenant)
    backend = factories.backend_factory(tenant=tenant, name="upstream-gw", urls=[f"{gateway_url}/mcp/{upstream.slug}/main"])
    egress_credential_set(backend=backend, source="per_person")
    factories.virtual_host_factory(tenant=tenant, slug="main", mounts={"up": backend})
    alice = get_user_model().objects.create_user(username=f"alice-{tenant.slug}", password="pw")
    for joined in (tenant, upstream):
        membership_set(tenant=joined, user=alice, role="member")
    site = Site(tenant, backend, f"{gateway_url}/mcp/{tenant.slug}/main", Client(HTTP_HOST=urlsplit(gateway_url).netloc),
                {"alice": alice})

    http = site.login("alice")
    started = http.post(f"/console/t/{tenant.slug}/accounts/{backend.pk}/connect/")
    assert started.status_code == 302, started.content
    authorize = urlsplit(started["Location"])
    assert authorize.path == f"/oauth/{upstream.slug}/authorize"  # the other tenant's server, found from the 401
    assert UpstreamServer.objects.get().registration == "dynamic"  # (http: no metadata document to be known by)
    consent = http.post(f"{authorize.path}?{authorize.query}", {"decision": "allow"})
    answer = urlsplit(consent["Location"])
    assert answer.path == f"/console/t/{tenant.slug}/accounts/callback/" and "iss=" in answer.query
    done = http.get(f"{answer.path}?{answer.query}")
    assert done.status_code == 302 and Connection.objects.filter(user=alice).exists()
    grant: Any = Grant.objects.get(tenant=upstream)
    assert grant.user == alice and grant.client == OAuthClient.objects.get(tenant=upstream)

    token = person_token(site, "alice")
    reply = call(site, token, "echo")
    assert "result" in reply, reply
    reply = call(site, token, "add")
    assert reply["result"]["content"][0]["text"] == "3.0"


def test_with_an_https_address_the_gateway_is_known_by_its_metadata_document(
    transactional_db: None, gateway_url: str, demo_backend_url: str
) -> None:
    """The gateway's document is taken by a server that knows clients so (the gateway's own
    authorization server, fetching it here through an in-process transport instead of TLS), and the
    person connects as that client: a public client with PKCE, nothing registered."""
    upstream = factories.tenant_factory()
    authorization_server_enable(tenant=upstream)  # it takes clients known by their metadata document
    factories.virtual_host_factory(tenant=upstream, slug="main", mounts={"demo": factories.backend_factory(
        tenant=upstream, urls=[demo_backend_url])})
    tenant = factories.tenant_factory(name="Downstream")
    backend = factories.backend_factory(tenant=tenant, urls=[f"{gateway_url}/mcp/{upstream.slug}/main"])
    egress_credential_set(backend=backend, source="per_person")
    alice = get_user_model().objects.create_user(username=f"alice-{tenant.slug}", password="pw")
    for joined in (tenant, upstream):
        membership_set(tenant=joined, user=alice, role="member")
    redirect = f"https://testserver/console/t/{tenant.slug}/accounts/callback/"
    server = upstream_server_ensure(backend=backend, redirect_uri=redirect)
    document_url = f"https://testserver/oauth/{tenant.slug}/clients/{backend.pk}"
    assert (server.registration, server.client_id, server.client_auth) == ("metadata_document", document_url, "none")
    assert not OAuthClient.objects.exists()  # nothing registered
    document = Client().get(f"/oauth/{tenant.slug}/clients/{backend.pk}", secure=True)
    assert document.status_code == 200 and document.json() == {
        "client_id": document_url, "client_name": "MCP gateway (Downstream)", "redirect_uris": [redirect],
        "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
        "token_endpoint_auth_method": "none"}
    assert Client().get(f"/oauth/{tenant.slug}/clients/{backend.pk + 1000}").status_code == 404

    # The upstream server fetches the document (kept a while: it is not fetched again below) and takes it.
    known = client_document_get(tenant=upstream, url=document_url, http=lambda: httpx.Client(
        transport=httpx.WSGITransport(app=get_wsgi_application())))
    assert (known.kind, known.client_id, known.redirect_uris) == ("metadata_document", document_url, [redirect])
    console = Client(HTTP_HOST="testserver")
    console.force_login(alice)
    started = console.post(f"/console/t/{tenant.slug}/accounts/{backend.pk}/connect/", secure=True)
    authorize = urlsplit(started["Location"])
    assert authorize.path == f"/oauth/{upstream.slug}/authorize" and f"client_id={quote(document_url, safe='')}" in authorize.query
    at_upstream = Client(HTTP_HOST=urlsplit(gateway_url).netloc)
    at_upstream.force_login(alice)
    consent = at_upstream.post(f"{authorize.path}?{authorize.query}", {"decision": "allow"})
    answer = urlsplit(consent["Location"])
    assert f"https://{answer.netloc}{answer.path}" == redirect, consent["Location"]
    done = console.get(f"{answer.path}?{answer.query}", secure=True)
    assert done.status_code == 302 and Connection.objects.filter(user=alice).exists()  # the code, with PKCE, as a public client
    assert Grant.objects.get(tenant=upstream).client == known
