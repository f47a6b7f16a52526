"""The gateway's REST API, mounted under `api/v1/tenants/<tenant>/`: the open MCP sessions."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response

from apps.gateway.serializers import SessionSerializer
from apps.gateway.sessions import SessionSequence
from apps.tenants.api_base import TenantAPIView


class SessionListView(TenantAPIView):
    """`GET /api/v1/tenants/<tenant>/sessions`: the open MCP sessions, newest first."""

    pagination_class = LimitOffsetPagination

    @extend_schema(responses={200: SessionSerializer(many=True)})
    def get(self, request: Request, tenant: str) -> Response:
        paginator = self.pagination_class()
        rows = paginator.paginate_queryset(SessionSequence(tenant=self.tenant), request, view=self)
        return paginator.get_paginated_response(SessionSerializer(rows, many=True).data)
