"""The tools REST API (mounted under `api/v1/tenants/<tenant>/`): the tenant's tools, searchable
and narrowed to a backend, and one tool in full (schemas, annotations, HTTP binding and its
prerequisite chain) — what the console's tools pages show.

OpenAPI tools are catalog rows (`tools/<id>`); MCP tools are what their servers listed when last
indexed (`tools/mcp/<id>`: name, description and parameter names; the server holds the schemas)."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response

from apps.catalog import tool_selectors
from apps.catalog.models import Backend
from apps.retrieval.chains import tool_prerequisites_list
from apps.tenants.api_base import TenantAPIView, problem


class ToolBackendSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()


class ToolSummarySerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=Backend.Kind.choices, help_text="openapi: a catalog tool; mcp: an MCP server's.")
    id = serializers.IntegerField(help_text="The catalog tool's id, or (mcp) the index entry's.")
    backend = ToolBackendSerializer()
    name = serializers.CharField()
    summary = serializers.CharField(help_text=f"The description's first {tool_selectors.SUMMARY_CHARS} characters.")
    url = serializers.CharField(help_text="This API's path of the tool.")


class ToolPageSerializer(serializers.Serializer):
    """A page of LimitOffsetPagination."""

    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = ToolSummarySerializer(many=True)


class ParameterSerializer(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.CharField()
    required = serializers.BooleanField()
    description = serializers.CharField()


class PrerequisiteSerializer(serializers.Serializer):
    id = serializers.IntegerField(allow_null=True)
    backend = serializers.CharField()
    name = serializers.CharField()


class ToolDetailSerializer(serializers.Serializer):
    kind = serializers.CharField()
    id = serializers.IntegerField()
    backend = ToolBackendSerializer()
    name = serializers.CharField()
    description = serializers.CharField()
    parameters = ParameterSerializer(many=True, help_text="The input schema's top-level properties, required first.")
    input_schema = serializers.JSONField(allow_null=True, help_text="Null for MCP tools: their server holds it.")
    output_schema = serializers.JSONField(allow_null=True)
    annotations = serializers.JSONField()
    binding = serializers.JSONField(allow_null=True, help_text="OpenAPI tools: the HTTP request a call becomes.")
    operation_id = serializers.CharField()
    spec_version = serializers.IntegerField(allow_null=True)
    prerequisites = PrerequisiteSerializer(many=True, help_text="Tools to run first, dependencies first.")


def _path(tenant: str, kind: str, pk: int) -> str:
    return f"/api/v1/tenants/{tenant}/tools/{'mcp/' if kind == Backend.Kind.MCP else ''}{pk}"


class ToolListView(TenantAPIView):
    """`GET /api/v1/tenants/<tenant>/tools?search=…&backend=<id>&limit=&offset=`: the tenant's tools
    in (backend, name) order; `search` keeps those whose name or description holds each of its
    words (as a prefix)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("search", OpenApiTypes.STR, description="Words the name or description holds."),
            OpenApiParameter("backend", OpenApiTypes.INT, description="Only this backend's tools."),
        ],
        responses=ToolPageSerializer,
        operation_id="tenants_tools_list",
    )
    def get(self, request: Request, tenant: str) -> Response:
        backends = tool_selectors.tool_backends_list(tenant=self.tenant)
        wanted = request.query_params.get("backend", "")
        if wanted:
            backends = [b for b in backends if str(b.id) == wanted]
            if not backends:
                return problem(f"no backend with id {wanted!r} in this tenant")
        search = request.query_params.get("search", "")
        if len(search) > tool_selectors.MAX_SEARCH_CHARS:
            return problem(f"search: give at most {tool_selectors.MAX_SEARCH_CHARS} characters")
        names = {b.id: b.name for b in backends}
        paginator = LimitOffsetPagination()
        page: list[dict[str, Any]] = paginator.paginate_queryset(
            tool_selectors.tool_list(backends=backends, search=search), request, view=self) or []
        return paginator.get_paginated_response([
            {"kind": row["kind"], "id": row["id"], "backend": {"id": row["backend_id"], "name": names[row["backend_id"]]},
             "name": row["name"], "summary": row["summary"], "url": _path(self.tenant.slug, row["kind"], row["id"])}
            for row in page
        ])


class ToolDetailView(TenantAPIView):
    """`GET /api/v1/tenants/<tenant>/tools/<id>`: a catalog (OpenAPI) tool in full."""

    @extend_schema(responses=ToolDetailSerializer)
    def get(self, request: Request, tenant: str, tool_id: int) -> Response:
        tool = tool_selectors.tool_get(tenant=self.tenant, tool_id=tool_id)
        if tool is None:
            raise Http404(f"no tool with id {tool_id}")
        return Response({
            "kind": Backend.Kind.OPENAPI, "id": tool.pk, "backend": {"id": tool.backend_id, "name": tool.backend.name},
            "name": tool.name, "description": tool.description,
            "parameters": [vars_of(p) for p in tool_selectors.schema_parameters(tool.input_schema)],
            "input_schema": tool.input_schema, "output_schema": tool.output_schema, "annotations": tool.annotations,
            "binding": tool.binding, "operation_id": tool.operation_id, "spec_version": tool.spec_version.number,
            "prerequisites": [{"id": p.tool_id, "backend": p.backend_name, "name": p.name}
                              for p in tool_prerequisites_list(tool=tool)],
        })


class McpToolDetailView(TenantAPIView):
    """`GET /api/v1/tenants/<tenant>/tools/mcp/<id>`: an MCP server's tool as last indexed."""

    @extend_schema(responses=ToolDetailSerializer)
    def get(self, request: Request, tenant: str, entry_id: int) -> Response:
        entry = tool_selectors.mcp_tool_get(tenant=self.tenant, entry_id=entry_id)
        if entry is None:
            raise Http404(f"no MCP tool with id {entry_id}")
        return Response({
            "kind": Backend.Kind.MCP, "id": entry.pk, "backend": {"id": entry.backend_id, "name": entry.backend.name},
            "name": entry.name, "description": entry.description,
            "parameters": [{"name": name, "type": "", "required": False, "description": ""} for name in entry.parameters],
            "input_schema": None, "output_schema": None, "annotations": {}, "binding": None, "operation_id": "",
            "spec_version": None, "prerequisites": [],
        })


def vars_of(parameter: tool_selectors.Parameter) -> dict[str, Any]:
    return {"name": parameter.name, "type": parameter.type, "required": parameter.required,
            "description": parameter.description}


urls = [
    path("tools", ToolListView.as_view(), name="tool-list"),
    path("tools/<int:tool_id>", ToolDetailView.as_view(), name="tool-detail"),
    path("tools/mcp/<int:entry_id>", McpToolDetailView.as_view(), name="mcp-tool-detail"),
]
