"""The virtual hosts REST API (mounted under `api/v1/tenants/<tenant>/`): hosts (create, read, update,
delete), their mounts (backends under map keys) and tool aliases, the tool names a host serves, and
ready-to-paste client configuration — what the console's virtual host and Connect pages do.

Views are thin: each calls one service or selector. Refusals answer 400 `{"detail": ...}`."""

from __future__ import annotations

from dataclasses import asdict
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
from apps.catalog.connect import KEY_PLACEHOLDER, client_configs, mcp_url, sse_url
from apps.catalog.models import Backend, ToolOverride, ToolRule, VirtualHost
from apps.catalog.services import (
    ToolTarget,
    mount_add,
    mount_delete,
    mount_set,
    tool_alias_delete,
    tool_alias_set,
    virtual_host_create,
    virtual_host_delete,
    virtual_host_settings_set,
)
from apps.tenants.api_base import TenantAPIView, problem, refused
from apps.tenants.models import ApiKey, Tenant


class MountSerializer(serializers.Serializer):
    map_key = serializers.CharField(max_length=32)
    backend = serializers.IntegerField(help_text="The backend's id (of this tenant).")
    backend_name = serializers.CharField(read_only=True)


class AliasSerializer(serializers.Serializer):
    alias = serializers.CharField(max_length=128)
    map_key = serializers.CharField(max_length=32)
    tool = serializers.CharField(max_length=128, help_text="The tool's name at the backend mounted under map_key.")


class VirtualHostSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    slug = serializers.CharField()
    mcp_url = serializers.CharField(help_text="The host's Streamable HTTP endpoint, as this API was reached.")
    sse_url = serializers.CharField(help_text="The host's HTTP+SSE (2024-11-05) event-stream URL.")
    tool_search = serializers.ChoiceField(choices=VirtualHost.ToolSearch.choices)
    tool_search_name = serializers.CharField()
    allow_anonymous = serializers.BooleanField()
    anonymous_key = serializers.IntegerField(allow_null=True, help_text="The id of the key anonymous callers act as.")
    mounts = MountSerializer(many=True)
    aliases = AliasSerializer(many=True)
    tool_rules = serializers.ListField(child=serializers.DictField(), help_text="The curation rules (…/tool-rules).")
    tool_descriptions = serializers.ListField(child=serializers.DictField(),
                                              help_text="Descriptions shown instead of the backends' (…/tool-descriptions).")


class VirtualHostInputSerializer(serializers.Serializer):
    """The body of a create (POST) or update (PUT; `slug` is ignored: it is part of clients' URLs,
    and what is left out keeps its value)."""

    slug = serializers.CharField(max_length=64, required=False)
    tool_search = serializers.ChoiceField(choices=VirtualHost.ToolSearch.choices, required=False)
    tool_search_name = serializers.CharField(max_length=128, required=False)
    allow_anonymous = serializers.BooleanField(required=False)
    anonymous_key = serializers.IntegerField(required=False, allow_null=True)


class ClientConfigSerializer(serializers.Serializer):
    client = serializers.CharField()
    title = serializers.CharField()
    where = serializers.CharField()
    language = serializers.CharField()
    text = serializers.CharField()


class ConnectSerializer(serializers.Serializer):
    url = serializers.CharField()
    key_placeholder = serializers.CharField(help_text="Replace it with an API key of the tenant.")
    configs = ClientConfigSerializer(many=True)


def _url(request: Request, tenant: Tenant, virtual_host: VirtualHost) -> str:
    return mcp_url(origin=f"{request.scheme}://{request.get_host()}", tenant_slug=tenant.slug, vhost_slug=virtual_host.slug)


def _sse_url(request: Request, tenant: Tenant, virtual_host: VirtualHost) -> str:
    return sse_url(origin=f"{request.scheme}://{request.get_host()}", tenant_slug=tenant.slug, vhost_slug=virtual_host.slug)


def vhost_data(request: Request, virtual_host: VirtualHost) -> dict[str, Any]:
    return {
        "id": virtual_host.pk, "slug": virtual_host.slug, "mcp_url": _url(request, virtual_host.tenant, virtual_host),
        "sse_url": _sse_url(request, virtual_host.tenant, virtual_host),
        "tool_search": virtual_host.tool_search, "tool_search_name": virtual_host.tool_search_name,
        "allow_anonymous": virtual_host.allow_anonymous, "anonymous_key": virtual_host.anonymous_key_id,
        "mounts": [_mount(m) for m in virtual_host.mounts.all()],
        "aliases": [_alias(a) for a in virtual_host.tool_aliases.all()],
        "tool_rules": [rule_data(r) for r in virtual_host.tool_rules.all()],
        "tool_descriptions": [description_data(o) for o in virtual_host.tool_overrides.all()],
    }


def rule_data(rule: ToolRule) -> dict[str, Any]:
    return {"id": rule.pk, "action": rule.action, "match": rule.match, "pattern": rule.pattern, "map_key": rule.map_key}


def description_data(override: ToolOverride) -> dict[str, str]:
    return {"map_key": override.map_key, "tool": override.upstream_name, "description": override.description}


