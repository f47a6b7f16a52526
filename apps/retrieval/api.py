"""The tool index's REST API (mounted under `api/v1/`): what `tool_search` finds on a virtual host,
with each retrieval path's rank and score (the console's retrieval playground), and a tool's
prerequisite chain."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response

from apps.catalog.models import Tool, VirtualHost
from apps.kernel.search_tool import DEFAULT_K, MAX_K, MAX_QUERY_CHARS
from apps.retrieval.chains import Prerequisite, tool_needs_list, tool_prerequisites_list
from apps.retrieval.search import QueryReading, query_read, rewrite_rules_list, virtual_host_tools_search
from apps.retrieval.serializers import (
    RewriteRulePageSerializer,
    ToolPrerequisitesSerializer,
    ToolSearchAnswerSerializer,
)
from apps.tenants.api_base import TenantAPIView


def reading_answer(reading: QueryReading) -> dict[str, object]:
    """The applied query rewrite as the API answers it: the text searched for, and each id or ARN
    read as a resource type (the best reading of a token first), or `matches: []`."""
    rewrite = reading.rewrite
    return {
        "text": reading.text,
        "weak": rewrite.weak if rewrite is not None else False,
        "matches": [{"token": m.token, "type": m.type, "cost": m.cost} for m in rewrite.matches] if rewrite else [],
    }


class ToolSearchView(TenantAPIView):
    """`GET /api/v1/tenants/<tenant>/virtual-hosts/<id>/tool-search?query=…&k=…`: the best `k` (1–50, default 15)
    tools of the host for `query`, best first, as a caller who sees every tool would get them."""

    @extend_schema(
        parameters=[OpenApiParameter("query", OpenApiTypes.STR, required=True),
                    OpenApiParameter("k", OpenApiTypes.INT, description=f"1 to {MAX_K}, default {DEFAULT_K}")],
        responses=ToolSearchAnswerSerializer,
    )
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
            "rewrite": reading_answer(query_read(tenant_id=host.tenant_id, query=query)),
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


def _ref(found: Prerequisite | None) -> dict[str, object] | None:
    return {"id": found.tool_id, "backend": found.backend_name, "name": found.name} if found is not None else None


class ToolPrerequisitesView(TenantAPIView):
    """`GET /api/v1/tenants/<tenant>/tools/<id>/prerequisites`: the tools that must run first to produce the ids the
    tool cannot work without, dependencies first (its whole chain, as tool_search reports it), and each of those
    ids with the tool that makes one and the read-only tool that finds an existing one (`needs`)."""

    @extend_schema(responses=ToolPrerequisitesSerializer)
    def get(self, request: Request, tenant: str, tool_id: int) -> Response:
        tool = Tool.objects.select_related("backend").filter(backend__tenant=self.tenant, pk=tool_id).first()
        if tool is None:
            raise Http404(f"no tool with id {tool_id}")
        return Response({
            "tool": {"id": tool.pk, "backend": tool.backend.name, "name": tool.name},
            "prerequisites": [_ref(found) for found in tool_prerequisites_list(tool=tool)],
            "needs": [{"parameter": need.parameter, "producer": _ref(need.producer), "lookup": _ref(need.lookup)}
                      for need in tool_needs_list(tool=tool)],
        })


class RewriteRuleListView(TenantAPIView):
    """`GET /api/v1/tenants/<tenant>/rewrite-rules?limit=&offset=`: the resource types the tenant's
    catalog names, by which ids and ARNs in a `tool_search` query are read (docs/tool-search.md),
    the types whose ids most parameters take first."""

    @extend_schema(responses=RewriteRulePageSerializer, operation_id="tenants_rewrite_rules_list")
    def get(self, request: Request, tenant: str) -> Response:
        paginator = LimitOffsetPagination()
        page = paginator.paginate_queryset(rewrite_rules_list(tenant_id=self.tenant.pk), request, view=self) or []
        return paginator.get_paginated_response([
            {"type": rule.type, "weight": rule.weight, "longer_names": list(rule.longer),
             "describing_tools": [{"backend": b, "name": n} for b, n in rule.tools]}
            for rule in page
        ])
