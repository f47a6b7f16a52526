"""The gateway's REST API, mounted under `api/v1/tenants/<tenant>/`: the open MCP sessions, and what
the gateway finds when it checks a backend's replicas (its health, "Test connection"), and the tools a
virtual host serves, named as the gateway names them."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response

from apps.catalog.models import Backend, VirtualHost
from apps.catalog.selectors import backend_get, virtual_host_get
from apps.gateway.exposure import STATES, virtual_host_exposed_tools
from apps.gateway.probes import BackendProbe, backend_probe, gateways_down
from apps.gateway.serializers import BackendProbeSerializer, ExposedToolsSerializer, SessionSerializer
from apps.gateway.sessions import SessionSequence
from apps.tenants.api_base import TenantAPIView, problem
from apps.tenants.models import Tenant


class SessionListView(TenantAPIView):
    """`GET /api/v1/tenants/<tenant>/sessions`: the open MCP sessions, newest first."""

    pagination_class = LimitOffsetPagination

    @extend_schema(responses={200: SessionSerializer(many=True)})
    def get(self, request: Request, tenant: str) -> Response:
        paginator = self.pagination_class()
        rows = paginator.paginate_queryset(SessionSequence(tenant=self.tenant), request, view=self)
        return paginator.get_paginated_response(SessionSerializer(rows, many=True).data)


def _backend(tenant: Tenant, backend_id: int) -> Backend:
    backend = backend_get(tenant=tenant, backend_id=backend_id)
    if backend is None:
        raise Http404(f"no backend with id {backend_id}")
    return backend


def probe_data(probe: BackendProbe, backend: Backend) -> dict[str, Any]:
    down = gateways_down(backend=backend, probe=probe)
    shared = None if down is None else [asdict(entry) for entry in down.values()]
    return {**asdict(probe), "up": probe.up, "gateways_down": shared}


class BackendTestConnectionView(TenantAPIView):
    """`POST /api/v1/tenants/<tenant>/backends/<id>/test-connection`: check every replica now (an MCP
    initialize, an HTTP+SSE endpoint, an OpenAPI base URL's reachability) and answer what each said.
    Open to every role that sees the backend: a check changes nothing."""

    members_write = True

    @extend_schema(request=None, responses=BackendProbeSerializer)
    def post(self, request: Request, tenant: str, backend_id: int) -> Response:
        backend = _backend(self.tenant, backend_id)
        return Response(probe_data(backend_probe(backend=backend, fresh=True), backend))


class BackendHealthView(TenantAPIView):
    """`GET /api/v1/tenants/<tenant>/backends/<id>/health`: each replica up or down, with latency and
    error, as checked in the last few seconds (or now), and which ones the gateways have marked down."""

    @extend_schema(responses=BackendProbeSerializer)
    def get(self, request: Request, tenant: str, backend_id: int) -> Response:
        backend = _backend(self.tenant, backend_id)
        return Response(probe_data(backend_probe(backend=backend), backend))


def _virtual_host(tenant: Tenant, virtual_host_id: int) -> VirtualHost:
    found = virtual_host_get(tenant=tenant, virtual_host_id=virtual_host_id, prefetched=False)
    if found is None:
        raise Http404(f"no virtual host with id {virtual_host_id}")
    return found


class ExposedToolsView(TenantAPIView):
    """`GET …/virtual-hosts/<id>/exposed-tools?search=&state=&map_key=&limit=&offset=`: the tools the
    host serves now (`state` served, the default), hides (hidden) or both (all), named as the gateway
    names them (an MCP backend's tools are asked of its server); a search ranks them by relevance;
    `limit` (default 50, at most 1000) of them from `offset`, `count` in all."""

    @extend_schema(responses=ExposedToolsSerializer, parameters=[
        OpenApiParameter("search", str), OpenApiParameter("state", str, enum=list(STATES)),
        OpenApiParameter("map_key", str), OpenApiParameter("limit", int), OpenApiParameter("offset", int),
    ])
    def get(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        given = request.query_params
        state = given.get("state", "served")
        if state not in STATES:
            return problem(f"state must be one of {', '.join(STATES)}")
        try:
            limit, offset = int(given.get("limit", 50)), int(given.get("offset", 0))
        except ValueError:
            return problem("limit and offset must be whole numbers")
        if not 1 <= limit <= 1000 or offset < 0:
            return problem("limit must be from 1 to 1000, and offset at least 0")
        return Response(asdict(virtual_host_exposed_tools(
            virtual_host=_virtual_host(self.tenant, virtual_host_id), search=given.get("search", "")[:200], state=state,
            map_key=given.get("map_key", "")[:32], offset=offset, limit=limit)))