def _mount(mount: Any) -> dict[str, Any]:
    return {"map_key": mount.map_key, "backend": mount.backend_id, "backend_name": mount.backend.name}


def _alias(alias: Any) -> dict[str, str]:
    return {"alias": alias.alias, "map_key": alias.map_key, "tool": alias.upstream_name}


def serializer_refused(given: serializers.Serializer) -> Response:
    return problem("; ".join(f"{field}: {message}" for field, messages in given.errors.items() for message in messages))


class VirtualHostsAPIView(TenantAPIView):
    parser_classes = [JSONParser]

    def virtual_host(self, virtual_host_id: int) -> VirtualHost:
        found = selectors.virtual_host_get(tenant=self.tenant, virtual_host_id=virtual_host_id)
        if found is None:
            raise Http404(f"no virtual host with id {virtual_host_id}")
        return found

    def backend(self, backend_id: int) -> Backend:
        """The tenant's backend with that id; ValidationError for any other id (another tenant's looks absent)."""
        backend = Backend.objects.filter(tenant=self.tenant, pk=backend_id).first()
        if backend is None:
            raise ValidationError({"backend": f"no backend with id {backend_id} in this tenant"})
        return backend

    def anonymous_key(self, key_id: int | None) -> ApiKey | None:
        """The tenant's key with that id; ValidationError for any other id (another tenant's looks absent)."""
        if key_id is None:
            return None
        key = ApiKey.objects.filter(tenant=self.tenant, pk=key_id).first()
        if key is None:
            raise ValidationError({"anonymous_key": f"no API key with id {key_id} in this tenant"})
        return key


class VirtualHostListView(VirtualHostsAPIView):
    """`GET /api/v1/tenants/<tenant>/virtual-hosts?limit=&offset=`: the hosts by slug. `POST`: create
    one (`slug`, `tool_search`, `tool_search_name`, `allow_anonymous`, `anonymous_key`); mount
    backends next (`…/mounts`)."""

    @extend_schema(responses=VirtualHostSerializer(many=True))
    def get(self, request: Request, tenant: str) -> Response:
        paginator = LimitOffsetPagination()
        page = paginator.paginate_queryset(selectors.virtual_host_list(tenant=self.tenant), request, view=self) or []
        return paginator.get_paginated_response([vhost_data(request, v) for v in page])

    @extend_schema(request=VirtualHostInputSerializer, responses={201: VirtualHostSerializer})
    def post(self, request: Request, tenant: str) -> Response:
        given = VirtualHostInputSerializer(data=request.data)
        if not given.is_valid():
            return serializer_refused(given)
        data = dict(given.validated_data)
        if "slug" not in data:
            return problem("slug: This field is required.")
        try:
            data["anonymous_key"] = self.anonymous_key(data.get("anonymous_key"))
            created = virtual_host_create(tenant=self.tenant, **data)
        except ValidationError as exc:
            return refused(exc)
        return Response(vhost_data(request, self.virtual_host(created.pk)), status=status.HTTP_201_CREATED)


