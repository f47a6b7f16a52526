"""The tool index's REST API (mounted under `api/v1/`): what `tool_search` finds on a virtual host,
with each retrieval path's rank and score (the console's retrieval playground), and a tool's
prerequisite chain."""

from __future__ import annotations

from django.http import Http404
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.catalog.models import Tool, VirtualHost
from apps.gateway.pipeline.search_tool import DEFAULT_K, MAX_K, MAX_QUERY_CHARS
from apps.retrieval.search import tool_prerequisites_list, virtual_host_tools_search
from apps.tenants.api_base import TenantAPIView


class ToolSearchView(TenantAPIView):
    """`GET /api/v1/tenants/<tenant>/virtual-hosts/<id>/tool-search?query=…&k=…`: the best `k` (1–50, default 15)
    tools of the host for `query`, best first, as a caller who sees every tool would get them."""

    def get(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        host = VirtualHost.objects.select_related("tenant").filter(tenant=self.tenant, pk=virtual_host_id).first()
        if host is None:
            raise Http404(f"no virtual host with id {virtual_host_id}")
        query = request.query_params.get("query", "")
        k_text = request.query_params.get("k", str(DEFAULT_K))
        if not query.strip() or len(query) > MAX_QUERY_CHARS:
            return Response({"query": [f"give 1 to {MAX_QUERY_CHARS} characters"]}, status=status.HTTP_400_BAD_REQUEST)
        if not k_text.isdigit() or not 1 <= int(k_text) <= MAX_K:
            return Response({"k": [f"must be a whole number from 1 to {MAX_K}"]}, status=status.HTTP_400_BAD_REQUEST)
        found = virtual_host_tools_search(virtual_host=host, query=query, k=int(k_text))
        return Response({
            "virtual_host": {"id": host.pk, "tenant": host.tenant.slug, "slug": host.slug},
            "query": query,
            "results": [
                {
                    "backend": {"id": f.backend_id, "name": f.backend_name},
                    "name": f.name,
                    "exposed_names": list(f.exposed_names),
                    "score": f.hit.score,
                    "paths": {path: {"rank": f.hit.ranks[path], "score": f.hit.scores[path]} for path in f.hit.ranks},
                    "prerequisites": [{"backend": backend, "name": name} for backend, name in f.prerequisites],
                }
                for f in found
            ],
        })


class ToolPrerequisitesView(TenantAPIView):
    """`GET /api/v1/tenants/<tenant>/tools/<id>/prerequisites`: the tools that must run first to produce the ids the
    tool needs, dependencies first (its whole chain, as tool_search reports it)."""

    def get(self, request: Request, tenant: str, tool_id: int) -> Response:
        tool = Tool.objects.select_related("backend").filter(backend__tenant=self.tenant, pk=tool_id).first()
        if tool is None:
            raise Http404(f"no tool with id {tool_id}")
        return Response({
            "tool": {"id": tool.pk, "backend": tool.backend.name, "name": tool.name},
            "prerequisites": [
                {"id": found.tool_id, "backend": found.backend_name, "name": found.name}
                for found in tool_prerequisites_list(tool=tool)
            ],
        })
