"""ASGI entry point: the MCP endpoint (Channels consumers), the console's websockets (signed in by
the session cookie, same-origin only) and everything else (Django)."""

import gc
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gatewaysite.settings.dev")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi = get_asgi_application()

from django.conf import settings  # noqa: E402

if settings.GATEWAY_SERVE_STATIC:
    # `make run` and the browser tests serve the console's CSS and scripts themselves; production
    # serves STATIC_ROOT from the web server in front.
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

    django_asgi = ASGIStaticFilesHandler(django_asgi)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.urls import re_path  # noqa: E402

from apps.console.consumers import AuditTailConsumer  # noqa: E402
from apps.gateway.transports import access_log, http_guard, shutdown, twisted_tuning  # noqa: E402
from apps.gateway.transports.routing import mcp_http_routes  # noqa: E402
from apps.tenants.access import tenant_manager_credential_check  # noqa: E402

twisted_tuning.install()
access_log.install()  # no `?api_key=...` in Daphne's access log
# Body limits and header/body timeouts before anything is read or spooled (docs/deploy.md, "Limits and shutdown").
http_guard.install(
    limits=http_guard.TransportLimits(
        mcp_bytes=settings.GATEWAY_MAX_BODY_BYTES,
        api_bytes=settings.GATEWAY_API_MAX_BODY_BYTES,
        spec_bytes=settings.GATEWAY_SPEC_MAX_BYTES,
        headers_seconds=settings.GATEWAY_HTTP_HEADERS_TIMEOUT_SECONDS,
        body_idle_seconds=settings.GATEWAY_HTTP_BODY_IDLE_SECONDS,
    ),
    may_upload=lambda slug, authorization, cookie: tenant_manager_credential_check(
        slug=slug, authorization=authorization, cookie=cookie),
)
# SIGTERM drains the instance instead of cutting every request (docs/deploy.md, "Limits and shutdown").
shutdown.install(grace_seconds=settings.GATEWAY_SHUTDOWN_GRACE_SECONDS)

application = shutdown.DrainTracking(ProtocolTypeRouter(
    {
        "http": URLRouter([*mcp_http_routes, re_path(r"", django_asgi)]),
        # A cookie-authenticated websocket must refuse other sites' pages (cross-site hijacking).
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter([
            re_path(r"^console/t/(?P<tenant>[a-z0-9-]{1,64})/audit/live/?$", AuditTailConsumer.as_asgi()),
        ]))),
    }
))

# What is loaded by now lives as long as the process: keep full collections from walking it, and
# collect young objects less often. Merging the lists of ten backends allocates tens of thousands of
# short-lived objects; with the defaults, collection took two thirds of that work (BENCHMARKS.md).
gc.freeze()
gc.set_threshold(10_000, 50, 100)