class VirtualHostDetailView(VirtualHostsAPIView):
    """`GET/PUT/DELETE /api/v1/tenants/<tenant>/virtual-hosts/<id>` (DELETE keeps the backends)."""

    @extend_schema(responses=VirtualHostSerializer)
    def get(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        return Response(vhost_data(request, self.virtual_host(virtual_host_id)))

    @extend_schema(request=VirtualHostInputSerializer, responses=VirtualHostSerializer)
    def put(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        virtual_host = self.virtual_host(virtual_host_id)
        given = VirtualHostInputSerializer(data=request.data)
        if not given.is_valid():
            return serializer_refused(given)
        data = given.validated_data
        try:
            virtual_host_settings_set(
                virtual_host=virtual_host,
                allow_anonymous=data.get("allow_anonymous", virtual_host.allow_anonymous),
                anonymous_key=self.anonymous_key(data.get("anonymous_key", virtual_host.anonymous_key_id)),
                tool_search=data.get("tool_search", virtual_host.tool_search),
                tool_search_name=data.get("tool_search_name", virtual_host.tool_search_name),
            )
        except ValidationError as exc:
            return refused(exc)
        return Response(vhost_data(request, self.virtual_host(virtual_host_id)))

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        virtual_host_delete(virtual_host=self.virtual_host(virtual_host_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class MountListView(VirtualHostsAPIView):
    """`GET …/virtual-hosts/<id>/mounts`: the host's mounts by map key. `POST {map_key, backend}`:
    mount the backend under a key the host does not use yet (replace a mount with PUT on it)."""

    @extend_schema(responses=MountSerializer(many=True))
    def get(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        paginator = LimitOffsetPagination()
        page = paginator.paginate_queryset(list(self.virtual_host(virtual_host_id).mounts.all()), request, view=self) or []
        return paginator.get_paginated_response([_mount(m) for m in page])

    @extend_schema(request=MountSerializer, responses={201: MountSerializer})
    def post(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        virtual_host = self.virtual_host(virtual_host_id)
        given = MountSerializer(data=request.data)
        if not given.is_valid():
            return serializer_refused(given)
        try:
            mount = mount_add(virtual_host=virtual_host, map_key=given.validated_data["map_key"], backend=self.backend(given.validated_data["backend"]))
        except ValidationError as exc:
            return refused(exc)
        return Response(_mount(mount), status=status.HTTP_201_CREATED)


class MountBackendSerializer(serializers.Serializer):
    backend = serializers.IntegerField(help_text="The backend's id (of this tenant).")


class MountDetailView(VirtualHostsAPIView):
    """`PUT …/virtual-hosts/<id>/mounts/<map_key> {backend}`: mount the backend under the key, replacing
    what it mounted (every name under the key then reaches the new backend). `DELETE`: unmount, with
    the key's curation rules and descriptions; refused while an alias routes to the key."""

    @extend_schema(request=MountBackendSerializer, responses=MountSerializer)
    def put(self, request: Request, tenant: str, virtual_host_id: int, map_key: str) -> Response:
        virtual_host = self.virtual_host(virtual_host_id)
        given = MountBackendSerializer(data=request.data)
        if not given.is_valid():
            return serializer_refused(given)
        try:
            mount = mount_set(virtual_host=virtual_host, map_key=map_key, backend=self.backend(given.validated_data["backend"]))
        except ValidationError as exc:
            return refused(exc)
        return Response(_mount(mount))

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, tenant: str, virtual_host_id: int, map_key: str) -> Response:
        virtual_host = self.virtual_host(virtual_host_id)
        mount = virtual_host.mounts.filter(map_key=map_key).select_related("virtual_host").first()
        if mount is None:
            raise Http404(f"nothing is mounted under {map_key!r}")
        try:
            mount_delete(mount=mount)
        except ValidationError as exc:
            return refused(exc)
        return Response(status=status.HTTP_204_NO_CONTENT)


class AliasListView(VirtualHostsAPIView):
    """`GET …/virtual-hosts/<id>/aliases`: the host's aliases. `POST {alias, map_key, tool}`: set one
    (replacing an alias of that name)."""

    @extend_schema(responses=AliasSerializer(many=True))
    def get(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        paginator = LimitOffsetPagination()
        aliases = list(self.virtual_host(virtual_host_id).tool_aliases.all())
        page = paginator.paginate_queryset(aliases, request, view=self) or []
        return paginator.get_paginated_response([_alias(a) for a in page])

    @extend_schema(request=AliasSerializer, responses={201: AliasSerializer})
    def post(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        virtual_host = self.virtual_host(virtual_host_id)
        given = AliasSerializer(data=request.data)
        if not given.is_valid():
            return serializer_refused(given)
        data = given.validated_data
        try:
            alias = tool_alias_set(
                virtual_host=virtual_host, alias=data["alias"],
                target=ToolTarget(map_key=data["map_key"], upstream_name=data["tool"]),
            )
        except ValidationError as exc:
            return refused(exc)
        return Response(_alias(alias), status=status.HTTP_201_CREATED)


class AliasDetailView(VirtualHostsAPIView):
    """`DELETE …/virtual-hosts/<id>/aliases/<alias>`."""

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, tenant: str, virtual_host_id: int, alias: str) -> Response:
        virtual_host = self.virtual_host(virtual_host_id)
        found = virtual_host.tool_aliases.filter(alias=alias).select_related("virtual_host").first()
        if found is None:
            raise Http404(f"no alias {alias!r}")
        tool_alias_delete(tool_alias=found)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ConnectView(VirtualHostsAPIView):
    """`GET …/virtual-hosts/<id>/connect`: client configuration for the host (Claude Desktop, Claude
    Code, Cursor, VS Code, Windsurf, Codex CLI, the Python SDK), with a key placeholder."""

    @extend_schema(responses=ConnectSerializer)
    def get(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        virtual_host = self.virtual_host(virtual_host_id)
        url = _url(request, self.tenant, virtual_host)
        configs = client_configs(url=url, name=f"{self.tenant.slug}-{virtual_host.slug}")
        return Response({"url": url, "key_placeholder": KEY_PLACEHOLDER, "configs": [asdict(c) for c in configs]})


urls = [
    path("virtual-hosts", VirtualHostListView.as_view(), name="vhost-list"),
    path("virtual-hosts/<int:virtual_host_id>", VirtualHostDetailView.as_view(), name="vhost-detail"),
    path("virtual-hosts/<int:virtual_host_id>/mounts", MountListView.as_view(), name="vhost-mounts"),
    path("virtual-hosts/<int:virtual_host_id>/mounts/<str:map_key>", MountDetailView.as_view(), name="vhost-mount"),
    path("virtual-hosts/<int:virtual_host_id>/aliases", AliasListView.as_view(), name="vhost-aliases"),
    path("virtual-hosts/<int:virtual_host_id>/aliases/<str:alias>", AliasDetailView.as_view(), name="vhost-alias"),
    path("virtual-hosts/<int:virtual_host_id>/connect", ConnectView.as_view(), name="vhost-connect"),
]
