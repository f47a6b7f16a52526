"""Finding a per-person backend's authorization server and becoming its client, as the MCP
authorization spec has a client do: the backend's 401 names its protected-resource metadata
(RFC 9728; else the well-known URIs), which names the authorization server, whose metadata (RFC 8414,
else OpenID discovery) names its endpoints; the gateway then registers itself (RFC 7591) unless an
admin registered it. Every URL is fetched through the SSRF guard, answers are capped, and each
step's failure is told in words an admin can act on."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from apps.common.guarded_http import guarded_client
from apps.common.oauth_metadata import MetadataUnavailable as DiscoveryFailed
from apps.common.oauth_metadata import json_fetch, secure_url, server_metadata, well_known

_TIMEOUT = 10.0
_RESOURCE_METADATA = re.compile(r'resource_metadata="([^"]+)"')
_SCOPE = re.compile(r'scope="([^"]*)"')


@dataclass(frozen=True)
class Found:
    """What discovery found: the resource and its authorization server's endpoints."""

    resource: str
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str
    revocation_endpoint: str
    scope: str
    iss_parameter: bool
    auth_methods: tuple[str, ...]
    #: The server takes a client identified by the URL of its metadata document (the 2026-07-28 preference).
    metadata_documents: bool = False


def discover(*, backend_url: str, allow_private: bool) -> Found:
    """The authorization server of the MCP server at `backend_url`; raises DiscoveryFailed."""
    with guarded_client(allow_private=allow_private, timeout=_TIMEOUT) as http:
        metadata_url, challenge_scope = _challenge(http, backend_url)
        candidates = [metadata_url] if metadata_url else [  # RFC 9728 §3.1: at the path, then at the root
            well_known(backend_url, "oauth-protected-resource"),
            urlunsplit((*urlsplit(backend_url)[:2], "/.well-known/oauth-protected-resource", "", "")),
        ]
        resource_metadata: dict[str, Any] | None = None
        for candidate in dict.fromkeys(candidates):
            status, body, _ = json_fetch(http, "GET", secure_url(candidate, "the protected-resource metadata"),
                                    "the protected-resource metadata")
            if status == 200 and isinstance(body, dict):
                resource_metadata = body
                break
        if resource_metadata is None:
            raise DiscoveryFailed(f"the backend publishes no protected-resource metadata (RFC 9728) at "
                                  f"{', '.join(dict.fromkeys(candidates))}")
        resource = resource_metadata.get("resource")
        servers = resource_metadata.get("authorization_servers")
        if not isinstance(resource, str) or not resource_matches(resource, backend_url):
            raise DiscoveryFailed(f"the protected-resource metadata is for {str(resource)[:200]!r}, not for the "
                                  f"backend at {backend_url}")
        if not isinstance(servers, list) or not servers or not isinstance(servers[0], str):
            raise DiscoveryFailed("the protected-resource metadata names no authorization server")
        issuer = secure_url(servers[0], "the authorization server")
        server = _server_metadata(http, issuer)
        scopes = resource_metadata.get("scopes_supported")
        scope = challenge_scope or (" ".join(s for s in scopes if isinstance(s, str)) if isinstance(scopes, list) else "")
        methods = server.get("token_endpoint_auth_methods_supported")
        return Found(
            resource=resource, issuer=issuer,
            authorization_endpoint=secure_url(str(server["authorization_endpoint"]), "the authorization endpoint"),
            token_endpoint=secure_url(str(server["token_endpoint"]), "the token endpoint"),
            registration_endpoint=secure_url(str(server["registration_endpoint"]), "the registration endpoint")
            if isinstance(server.get("registration_endpoint"), str) else "",
            revocation_endpoint=secure_url(str(server["revocation_endpoint"]), "the revocation endpoint")
            if isinstance(server.get("revocation_endpoint"), str) else "",
            scope=scope[:500], iss_parameter=server.get("authorization_response_iss_parameter_supported") is True,
            metadata_documents=server.get("client_id_metadata_document_supported") is True,
            auth_methods=tuple(m for m in methods if isinstance(m, str)) if isinstance(methods, list)
            else ("client_secret_basic",),
        )


