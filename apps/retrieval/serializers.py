"""JSON shapes of the tool index's REST API (output only; for the OpenAPI schema)."""

from __future__ import annotations

from rest_framework import serializers


class NamedBackendSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()


class PathRankSerializer(serializers.Serializer):
    rank = serializers.IntegerField(help_text="1-based, in that path's own ranking.")
    score = serializers.FloatField(help_text="dense: cosine similarity; text: BM25; rewrite: 1.")


class PrerequisiteNameSerializer(serializers.Serializer):
    backend = serializers.CharField()
    name = serializers.CharField()


class ToolSearchResultSerializer(serializers.Serializer):
    backend = NamedBackendSerializer()
    name = serializers.CharField(help_text="The tool's name at its backend.")
    exposed_names = serializers.ListField(child=serializers.CharField(), help_text="What the host calls it.")
    score = serializers.FloatField(help_text="Reciprocal Rank Fusion of the paths' ranks.")
    paths = serializers.DictField(child=PathRankSerializer(), help_text="dense, text, rewrite: the paths that found it.")
    prerequisites = PrerequisiteNameSerializer(many=True, help_text="Dependencies first.")


class RewriteMatchSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="The id or ARN as the query wrote it.")
    type = serializers.CharField(help_text="The resource type it was read as.")
    cost = serializers.FloatField(help_text="How far-fetched the reading is: lower is likelier.")


class QueryRewriteSerializer(serializers.Serializer):
    text = serializers.CharField(help_text="What the dense and full-text paths searched for.")
    weak = serializers.BooleanField(help_text="The query says little besides its ids: their describing tools were ranked too.")
    matches = RewriteMatchSerializer(many=True)


class VirtualHostRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    tenant = serializers.CharField()
    slug = serializers.CharField()


class ToolSearchAnswerSerializer(serializers.Serializer):
    virtual_host = VirtualHostRefSerializer()
    query = serializers.CharField()
    rewrite = QueryRewriteSerializer()
    results = ToolSearchResultSerializer(many=True)


class ToolRefSerializer(serializers.Serializer):
    id = serializers.IntegerField(allow_null=True)
    backend = serializers.CharField()
    name = serializers.CharField()


class ToolNeedSerializer(serializers.Serializer):
    parameter = serializers.CharField(help_text="As the tool's input schema names it; dotted for a nested member.")
    producer = ToolRefSerializer(allow_null=True, help_text="The tool that makes one, when nothing exists yet.")
    lookup = ToolRefSerializer(allow_null=True, help_text="The read-only tool that finds an existing one.")


class ToolPrerequisitesSerializer(serializers.Serializer):
    tool = ToolRefSerializer()
    prerequisites = ToolRefSerializer(many=True, help_text="Dependencies first.")
    needs = ToolNeedSerializer(many=True, help_text="The ids the tool cannot work without, in its schema's order.")


class RewriteRuleSerializer(serializers.Serializer):
    type = serializers.CharField()
    weight = serializers.IntegerField(help_text="How many parameters of the catalog take its ids.")
    longer_names = serializers.ListField(child=serializers.CharField())
    describing_tools = PrerequisiteNameSerializer(many=True, help_text="Best first.")


class RewriteRulePageSerializer(serializers.Serializer):
    """A page of LimitOffsetPagination."""

    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = RewriteRuleSerializer(many=True)
