"""The audit log's REST API: the filtered log (cursor pagination), its CSV export, the dashboard's
numbers and the open MCP sessions — what the console's pages show, with the same filters."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from apps.audit.export import audit_csv_lines
from apps.audit.forms import AuditFilterForm
from apps.audit.models import AuditRecord
from apps.audit.selectors import (
    MAX_PAGE_SIZE,
    PAGE_SIZE,
    WINDOWS,
    audit_dashboard_get,
    audit_record_export,
    audit_record_page,
)
from apps.audit.serializers import AuditPageSerializer, AuditRecordSerializer, DashboardSerializer
from apps.tenants.api_base import TenantAPIView, problem, refused

FILTERS = [
    OpenApiParameter("key", int, description="An API key's id."),
    OpenApiParameter("team", str, description="A team's slug."),
    OpenApiParameter("tool", str, description="The tool name the caller used."),
    OpenApiParameter("backend", str, description="A backend's name."),
    OpenApiParameter("outcome", str, enum=AuditRecord.Outcome.values),
    OpenApiParameter("origin", str, enum=AuditRecord.Origin.values,
                     description="mcp (an MCP client's call) or console (the console's tool tester)."),
    OpenApiParameter("trace", str, description="One call's trace id (32 hex digits)."),
    OpenApiParameter("since", OpenApiTypes.DATETIME, description="Inclusive."),
    OpenApiParameter("until", OpenApiTypes.DATETIME, description="Exclusive."),
]


def _form(request: Request, view: TenantAPIView) -> AuditFilterForm:
    return AuditFilterForm(request.query_params, tenant=view.tenant)


class AuditListView(TenantAPIView):
    """`GET /api/v1/tenants/<tenant>/audit`: the log, newest first, filtered; `next`/`previous`
    follow it by cursor (fast at any depth)."""

    @extend_schema(
        parameters=[*FILTERS, OpenApiParameter("cursor", str), OpenApiParameter("limit", int)],
        responses={200: AuditPageSerializer},
    )
    def get(self, request: Request, tenant: str) -> Response:
        form = _form(request, self)
        if not form.is_valid():
            return problem(form.error_text())
        try:
            size = int(request.query_params.get("limit", PAGE_SIZE))
        except ValueError:
            return problem(f"limit must be a number from 1 to {MAX_PAGE_SIZE}")
        try:
            page = audit_record_page(
                tenant=self.tenant, filters=form.audit_filter(), cursor=request.query_params.get("cursor", ""),
                size=size,
            )
        except ValidationError as exc:
            return refused(exc)

        def link(cursor: str | None) -> str | None:
            if cursor is None:
                return None
            query = request.query_params.copy()
            query["cursor"] = cursor
            return request.build_absolute_uri(f"{request.path}?{query.urlencode()}")

        return Response({
            "next": link(page.older), "previous": link(page.newer),
            "results": AuditRecordSerializer(page.rows, many=True).data,
        })


class AuditCsvView(TenantAPIView):
    """`GET /api/v1/tenants/<tenant>/audit.csv`: every filtered row as CSV, streamed."""

    @extend_schema(parameters=FILTERS, responses={(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR)})
    def get(self, request: Request, tenant: str) -> StreamingHttpResponse | Response:
        form = _form(request, self)
        if not form.is_valid():
            return problem(form.error_text())
        lines = audit_csv_lines(audit_record_export(tenant=self.tenant, filters=form.audit_filter()))
        response = StreamingHttpResponse(lines, content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="audit-{self.tenant.slug}.csv"'
        return response


class DashboardView(TenantAPIView):
    """`GET /api/v1/tenants/<tenant>/dashboard?window=hour|day`: the dashboard's numbers."""

    @extend_schema(parameters=[OpenApiParameter("window", str, enum=list(WINDOWS))], responses={200: DashboardSerializer})
    def get(self, request: Request, tenant: str) -> Response:
        try:
            board = audit_dashboard_get(tenant=self.tenant, window=request.query_params.get("window", "hour"))
        except ValidationError as exc:
            return refused(exc)
        return Response(DashboardSerializer(board).data)
