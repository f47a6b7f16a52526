"""The backends REST API (mounted under `api/v1/tenants/<tenant>/`): backends with their replica URLs
(create, read, update, delete), a connection test and the replicas' health — what the console's
backend pages do. A backend's spec versions and credential are in `api.py`.

Views are thin: each calls one service or selector. Refusals answer 400 `{"detail": ...}`."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.http import Http404
from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response

from apps.catalog import selectors
from apps.catalog.models import Backend
from apps.catalog.services import (
    DEFAULT_TIMEOUT_SECONDS,
    DEFAULT_TOOL_NAME_MAX_LENGTH,
    backend_create,
    backend_delete,
    backend_update,
)
from apps.tenants.api_base import TenantAPIView, problem, refused


class BackendSerializer(serializers.Serializer):
    """A backend as the API answers it. `replicas`: an MCP backend's URLs in order (empty for OpenAPI)."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=Backend.Kind.choices)
    transport = serializers.ChoiceField(choices=Backend.Transport.choices)
    replicas = serializers.ListField(child=serializers.CharField())
    base_url = serializers.CharField()
    timeout_seconds = serializers.FloatField()
    max_concurrency = serializers.IntegerField(
        allow_null=True, help_text="Calls one gateway instance forwards at once; null: the deployment's default.")
    tool_name_max_length = serializers.IntegerField()
    include_deprecated = serializers.BooleanField()
    active_spec = serializers.IntegerField(allow_null=True, help_text="The served spec version's number (OpenAPI).")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


def backend_data(backend: Backend) -> dict[str, Any]:
    return {
        "id": backend.pk, "name": backend.name, "kind": backend.kind, "transport": backend.transport,
        "replicas": [r.url for r in backend.replicas.all()], "base_url": backend.base_url,
        "timeout_seconds": backend.timeout_seconds, "max_concurrency": backend.max_concurrency,
        "tool_name_max_length": backend.tool_name_max_length,
        "include_deprecated": backend.include_deprecated,
        "active_spec": backend.active_spec.number if backend.active_spec_id else None,
        "created_at": backend.created_at, "updated_at": backend.updated_at,
    }


class BackendInputSerializer(serializers.Serializer):
    """The body of a create (POST) or update (PUT; `name` is ignored: a backend keeps its name, and
    what is left out keeps its value). The rules are the services'; lengths and types are checked here."""

    name = serializers.CharField(max_length=64, required=False)
    kind = serializers.ChoiceField(choices=Backend.Kind.choices, required=False)
    transport = serializers.ChoiceField(choices=Backend.Transport.choices, required=False)
    replicas = serializers.ListField(child=serializers.CharField(max_length=500), required=False, max_length=100)
    base_url = serializers.CharField(max_length=500, required=False, allow_blank=True)
    timeout_seconds = serializers.FloatField(required=False)
    max_concurrency = serializers.IntegerField(required=False, allow_null=True)
    tool_name_max_length = serializers.IntegerField(required=False)
    include_deprecated = serializers.BooleanField(required=False)


def _problems(given: serializers.Serializer) -> Response:
    return problem("; ".join(f"{field}: {message}" for field, messages in given.errors.items() for message in messages))


def _backend_or_404(tenant: Any, backend_id: int) -> Backend:
    backend = selectors.backend_get(tenant=tenant, backend_id=backend_id)
    if backend is None:
        raise Http404(f"no backend with id {backend_id}")
    return backend


class BackendsAPIView(TenantAPIView):
    parser_classes = [JSONParser]


class BackendListView(BackendsAPIView):
    """`GET /api/v1/tenants/<tenant>/backends?limit=&offset=`: the tenant's backends by name.
    `POST`: create one (`name`, `kind` mcp|openapi, `transport`, `replicas` for MCP, `base_url` for OpenAPI)."""

    @extend_schema(responses=BackendSerializer(many=True))
    def get(self, request: Request, tenant: str) -> Response:
        paginator = LimitOffsetPagination()
        page = paginator.paginate_queryset(selectors.backend_list(tenant=self.tenant), request, view=self) or []
        return paginator.get_paginated_response([backend_data(b) for b in page])

    @extend_schema(request=BackendInputSerializer, responses={201: BackendSerializer})
    def post(self, request: Request, tenant: str) -> Response:
        given = BackendInputSerializer(data=request.data)
        if not given.is_valid():
            return _problems(given)
        data = dict(given.validated_data)
        if "name" not in data:
            return problem("name: This field is required.")
        try:
            backend = backend_create(
                tenant=self.tenant, name=data["name"], urls=data.get("replicas", []),
                kind=data.get("kind", Backend.Kind.MCP),
                transport=data.get("transport", Backend.Transport.STREAMABLE_HTTP),
                timeout_seconds=data.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS),
                base_url=data.get("base_url", ""),
                tool_name_max_length=data.get("tool_name_max_length", DEFAULT_TOOL_NAME_MAX_LENGTH),
                include_deprecated=data.get("include_deprecated", False),
                max_concurrency=data.get("max_concurrency"),
            )
        except ValidationError as exc:
            return refused(exc)
        backend = _backend_or_404(self.tenant, backend.pk)
        return Response(backend_data(backend), status=status.HTTP_201_CREATED)


class BackendDetailView(BackendsAPIView):
    """`GET/PUT/DELETE /api/v1/tenants/<tenant>/backends/<id>`. DELETE is refused (400) while a
    virtual host mounts the backend."""

    @extend_schema(responses=BackendSerializer)
    def get(self, request: Request, tenant: str, backend_id: int) -> Response:
        return Response(backend_data(_backend_or_404(self.tenant, backend_id)))

    @extend_schema(request=BackendInputSerializer, responses=BackendSerializer)
    def put(self, request: Request, tenant: str, backend_id: int) -> Response:
        backend = _backend_or_404(self.tenant, backend_id)
        given = BackendInputSerializer(data=request.data)
        if not given.is_valid():
            return _problems(given)
        current = backend_data(backend)
        data = {**current, **given.validated_data}
        try:
            backend_update(
                backend=backend, kind=data["kind"], transport=data["transport"], urls=data["replicas"],
                timeout_seconds=data["timeout_seconds"], base_url=data["base_url"],
                tool_name_max_length=data["tool_name_max_length"], include_deprecated=data["include_deprecated"],
                max_concurrency=data["max_concurrency"],
            )
        except ValidationError as exc:
            return refused(exc)
        return Response(backend_data(_backend_or_404(self.tenant, backend_id)))

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, tenant: str, backend_id: int) -> Response:
        backend = _backend_or_404(self.tenant, backend_id)
        try:
            backend_delete(backend=backend)
        except ValidationError as exc:
            return refused(exc)
        return Response(status=status.HTTP_204_NO_CONTENT)


urls = [
    path("backends", BackendListView.as_view(), name="backend-list"),
    path("backends/<int:backend_id>", BackendDetailView.as_view(), name="backend-detail"),
]
