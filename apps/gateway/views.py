"""HTTP pages of the MCP endpoint that are not MCP: OAuth protected-resource metadata (RFC 9728)."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from apps.catalog.selectors import virtual_host_list
from apps.tenants.selectors import tenant_get, token_issuer_list


def protected_resource_metadata(request: HttpRequest, tenant: str, vhost: str) -> JsonResponse:
    """Which authorization servers issue access tokens for the MCP endpoint `/mcp/<tenant>/<vhost>`;
    named in the endpoint's 401 challenge (`resource_metadata`). 404 when the tenant accepts none."""
    found = tenant_get(slug=tenant)
    issuers = list(token_issuer_list(tenant=found).values_list("issuer", flat=True)) if found else []
    if not issuers or not virtual_host_list(tenant=found).filter(slug=vhost).exists():
        return JsonResponse({"error": "not_found", "error_description": "no protected resource here"}, status=404)
    return JsonResponse({
        "resource": request.build_absolute_uri(f"/mcp/{tenant}/{vhost}"),
        "authorization_servers": issuers,
        "bearer_methods_supported": ["header"],
        "resource_name": f"MCP Gateway: {tenant}/{vhost}",
    })
