"""A virtual host's tool curation in the REST API (under `api/v1/tenants/<tenant>/virtual-hosts/<id>/`):
its include/exclude rules, hiding and showing tools by name in bulk, and the descriptions it shows
instead of the backends' — what the console's virtual host page does (docs/virtual-hosts.md,
"Curating a host's tools"). Refusals answer 400 `{"detail": ...}`."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.http import Http404
from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response

from apps.catalog import selectors
from apps.catalog.api_vhosts import VirtualHostsAPIView, description_data, rule_data, serializer_refused
from apps.catalog.curation import (
    TOOLS_AT_ONCE_MAX,
    tool_override_delete,
    tool_override_set,
    tool_rule_delete,
    tool_rules_add,
    tools_hide,
    tools_show,
)
from apps.catalog.models import ToolRule
from apps.kernel.curation import PATTERN_MAX_LENGTH, ToolRuleSpec
from apps.tenants.api_base import refused


class ToolRuleSerializer(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    action = serializers.ChoiceField(choices=ToolRule.Action.choices)
    match = serializers.ChoiceField(choices=ToolRule.Match.choices,
                                    help_text="name: exact; glob: `*`, `?`, `[...]`; tag: an OpenAPI operation tag.")
    pattern = serializers.CharField(max_length=PATTERN_MAX_LENGTH, trim_whitespace=False)
    map_key = serializers.CharField(max_length=32, required=False, allow_blank=True, default="",
                                    help_text="The mount it applies to; empty: every mounted backend.")


class HostToolSerializer(serializers.Serializer):
    map_key = serializers.CharField(max_length=32)
    tool = serializers.CharField(max_length=128, help_text="The tool's name at the backend mounted under map_key.")


class ToolsSerializer(serializers.Serializer):
    tools = HostToolSerializer(many=True, allow_empty=False, max_length=TOOLS_AT_ONCE_MAX)


class ShowResultSerializer(serializers.Serializer):
    removed = serializers.IntegerField(help_text="Exclude rules naming the tools that were removed.")
    added = serializers.IntegerField(help_text="Include rules that were added for tools the include rules left out.")
    still_hidden = serializers.ListField(child=serializers.DictField(),
                                         help_text="[{map_key, tool, reason}]: tools an exclude glob or tag still hides.")


class ToolDescriptionSerializer(serializers.Serializer):
    map_key = serializers.CharField(max_length=32)
    tool = serializers.CharField(max_length=128)
    description = serializers.CharField(trim_whitespace=False)


def _targets(given: ToolsSerializer) -> list[tuple[str, str]]:
    return [(tool["map_key"], tool["tool"]) for tool in given.validated_data["tools"]]


class ToolRuleListView(VirtualHostsAPIView):
    """`GET …/virtual-hosts/<id>/tool-rules`: the host's curation rules. `POST {action, match, pattern,
    map_key}`: add one (201; an identical rule answers the one there is)."""

    @extend_schema(responses=ToolRuleSerializer(many=True))
    def get(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        paginator = LimitOffsetPagination()
        rules = list(self.virtual_host(virtual_host_id).tool_rules.all())
        return paginator.get_paginated_response([rule_data(r) for r in paginator.paginate_queryset(rules, request, view=self) or []])

    @extend_schema(request=ToolRuleSerializer, responses={201: ToolRuleSerializer})
    def post(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        virtual_host = self.virtual_host(virtual_host_id)
        given = ToolRuleSerializer(data=request.data)
        if not given.is_valid():
            return serializer_refused(given)
        data = given.validated_data
        try:
            [rule] = tool_rules_add(virtual_host=virtual_host, rules=[
                ToolRuleSpec(data["action"], data["match"], data["pattern"], data["map_key"])])
        except ValidationError as exc:
            return refused(exc)
        return Response(rule_data(rule), status=status.HTTP_201_CREATED)


class ToolRuleDetailView(VirtualHostsAPIView):
    """`DELETE …/virtual-hosts/<id>/tool-rules/<rule id>`."""

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, tenant: str, virtual_host_id: int, rule_id: int) -> Response:
        rule = selectors.tool_rule_get(virtual_host=self.virtual_host(virtual_host_id), rule_id=rule_id)
        if rule is None:
            raise Http404(f"no tool rule with id {rule_id}")
        tool_rule_delete(tool_rule=rule)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ToolsHideView(VirtualHostsAPIView):
    """`POST …/virtual-hosts/<id>/tools/hide {tools: [{map_key, tool}]}`: hide each with an exclude rule
    naming it; answers the rules."""

    @extend_schema(request=ToolsSerializer, responses=ToolRuleSerializer(many=True))
    def post(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        given = ToolsSerializer(data=request.data)
        if not given.is_valid():
            return serializer_refused(given)
        try:
            rules = tools_hide(virtual_host=self.virtual_host(virtual_host_id), tools=_targets(given))
        except ValidationError as exc:
            return refused(exc)
        return Response([rule_data(r) for r in rules])


class ToolsShowView(VirtualHostsAPIView):
    """`POST …/virtual-hosts/<id>/tools/show {tools: [{map_key, tool}]}`: serve each again (exclude rules
    naming it removed; an include rule added where the include rules leave it out). A tool an exclude
    glob or tag hides stays hidden, listed in `still_hidden` with that rule."""

    @extend_schema(request=ToolsSerializer, responses=ShowResultSerializer)
    def post(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        given = ToolsSerializer(data=request.data)
        if not given.is_valid():
            return serializer_refused(given)
        try:
            shown = tools_show(virtual_host=self.virtual_host(virtual_host_id), tools=_targets(given))
        except ValidationError as exc:
            return refused(exc)
        still = [{"map_key": key, "tool": name, "reason": why} for (key, name), why in shown.still_hidden.items()]
        return Response({"removed": shown.removed, "added": shown.added, "still_hidden": still})


class ToolDescriptionListView(VirtualHostsAPIView):
    """`GET …/virtual-hosts/<id>/tool-descriptions`: the descriptions the host shows instead of the
    backends'. `POST {map_key, tool, description}`: set one."""

    @extend_schema(responses=ToolDescriptionSerializer(many=True))
    def get(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        paginator = LimitOffsetPagination()
        found = list(self.virtual_host(virtual_host_id).tool_overrides.all())
        return paginator.get_paginated_response(
            [description_data(o) for o in paginator.paginate_queryset(found, request, view=self) or []])

    @extend_schema(request=ToolDescriptionSerializer, responses={201: ToolDescriptionSerializer})
    def post(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        virtual_host = self.virtual_host(virtual_host_id)
        given = ToolDescriptionSerializer(data=request.data)
        if not given.is_valid():
            return serializer_refused(given)
        data = given.validated_data
        try:
            override = tool_override_set(virtual_host=virtual_host, map_key=data["map_key"], upstream_name=data["tool"],
                                         description=data["description"])
        except ValidationError as exc:
            return refused(exc)
        return Response(description_data(override), status=status.HTTP_201_CREATED)


class ToolDescriptionDetailView(VirtualHostsAPIView):
    """`DELETE …/virtual-hosts/<id>/tool-descriptions/<map key>/<tool>`: show the backend's again."""

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, tenant: str, virtual_host_id: int, map_key: str, tool: str) -> Response:
        found = selectors.tool_override_get(virtual_host=self.virtual_host(virtual_host_id), map_key=map_key,
                                            upstream_name=tool)
        if found is None:
            raise Http404(f"no description of {map_key}:{tool}")
        tool_override_delete(tool_override=found)
        return Response(status=status.HTTP_204_NO_CONTENT)


urls = [
    path("virtual-hosts/<int:virtual_host_id>/tool-rules", ToolRuleListView.as_view(), name="vhost-tool-rules"),
    path("virtual-hosts/<int:virtual_host_id>/tool-rules/<int:rule_id>", ToolRuleDetailView.as_view(),
         name="vhost-tool-rule"),
    path("virtual-hosts/<int:virtual_host_id>/tools/hide", ToolsHideView.as_view(), name="vhost-tools-hide"),
    path("virtual-hosts/<int:virtual_host_id>/tools/show", ToolsShowView.as_view(), name="vhost-tools-show"),
    path("virtual-hosts/<int:virtual_host_id>/tool-descriptions", ToolDescriptionListView.as_view(),
         name="vhost-tool-descriptions"),
    path("virtual-hosts/<int:virtual_host_id>/tool-descriptions/<str:map_key>/<path:tool>",
         ToolDescriptionDetailView.as_view(), name="vhost-tool-description"),
]
