"""The audit API's bodies (what the OpenAPI schema describes)."""

from __future__ import annotations

from rest_framework import serializers

from apps.audit.models import AuditRecord


class AuditRecordSerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditRecord
        fields = [
            "id", "created_at", "virtual_host", "principal", "api_key_id", "team", "backend", "backend_kind",
            "method", "exposed_name", "upstream_name", "outcome", "error_code", "latency_ms", "bytes_in",
            "bytes_out", "cost", "session_id", "trace_id", "rule", "limit_state", "arguments", "task_id",
            "task_ended_at", "origin", "console_user",
        ]
        read_only_fields = fields


class AuditPageSerializer(serializers.Serializer):
    """A page of the log, newest first: `next` (older rows) and `previous` (newer rows) are the
    links to the neighbouring pages, null at either end."""

    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = AuditRecordSerializer(many=True)


class DashboardBinSerializer(serializers.Serializer):
    start = serializers.DateTimeField()
    calls = serializers.IntegerField()
    errors = serializers.IntegerField()
    error_rate = serializers.FloatField()
    denied = serializers.IntegerField()
    rate_limited = serializers.IntegerField()
    over_budget = serializers.IntegerField()
    p50 = serializers.FloatField(allow_null=True, help_text="Milliseconds (histogram bucket bound, within ~19%).")
    p99 = serializers.FloatField(allow_null=True, help_text="Milliseconds (histogram bucket bound, within ~19%).")


class ToolCountSerializer(serializers.Serializer):
    tool = serializers.CharField()
    calls = serializers.IntegerField()
    errors = serializers.IntegerField()


class DashboardSerializer(serializers.Serializer):
    window = serializers.ChoiceField(choices=["hour", "day"])
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    bin_seconds = serializers.IntegerField()
    total = DashboardBinSerializer()
    bins = DashboardBinSerializer(many=True)
    top_tools = ToolCountSerializer(many=True)
