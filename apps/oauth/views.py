"""The HTTP faces of a tenant's authorization server (docs/identity.md, "Signing in people"):
its metadata (RFC 8414), key set, client registration (RFC 7591), the consent page a person
signs in through, and the token endpoint. Thin: each calls a selector or one service. MCP clients
in browsers call the JSON ones from other origins: those answers carry CORS headers (they read no
cookie, so any origin may); the consent page does not."""

from __future__ import annotations

import json
from collections.abc import Callable
from urllib.parse import urlsplit

from authlib.common.urls import add_params_to_uri
from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749 import InvalidRequestError
from django.contrib.auth import login
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from apps.common.security_headers import form_action_allow
from apps.oauth.client_documents import ClientDocumentRefused, client_document_get, is_document_url
from apps.oauth.flow import (
    Context,
    InvalidTargetError,
    TenantServer,
    authorization_respond,
    authorize_check,
    revocation_respond,
    token_respond,
)
from apps.oauth.idp import SignInFailed, sign_in_complete, sign_in_start
from apps.oauth.models import IdentityProvider
from apps.oauth.registration import client_register_response
from apps.oauth.selectors import (
    authorization_server_get,
    identity_provider_get,
    issuer_url,
    jwks,
    resource_host_get,
    server_metadata,
)
from apps.oauth.throttle import (
    DOCUMENT_FETCHES_PER_MINUTE,
    PROVIDER_SIGN_INS_PER_MINUTE,
    REGISTRATIONS_PER_HOUR,
    attempt_allowed,
)
from apps.tenants.access import access_get
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


def _address(request: HttpRequest) -> str:
    return str(request.META.get("REMOTE_ADDR", ""))


def _origin(request: HttpRequest) -> str:
    # In lower case, as the gateway spells the origin it checks tokens against (host names and
    # schemes know no case).
    return request.build_absolute_uri("/").rstrip("/").lower()


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
                      "ask the tenant's admins to allow them")
    if not attempt_allowed(kind="register", address=_address(request), limit=REGISTRATIONS_PER_HOUR, window_seconds=3600):
        return _error(429, "slow_down", f"at most {REGISTRATIONS_PER_HOUR} registrations an hour from one address")
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


def _context(request: HttpRequest, tenant: str) -> Context | None:
    found, server = _server(tenant)
    if found is None or server is None:
        return None
    origin = _origin(request)
    return Context(tenant=found, server=server, origin=origin, issuer=issuer_url(origin=origin, tenant=found))


def _refusal_page(request: HttpRequest, status: int, title: str, reason: str) -> HttpResponse:
    """An error shown to the person, not sent to the client: used until the client and its
    redirect URI are known to match (redirecting before that would make this an open redirect)."""
    return render(request, "oauth/refused.html", {"title": title, "reason": reason}, status=status)


@require_http_methods(["GET", "POST"])
def authorize(request: HttpRequest, tenant: str) -> HttpResponse:
    """`/oauth/<tenant>/authorize`: a person allows (or not) an MCP client to act for them on one of
    the tenant's virtual hosts. GET checks the request and shows the consent page (after the
    console's sign-in); POST (from that page, with its CSRF token) answers the client."""
    context = _context(request, tenant)
    if context is None:
        return _refusal_page(request, 404, "No such authorization server", f"Tenant {tenant!r} signs no one in here.")
    client_id = request.GET.get("client_id", "")
    if is_document_url(client_id):  # a client known by its metadata document: fetched (or kept) first
        if not context.server.allow_metadata_documents:
            return _refusal_page(request, 400, "This sign-in request cannot be used",
                                 "This authorization server takes no client metadata documents.")
        if not request.user.is_authenticated:  # only people who may sign in make the gateway fetch
            return redirect_to_login(request.get_full_path(), reverse("console:login"))
        if not attempt_allowed(kind="document", address=_address(request), limit=DOCUMENT_FETCHES_PER_MINUTE,
                               window_seconds=60):
            return _refusal_page(request, 429, "Too many sign-in requests", "Wait a minute, then try again.")
        try:
            client_document_get(tenant=context.tenant, url=client_id)
        except ClientDocumentRefused as exc:
            return _refusal_page(request, 400, "This sign-in request cannot be used", str(exc))
    try:
        grant = authorize_check(context=context, request=request)
    except OAuth2Error as error:
        if error.redirect_uri:  # the client and its redirect URI match: tell the client
            return _client_error(context, error)
        return _refusal_page(request, 400, "This sign-in request cannot be used",
                             f"{error.error}: {error.description or 'the client or its redirect URI is not known here'}")
    client = grant.request.client.row
    redirect_uri = grant.redirect_uri
    problem = _authorization_problem(request, context)
    if problem is not None:
        problem.redirect_uri, problem.state = redirect_uri, request.GET.get("state")
        return _client_error(context, problem)
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path(), reverse("console:login"))
    if not access_get(user=request.user).sees(context.tenant.pk):
        return _refusal_page(request, 403, "Your account cannot sign in here",
                             f"{request.user.get_username()} is not a member of {context.tenant.name}. "
                             "Sign in with another account, or ask a tenant admin to add you.")
    if request.method == "POST":
        allowed = request.POST.get("decision") == "allow"
        return authorization_respond(context=context, request=request, user=request.user if allowed else None)
    host = resource_host_get(tenant=context.tenant, origin=_origin(request), resource=request.GET["resource"])
    target = urlsplit(redirect_uri)
    response = render(request, "oauth/consent.html", {
        "tenant": context.tenant, "host": host, "resource": request.GET["resource"], "client": client,
        "redirect_host": target.netloc or target.scheme,
    })
    return form_action_allow(response, redirect_uri)  # the form's answer redirects to the client


