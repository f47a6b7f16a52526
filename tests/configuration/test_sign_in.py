"""A tenant's `sign_in` in `gateway apply` / export: the gateway's authorization server for its hosts."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from apps.configuration.document import ConfigInvalid
from apps.configuration.services import config_apply, config_export
from apps.oauth.models import AuthorizationServer, IdentityProvider
from tests.configuration.documents import README_EXAMPLE, assert_refused_and_nothing_written

pytestmark = pytest.mark.django_db


def _with(sign_in: str) -> str:
    return README_EXAMPLE.replace("    teams: [platform]\n", f"    teams: [platform]\n    sign_in: {sign_in}\n", 1)


def _stored() -> tuple[bool, bool, bool] | None:
    server = AuthorizationServer.objects.filter(tenant__slug="acme").first()
    return (server.enabled, server.allow_registration, server.allow_metadata_documents) if server else None


def _exported() -> object:
    return next(t for t in yaml.safe_load(config_export())["tenants"] if t["slug"] == "acme").get("sign_in")


def test_sign_in_applies_exports_and_applies_again_unchanged() -> None:
    config_apply(document=README_EXAMPLE, prune=False)
    assert _stored() is None and _exported() is None
    report = config_apply(document=_with("true"), prune=False)
    assert _stored() == (True, True, True) and _exported() is True
    assert any("sign-in on" in str(c) for c in report.changes), report.changes
    key = AuthorizationServer.objects.get().key_id
    assert all(c.action == "unchanged" for c in config_apply(document=_with("true"), prune=False).changes)
    config_apply(document=_with("{registration: false}"), prune=False)
    assert _stored() == (True, False, True) and _exported() == {"registration": False, "metadata_documents": True}
    config_apply(document=_with("false"), prune=False)
    assert _stored() == (False, False, True) and _exported() is False
    config_apply(document=README_EXAMPLE, prune=True)  # saying nothing leaves it, also with --prune
    assert _stored() == (False, False, True)
    config_apply(document=_with("true"), prune=False)
    assert AuthorizationServer.objects.get().key_id == key  # switched back on: the same key


@pytest.mark.parametrize(("value", "expected"), [
    ('"yes"', "tenants[0].sign_in: sign_in must be true, false, or a mapping"),
    ("{registration: maybe}", "tenants[0].sign_in.registration: registration must be true or false"),
    ("{dcr: true}", "tenants[0].sign_in.dcr: unknown field"),
])
def test_a_bad_sign_in_is_refused_and_nothing_written(value: str, expected: str) -> None:
    assert_refused_and_nothing_written(stored_first=_with("true"), broken=_with(value), expected=expected, stored=_stored)


@pytest.fixture
def provider_url() -> Iterator[str]:
    """An OpenID provider's discovery document, as `identity_provider` needs it readable."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
            body = json.dumps({"issuer": issuer, "authorization_endpoint": f"{issuer}/auth",
                               "token_endpoint": f"{issuer}/token", "jwks_uri": f"{issuer}/jwks"}).encode()
            found = self.path == "/.well-known/openid-configuration"
            self.send_response(200 if found else 404)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(body if found else b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _with_provider(entry: str) -> str:
    return README_EXAMPLE.replace("    teams: [platform]\n", f"    teams: [platform]\n    identity_provider: {entry}\n", 1)


def test_an_identity_provider_applies_exports_without_its_secret_and_is_removed(
    provider_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACME_IDP_SECRET", "idp-s3cret")
    entry = f"{{issuer: {provider_url}, client_id: gateway, client_secret_env: ACME_IDP_SECRET, label: Acme SSO}}"
    report = config_apply(document=_with_provider(entry), prune=False)
    assert any(c.kind == "identity_provider" and c.action == "updated" for c in report.changes), report.changes
    stored = IdentityProvider.objects.get(tenant__slug="acme")
    assert (stored.issuer, stored.client_id, stored.label) == (provider_url, "gateway", "Acme SSO")
    assert "idp-s3cret" not in stored.client_secret  # encrypted
    exported = next(t for t in yaml.safe_load(config_export())["tenants"] if t["slug"] == "acme")["identity_provider"]
    assert exported == {"issuer": provider_url, "client_id": "gateway", "label": "Acme SSO"}  # no secret
    assert all(c.action == "unchanged" for c in config_apply(document=_with_provider(entry), prune=False).changes)
    # The export applied again keeps the secret it does not hold.
    config_apply(document=_with_provider(f"{{issuer: {provider_url}, client_id: gateway, label: Acme SSO}}"), prune=False)
    assert IdentityProvider.objects.get().client_secret == stored.client_secret
    config_apply(document=_with_provider("null"), prune=False)
    assert not IdentityProvider.objects.exists()


@pytest.mark.parametrize(("entry", "expected"), [
    ("{client_id: gateway}", "tenants[0].identity_provider.issuer: is required"),
    ("{issuer: 'ftp://idp.example', client_id: gateway}", "tenants[0].identity_provider.issuer: the issuer"),
    ("{issuer: 'https://idp.example', client_id: gateway, scope: email}",
     "tenants[0].identity_provider.scope: the scopes must include openid"),
    ("{issuer: 'https://idp.example', client_id: gateway, role: owner}",
     "tenants[0].identity_provider.role: unknown role 'owner'"),
])
def test_a_bad_identity_provider_is_refused_at_its_path(entry: str, expected: str) -> None:
    with pytest.raises(ConfigInvalid, match=re.escape(expected)):
        config_apply(document=_with_provider(entry), prune=False)
    assert not IdentityProvider.objects.exists()
