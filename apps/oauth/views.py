"""The HTTP faces of a tenant's authorization server (docs/identity.md, "Signing in people"):
its metadata (RFC 8414), key set and client registration (RFC 7591). Thin: each calls a selector
or one service. MCP clients in browsers call them from other origins: answers carry CORS headers
(no cookies are read, so any origin may)."""

from __future__ import annotations

import json
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from apps.oauth.registration import client_register_response
from apps.oauth.selectors import authorization_server_get, issuer_url, jwks, server_metadata
from apps.tenants.selectors import tenant_get

REGISTRATION_BODY_MAX = 16 * 1024

View = Callable[..., HttpResponse]


def _cors(methods: str) -> Callable[[View], View]:
    def wrap(view: View) -> View:
        def wrapped(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
            response = HttpResponse(status=204) if request.method == "OPTIONS" else view(request, *args, **kwargs)
            response["Access-Control-Allow-Origin"] = "*"
            response["Access-Control-Allow-Methods"] = f"{methods}, OPTIONS"
            response["Access-Control-Allow-Headers"] = "Content-Type, Authorization, MCP-Protocol-Version"
            return response
        return csrf_exempt(wrapped)
    return wrap


def _error(status: int, error: str, description: str) -> JsonResponse:
    return JsonResponse({"error": error, "error_description": description}, status=status)


def _server(tenant_slug: str):  # type: ignore[no-untyped-def]
    tenant = tenant_get(slug=tenant_slug)
    server = authorization_server_get(tenant=tenant) if tenant is not None else None
    return tenant, server


def _origin(request: HttpRequest) -> str:
    return request.build_absolute_uri("/").rstrip("/")


@_cors("GET")
def metadata(request: HttpRequest, tenant: str) -> HttpResponse:
    """`GET /.well-known/oauth-authorization-server/oauth/<tenant>`: the server's metadata."""
    if request.method != "GET":
        return _error(405, "invalid_request", "GET only")
    found, server = _server(tenant)
    if found is None or server is None:
        return _error(404, "not_found", f"tenant {tenant!r} has no authorization server here")
    return JsonResponse(server_metadata(server=server, issuer=issuer_url(origin=_origin(request), tenant=found)))


@_cors("GET")
def key_set(request: HttpRequest, tenant: str) -> HttpResponse:
    """`GET /oauth/<tenant>/jwks`: the key its access tokens are signed with."""
    if request.method != "GET":
        return _error(405, "invalid_request", "GET only")
    found, server = _server(tenant)
    if server is None:
        return _error(404, "not_found", f"tenant {tenant!r} has no authorization server here")
    return JsonResponse(jwks(server=server))


@_cors("POST")
def register(request: HttpRequest, tenant: str) -> HttpResponse:
    """`POST /oauth/<tenant>/register`: a client registers itself (RFC 7591) — when the tenant allows it."""
    if request.method != "POST":
        return _error(405, "invalid_request", "POST a JSON object of client metadata")
    found, server = _server(tenant)
    if found is None or server is None:
        return _error(404, "not_found", f"tenant {tenant!r} has no authorization server here")
    if not server.allow_registration:
        return _error(403, "access_denied", "this authorization server takes no registrations: "
                      "identify the client by the URL of its client metadata document")
    if len(request.body) > REGISTRATION_BODY_MAX:
        return _error(413, "invalid_request", f"client metadata is at most {REGISTRATION_BODY_MAX} bytes")
    try:
        given = json.loads(request.body or b"null")
    except (ValueError, UnicodeDecodeError):
        return _error(400, "invalid_request", "the body is not JSON")
    if not isinstance(given, dict):
        return _error(400, "invalid_client_metadata", "the body must be a JSON object of client metadata")
    issuer = issuer_url(origin=_origin(request), tenant=found)
    return client_register_response(request=request, tenant=found, metadata=server_metadata(server=server, issuer=issuer))