def _client_error(context: Context, error: OAuth2Error) -> HttpResponse:
    """The error redirected to the client, with the server's `iss` (RFC 9207: on errors too)."""
    response = TenantServer(context).handle_error_response(None, error)
    if response.has_header("Location"):
        response["Location"] = add_params_to_uri(response["Location"], {"iss": context.issuer})
    return response


def _authorization_problem(request: HttpRequest, context: Context) -> OAuth2Error | None:
    """What Authlib does not check of an authorization request: PKCE with S256 (required here),
    and the one virtual host it is for (RFC 8707 `resource`)."""
    given = request.GET  # (the consent form posts back to the same URL, query and all)
    if not given.get("code_challenge") or given.get("code_challenge_method") != "S256":
        return InvalidRequestError(description="PKCE is required, with code_challenge_method S256")
    resource = given.get("resource", "")
    if not resource:
        return InvalidTargetError(description=f"name the virtual host to sign in to as resource (RFC 8707), "
                                              f"e.g. {_origin(request)}/mcp/{context.tenant.slug}/<host>")
    if resource_host_get(tenant=context.tenant, origin=_origin(request), resource=resource) is None:
        return InvalidTargetError(description=f"{resource[:200]} is not the URL of a virtual host of "
                                              f"{context.tenant.slug} here")
    return None


def _posted(request: HttpRequest, tenant: str, hint: str) -> Context | HttpResponse:
    """The tenant's server for a POST endpoint, or the error to answer with."""
    if request.method != "POST":
        return _error(405, "invalid_request", hint)
    context = _context(request, tenant)
    return context if context is not None else _error(404, "not_found", f"tenant {tenant!r} has no authorization server here")


@_cors("POST")
def token(request: HttpRequest, tenant: str) -> HttpResponse:
    """`POST /oauth/<tenant>/token`: a code (with its PKCE verifier) or a refresh token for tokens."""
    context = _posted(request, tenant, "POST a token request (application/x-www-form-urlencoded)")
    return token_respond(context=context, request=request) if isinstance(context, Context) else context


@_cors("POST")
def revoke(request: HttpRequest, tenant: str) -> HttpResponse:
    """`POST /oauth/<tenant>/revoke`: a client gives up a token (RFC 7009); the person's grant ends."""
    context = _posted(request, tenant, "POST token=<the token> (application/x-www-form-urlencoded)")
    return revocation_respond(context=context, request=request) if isinstance(context, Context) else context


def _identity_provider(tenant: str) -> IdentityProvider | None:
    found = tenant_get(slug=tenant)
    return identity_provider_get(tenant=found) if found is not None else None


def _idp_callback_uri(request: HttpRequest, tenant: str) -> str:
    return request.build_absolute_uri(reverse("oauth-idp-callback", kwargs={"tenant": tenant}))


@require_http_methods(["GET"])
def idp_sign_in(request: HttpRequest, tenant: str) -> HttpResponse:
    """Off to the tenant's identity provider; `next`: where the person was going (a path of this site)."""
    provider = _identity_provider(tenant)
    if provider is None:
        return _refusal_page(request, 404, "No sign-in here", "This tenant signs nobody in through an identity provider.")
    if not attempt_allowed(kind="idp-sign-in", address=_address(request), limit=PROVIDER_SIGN_INS_PER_MINUTE,
                           window_seconds=60):
        return _refusal_page(request, 429, "Too many sign-ins", "Too many sign-ins from this address: wait a minute.")
    next_path = request.GET.get("next", "")
    if len(next_path) > 2000 or not url_has_allowed_host_and_scheme(next_path, allowed_hosts=None):
        next_path = ""
    try:
        return redirect(sign_in_start(provider=provider, redirect_uri=_idp_callback_uri(request, tenant),
                                      next_path=next_path, session=request.session))
    except SignInFailed as exc:
        return _refusal_page(request, 502, "Signing in did not work", str(exc))


@require_http_methods(["GET"])
def idp_callback(request: HttpRequest, tenant: str) -> HttpResponse:
    """Back from the identity provider: the person is signed in, and goes where they were going."""
    provider = _identity_provider(tenant)
    if provider is None:
        return _refusal_page(request, 404, "No sign-in here", "This tenant signs nobody in through an identity provider.")
    try:
        user, next_path = sign_in_complete(provider=provider, redirect_uri=_idp_callback_uri(request, tenant),
                                           session=request.session, params=request.GET.dict())
    except SignInFailed as exc:
        return _refusal_page(request, 403, "Signing in did not work", str(exc))
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    return redirect(next_path or reverse("console:home"))
