"""Clients known by the URL of their metadata document, fetched from a real HTTPS server on
loopback (its certificate made here and trusted by the fetching client: a public CA's cannot be
had on this machine); through the authorize endpoint, the SSRF guard refuses loopback as it should."""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from django.contrib.auth import get_user_model
from django.test import Client

from apps.oauth.client_documents import ClientDocumentRefused, client_document_get
from apps.oauth.models import OAuthClient
from apps.oauth.services import authorization_server_enable, authorization_server_settings_set
from apps.tenants.services import membership_set, tenant_private_networks_set
from tests.factories import tenant_factory, virtual_host_factory

pytestmark = pytest.mark.django_db


class _Documents:
    """An HTTPS server on loopback: path -> (status, headers, body); counts what it served."""

    def __init__(self, tmp: Path) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
        now = datetime.datetime.now(datetime.UTC)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
                .not_valid_after(now + datetime.timedelta(hours=1))
                .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .sign(key, hashes.SHA256()))
        (tmp / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (tmp / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                        serialization.NoEncryption()))
        self.cert = str(tmp / "cert.pem")
        self.pages: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.hits: dict[str, int] = {}
        documents = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                documents.hits[self.path] = documents.hits.get(self.path, 0) + 1
                status, headers, body = documents.pages.get(self.path, (404, {}, b"no"))
                self.send_response(status)
                for header, value in headers.items():
                    self.send_header(header, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(tmp / "cert.pem"), str(tmp / "key.pem"))
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.base = f"https://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def serve(self, path: str, document: Any, status: int = 200, headers: dict[str, str] | None = None) -> str:
        body = document if isinstance(document, bytes) else json.dumps(document).encode()
        self.pages[path] = (status, {"Content-Type": "application/json", **(headers or {})}, body)
        return self.base + path

    def http(self) -> httpx.Client:
        return httpx.Client(verify=ssl.create_default_context(cafile=self.cert), follow_redirects=False, timeout=5)


@pytest.fixture
def documents(tmp_path: Path) -> Iterator[_Documents]:
    served = _Documents(tmp_path)
    yield served
    served.server.shutdown()


def _document(url: str, **changes: Any) -> dict[str, Any]:
    return {"client_id": url, "client_name": "Doc agent", "redirect_uris": ["http://127.0.0.1:5123/cb"],
            "grant_types": ["authorization_code", "refresh_token"], "token_endpoint_auth_method": "none", **changes}


def test_a_document_makes_a_client_and_is_kept_for_a_while(documents: _Documents) -> None:
    tenant = tenant_factory()
    url = documents.base + "/agent/client.json"
    documents.serve("/agent/client.json", _document(url))
    client = client_document_get(tenant=tenant, url=url, http=documents.http)
    assert (client.kind, client.client_name, client.redirect_uris) == ("metadata_document", "Doc agent", ["http://127.0.0.1:5123/cb"])
    assert client_document_get(tenant=tenant, url=url, http=documents.http).pk == client.pk
    assert documents.hits["/agent/client.json"] == 1  # kept: not fetched again within DOCUMENT_SECONDS


@pytest.mark.parametrize(("served", "says"), [
    (lambda url: _document("https://elsewhere.example/client.json"), "another client_id"),
    (lambda url: _document(url, redirect_uris=["http://evil.example/cb"]), "loopback"),
    (lambda url: _document(url, redirect_uris=[]), "redirect_uris"),
    (lambda url: _document(url, token_endpoint_auth_method="private_key_jwt"), "only public clients"),
    (lambda url: _document(url, grant_types=["client_credentials"]), "authorization_code"),
    (lambda url: ["not", "an", "object"], "JSON object"),
    (lambda url: b"{nope", "not JSON"),
    (lambda url: b"{" + b" " * 20_000 + b"}", "over 16384 bytes"),
])
def test_a_document_that_cannot_be_used_is_refused_and_keeps_nothing(
    documents: _Documents, served: Any, says: str,
) -> None:
    tenant = tenant_factory()
    url = documents.base + "/c.json"
    documents.serve("/c.json", served(url))
    with pytest.raises(ClientDocumentRefused, match=says):
        client_document_get(tenant=tenant, url=url, http=documents.http)
    assert not OAuthClient.objects.exists()


def test_redirects_and_errors_are_not_followed(documents: _Documents) -> None:
    tenant = tenant_factory()
    moved = documents.serve("/moved.json", b"", status=302, headers={"Location": documents.base + "/c.json"})
    with pytest.raises(ClientDocumentRefused, match="answered a redirect"):
        client_document_get(tenant=tenant, url=moved, http=documents.http)
    with pytest.raises(ClientDocumentRefused, match="could not be fetched$"):  # (details in the log only)
        client_document_get(tenant=tenant, url=documents.base + "/missing.json", http=documents.http)
    documents.serve("/missing.json", _document(documents.base + "/missing.json"))
    with pytest.raises(ClientDocumentRefused, match="could not be fetched$"):  # not asked again for a minute
        client_document_get(tenant=tenant, url=documents.base + "/missing.json", http=documents.http)
    assert documents.hits["/missing.json"] == 1


def test_the_consent_page_names_a_document_client_and_the_guard_refuses_private_addresses(documents: _Documents) -> None:
    tenant = tenant_factory()
    virtual_host_factory(tenant=tenant, slug="main")
    tenant = tenant_private_networks_set(tenant=tenant, allowed=False)  # as in production
    authorization_server_enable(tenant=tenant)
    user = get_user_model().objects.create_user(username="dora", password="pw")
    membership_set(tenant=tenant, user=user, role="member")
    http = Client(HTTP_HOST="127.0.0.1")
    http.force_login(user)
    url = documents.base + "/agent.json"
    documents.serve("/agent.json", _document(url))
    params = {"response_type": "code", "client_id": url, "redirect_uri": "http://127.0.0.1:5123/cb", "state": "s",
              "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", "code_challenge_method": "S256",
              "resource": f"http://127.0.0.1/mcp/{tenant.slug}/main"}
    authorize = f"/oauth/{tenant.slug}/authorize?{urlencode(params)}"
    # Only for someone signed in (no one else makes the gateway fetch anything).
    anonymous = Client(HTTP_HOST="127.0.0.1").get(authorize)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/console/login/")
    assert documents.hits.get("/agent.json") is None
    # Fetched by the gateway itself: the document is on loopback, which the SSRF guard refuses.
    refused = http.get(authorize)
    assert refused.status_code == 400 and "could not be fetched" in refused.content.decode()
    assert documents.hits.get("/agent.json") is None  # refused before connecting
    assert not OAuthClient.objects.exists()
    from apps.oauth import client_documents

    client_documents._FAILED.clear()  # (the refusal above is remembered for a minute)
    client_document_get(tenant=tenant, url=url, http=documents.http)  # as if fetched from a public address
    page = http.get(authorize).content.decode()
    assert "Doc agent" in page and "Allow" in page
    server = tenant.authorization_server
    authorization_server_settings_set(server=server, enabled=True, allow_metadata_documents=False, allow_registration=True)
    assert "takes no client metadata documents" in http.get(authorize).content.decode()
