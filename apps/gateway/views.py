"""HTTP pages of the MCP endpoint that are not MCP: OAuth protected-resource metadata (RFC 9728)
and the Prometheus metrics of this process."""

from __future__ import annotations

import functools
import hmac

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, CollectorRegistry, generate_latest

from apps.catalog.selectors import virtual_host_list
from apps.common.redis import redis_client
from apps.gateway.prometheus import registry
from apps.gateway.wiring import all_gateways
from apps.oauth.selectors import authorization_server_get, issuer_url
from apps.tenants.selectors import tenant_get, token_issuer_list


def protected_resource_metadata(request: HttpRequest, tenant: str, vhost: str) -> JsonResponse:
    """Which authorization servers issue access tokens for the MCP endpoint `/mcp/<tenant>/<vhost>`:
    the gateway's own for the tenant (first, when it is on) and the tenant's configured issuers;
    named in the endpoint's 401 challenge (`resource_metadata`). 404 when the tenant accepts none."""
    found = tenant_get(slug=tenant)
    issuers = list(token_issuer_list(tenant=found).values_list("issuer", flat=True)) if found else []
    if found is not None and authorization_server_get(tenant=found) is not None:
        issuers.insert(0, issuer_url(origin=request.build_absolute_uri("/").rstrip("/").lower(), tenant=found))
    if not issuers or not virtual_host_list(tenant=found).filter(slug=vhost).exists():
        return JsonResponse({"error": "not_found", "error_description": "no protected resource here"}, status=404)
    return JsonResponse({
        "resource": request.build_absolute_uri(f"/mcp/{tenant}/{vhost}"),
        "authorization_servers": issuers,
        "bearer_methods_supported": ["header"],
        "resource_name": f"MCP Gateway: {tenant}/{vhost}",
    })


@functools.cache
def _registry() -> CollectorRegistry:
    return registry(lambda: [found.counters for found in all_gateways()], redis_client)


def _scrape_allowed(request: HttpRequest) -> bool:
    token = settings.GATEWAY_METRICS_TOKEN
    if not token:
        return True
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


@require_GET
async def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text exposition of this process (docs/observability.md). With
    GATEWAY_METRICS_TOKEN set, only `Authorization: Bearer <token>` gets it; others get 401."""
    if not _scrape_allowed(request):
        return HttpResponse("Unauthorized: /metrics needs 'Authorization: Bearer <GATEWAY_METRICS_TOKEN>'\n",
                            status=401, content_type="text/plain; charset=utf-8",
                            headers={"WWW-Authenticate": 'Bearer realm="mcp-gateway-metrics"'})
    # Off the event loop: the scrape reads Redis (one round trip) with a blocking client.
    body = await sync_to_async(generate_latest, thread_sensitive=False)(_registry())
    return HttpResponse(body, content_type=CONTENT_TYPE_PLAIN_0_0_4)  # what every Prometheus reads
