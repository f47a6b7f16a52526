"""Client registration (RFC 7591) at a tenant's authorization server, through Authlib's endpoint:
Authlib checks the metadata's form; this module adds what a public MCP client must meet, and
registers every client as public (`token_endpoint_auth_method` "none": PKCE is its proof, no secret
is issued — RFC 7591 §3.2.1 lets the server substitute values, and MCP clients accept it)."""

from __future__ import annotations

import ipaddress
import re
import secrets
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from authlib.integrations.django_oauth2 import AuthorizationServer as DjangoAuthorizationServer
from authlib.oauth2.rfc7591 import ClientRegistrationEndpoint, InvalidClientMetadataError
from django.http import HttpRequest, HttpResponse

from apps.oauth.models import OAuthClient
from apps.oauth.services import oauth_client_register, oauth_clients_unused_delete
from apps.tenants.models import Tenant

REDIRECT_URIS_MAX = 10
URI_MAX = 2000
CLIENTS_PER_TENANT_MAX = 10_000  # registration is open: a cap keeps a flood from filling the table
_GRANT_TYPES = {"authorization_code", "refresh_token"}


_HOST = re.compile(r"[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?)*|[0-9a-f:.]+")
#: Schemes a browser must never be sent to with a code.
_UNSAFE_SCHEMES = {"javascript", "data", "file", "vbscript", "about", "blob", "filesystem", "ws", "wss", "ftp"}


def redirect_uri_problem(uri: object) -> str:
    """Why `uri` cannot be a redirect URI of a public client ('' when it can): https; http to a
    loopback address (a native app's local listener, RFC 8252 §7.3); or an app's own scheme with a
    host (`cursor://anysphere.cursor-retrieval/oauth/callback`); absolute, with no fragment and no
    user part (`https://good.example@evil.example/` hides where it goes)."""
    if not isinstance(uri, str) or not uri:
        return "a redirect URI must be a non-empty string"
    if len(uri) > URI_MAX:
        return f"a redirect URI is at most {URI_MAX} characters"
    try:
        parts = urlsplit(uri)
        host = parts.hostname
    except ValueError:
        return f"a redirect URI must be an absolute URI: {uri[:100]!r}"
    if parts.fragment or "#" in uri:
        return f"a redirect URI has no fragment: {uri[:100]!r}"
    if "@" in parts.netloc:
        return f"a redirect URI has no user part (it would hide where it goes): {uri[:100]!r}"
    scheme = parts.scheme.lower()
    if not scheme or not host:
        return f"a redirect URI must be an absolute URI with a host: {uri[:100]!r}"
    if not _HOST.fullmatch(host):  # (it also goes into the consent page's Content-Security-Policy)
        return f"a redirect URI's host must be a host name or an IP address: {uri[:100]!r}"
    if scheme == "http":
        if host == "localhost":
            return ""
        try:
            if ipaddress.ip_address(host).is_loopback:
                return ""
        except ValueError:
            pass
        return f"an http redirect URI must be to a loopback address (127.0.0.1, [::1], localhost): {uri[:100]!r}"
    if scheme in _UNSAFE_SCHEMES:
        return f"a redirect URI may not use the scheme {scheme!r}"
    return ""


class _Payload:
    """A registration's metadata after the server's substitutions, as Authlib reads a request's."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data


class _Registration(ClientRegistrationEndpoint):
    def __init__(self, server: DjangoAuthorizationServer, tenant: Tenant, metadata: dict[str, Any]) -> None:
        super().__init__(server)
        self._tenant = tenant
        self._metadata = metadata

    def authenticate_token(self, request: Any) -> bool:
        return True  # open registration (RFC 7591 §3): MCP clients register before anyone signs in

    def get_server_metadata(self) -> dict[str, Any]:
        return self._metadata

    def extract_client_metadata(self, request: Any) -> dict[str, Any]:
        # What a public MCP client must meet is checked first, so the refusal says what is wrong
        # (Authlib's own check says only which claim); then Authlib checks the form of the rest.
        given = request.payload.data
        if not isinstance(given, dict) or not given:
            raise InvalidClientMetadataError("redirect_uris: a client signs people in by redirection: name at least one")
        uris = given.get("redirect_uris")
        if not isinstance(uris, list) or not uris:
            raise InvalidClientMetadataError("redirect_uris: a client signs people in by redirection: name at least one")
        if len(uris) > REDIRECT_URIS_MAX:
            raise InvalidClientMetadataError(f"redirect_uris: at most {REDIRECT_URIS_MAX}")
        for uri in uris:
            problem = redirect_uri_problem(uri)
            if problem:
                raise InvalidClientMetadataError(f"redirect_uris: {problem}")
        grant_types = given.get("grant_types") or ["authorization_code"]
        # Grant types this server has no use for are left out of the registration (§3.2.1 lets it).
        kept = {g for g in grant_types if isinstance(g, str)} & _GRANT_TYPES if isinstance(grant_types, list) else set()
        if "authorization_code" not in kept:
            raise InvalidClientMetadataError("grant_types: a client here signs people in: authorization_code")
        if given.get("response_types", ["code"]) != ["code"]:
            raise InvalidClientMetadataError("response_types: code only")
        name = given.get("client_name")
        if name is not None and (not isinstance(name, str) or len(name) > 200):
            raise InvalidClientMetadataError("client_name: text of at most 200 characters")
        request.payload = _Payload({**given, "token_endpoint_auth_method": "none", "grant_types": sorted(kept),
                                    "response_types": ["code"]})
        return super().extract_client_metadata(request)

    def generate_client_id(self, request: Any) -> str:
        return f"gwc_{secrets.token_urlsafe(24)}"

    def generate_client_secret(self, request: Any) -> None:
        return None  # a public client: no secret

    def save_client(self, client_info: dict[str, Any], client_metadata: dict[str, Any], request: Any) -> OAuthClient:
        if OAuthClient.objects.filter(tenant=self._tenant).count() >= CLIENTS_PER_TENANT_MAX:
            # Registration is open: clients that never signed anyone in make room (after a day).
            oauth_clients_unused_delete(tenant=self._tenant, older_than=timedelta(days=1))
            if OAuthClient.objects.filter(tenant=self._tenant).count() >= CLIENTS_PER_TENANT_MAX:
                raise InvalidClientMetadataError("this authorization server holds as many clients as it may")
        return oauth_client_register(tenant=self._tenant, client_id=client_info["client_id"], metadata=client_metadata)


def client_register_response(*, request: HttpRequest, tenant: Tenant, metadata: dict[str, Any]) -> HttpResponse:
    """Answer a registration request: 201 with the client's information, or 400 with the OAuth
    error (`invalid_client_metadata`, `invalid_redirect_uri`, `invalid_request`) saying why."""
    server = DjangoAuthorizationServer(OAuthClient, OAuthClient)
    server.register_endpoint(_Registration(server, tenant, metadata))
    return server.create_endpoint_response(_Registration.ENDPOINT_NAME, request)
