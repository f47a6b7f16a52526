"""Security headers on every response Django serves: the console, the admin, the REST API and its
docs, the health and metrics endpoints (the MCP endpoint is served by its own consumers).

Django's SecurityMiddleware and XFrameOptionsMiddleware already send X-Content-Type-Options,
Referrer-Policy, Cross-Origin-Opener-Policy, X-Frame-Options and, in production, HSTS; this adds
the Content-Security-Policy and the Permissions-Policy (docs/security.md). The console loads no
inline script or style, so the policy needs no nonce and no 'unsafe-inline'."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.http import HttpRequest, HttpResponseBase
from django.utils.decorators import sync_and_async_middleware

_HOST = re.compile(r"[A-Za-z0-9.-]{1,253}|[0-9a-fA-F:.]{2,45}")
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]{0,60}")

Handler = Callable[[HttpRequest], HttpResponseBase] | Callable[[HttpRequest], Awaitable[HttpResponseBase]]


def _headers() -> tuple[tuple[str, str], ...]:
    policies = (
        ("Content-Security-Policy", settings.GATEWAY_CONTENT_SECURITY_POLICY),
        ("Permissions-Policy", settings.GATEWAY_PERMISSIONS_POLICY),
    )
    return tuple((name, value) for name, value in policies if value)


def form_action_allow(response: HttpResponseBase, url: str) -> HttpResponseBase:
    """Let the page's forms lead to `url`'s origin as well as to the site itself: a form whose answer
    redirects elsewhere (an OAuth client, an authorization server) needs it, since browsers hold a
    form's redirects to `form-action` too."""
    try:
        target = urlsplit(url)
        port = target.port
    except ValueError:
        return response
    host = target.hostname or ""
    # Only what a source expression may hold goes into the header: anything else keeps the policy as it is.
    if target.scheme in ("http", "https"):
        if not _HOST.fullmatch(host):
            return response
        shown = f"[{host}]" if ":" in host else host
        source = f"{target.scheme}://{shown}" + (f":{port}" if port is not None else "")
    elif _SCHEME.fullmatch(target.scheme):
        source = f"{target.scheme}:"  # an app's own scheme (com.example.app:/callback)
    else:
        return response
    policy = settings.GATEWAY_CONTENT_SECURITY_POLICY
    if policy and "form-action" in policy:
        response.headers["Content-Security-Policy"] = re.sub(
            r"form-action [^;]*", lambda _: f"form-action 'self' {source}", policy)
    return response


@sync_and_async_middleware
def security_headers_middleware(get_response: Handler) -> Handler:
    """Adds the configured policies to each response that does not set its own."""
    headers = _headers()

    def add(response: HttpResponseBase) -> HttpResponseBase:
        for name, value in headers:
            if name not in response.headers:
                response.headers[name] = value
        return response

    if iscoroutinefunction(get_response):
        async def async_middleware(request: HttpRequest) -> HttpResponseBase:
            return add(await get_response(request))  # type: ignore[misc]

        return async_middleware

    def middleware(request: HttpRequest) -> HttpResponseBase:
        return add(get_response(request))  # type: ignore[arg-type]

    return middleware