def _challenge(http: httpx.Client, backend_url: str) -> tuple[str, str]:
    """(the metadata URL, the scope) the backend's 401 names for a request without a credential."""
    probe = {"jsonrpc": "2.0", "id": "gw-discover", "method": "initialize",
             "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                        "clientInfo": {"name": "mcp-gateway", "version": "1"}}}
    status, _, headers = json_fetch(http, "POST", secure_url(backend_url, "the backend"), "the backend", json=probe,
                               headers={"accept": "application/json, text/event-stream"})
    if status != 401:
        raise DiscoveryFailed(f"the backend answered HTTP {status} without a credential, not 401: it does not "
                              "ask for one (a per-person credential needs a backend that does)")
    challenge = headers.get("www-authenticate", "")
    metadata = _RESOURCE_METADATA.search(challenge)
    scope = _SCOPE.search(challenge)
    return (metadata.group(1) if metadata else ""), (scope.group(1) if scope else "")


def _server_metadata(http: httpx.Client, issuer: str) -> dict[str, Any]:
    body = server_metadata(http, issuer)
    if "S256" not in (body.get("code_challenge_methods_supported") or ()):
        # The MCP authorization spec: no PKCE S256 support advertised, no authorization.
        raise DiscoveryFailed("the authorization server does not advertise PKCE with S256 "
                              "(code_challenge_methods_supported)")
    return body


def resource_matches(resource: str, backend_url: str) -> bool:
    """Whether the metadata's `resource` is the backend's URL or a prefix of it, at the same origin."""
    given, backend = urlsplit(resource), urlsplit(backend_url)
    if (given.scheme, given.netloc.lower()) != (backend.scheme, backend.netloc.lower()):
        return False
    path = given.path.rstrip("/")
    return backend.path.rstrip("/") == path or backend.path.startswith(path + "/")


def register(
    *, found: Found, redirect_uri: str, client_name: str, allow_private: bool
) -> tuple[str, str, str]:
    """Register the gateway with the authorization server (RFC 7591): (client id, client secret, how
    it authenticates at the token endpoint); raises DiscoveryFailed."""
    if not found.registration_endpoint:
        raise DiscoveryFailed(
            f"the authorization server {found.issuer} takes no registrations: register the gateway there "
            f"(redirect URI {redirect_uri}) and set the client id (and secret) on the backend's credential")
    # The server's own order of preference, among what the gateway does.
    method = next((m for m in found.auth_methods if m in ("client_secret_basic", "client_secret_post")), "none")
    document = {"client_name": client_name, "redirect_uris": [redirect_uri], "grant_types": ["authorization_code",
                "refresh_token"], "response_types": ["code"], "token_endpoint_auth_method": method}
    if found.scope:
        document["scope"] = found.scope
    with guarded_client(allow_private=allow_private, timeout=_TIMEOUT) as http:
        status, body, _ = json_fetch(http, "POST", found.registration_endpoint, "the registration endpoint", json=document)
    if status not in (200, 201) or not isinstance(body, dict) or not isinstance(body.get("client_id"), str):
        reason = ""
        if isinstance(body, dict) and isinstance(body.get("error"), str):
            reason = f": {body['error'][:100]} {str(body.get('error_description', ''))[:200]}".rstrip()
        raise DiscoveryFailed(f"the authorization server refused to register the gateway (HTTP {status}{reason})")
    secret = body.get("client_secret") if isinstance(body.get("client_secret"), str) else ""
    granted = body.get("token_endpoint_auth_method", method) if secret else "none"
    if granted not in ("client_secret_basic", "client_secret_post", "none"):
        raise DiscoveryFailed(f"the authorization server registered the gateway for {str(granted)[:60]!r} client "
                              "authentication, which the gateway does not do: register it by hand and set the client id")
    return body["client_id"][:500], secret, granted
