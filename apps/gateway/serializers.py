"""JSON shapes of the gateway's REST API: the open MCP sessions, what the gateway finds of a backend's replicas, and
the tools a virtual host serves."""

from __future__ import annotations

from rest_framework import serializers


class BackendSessionSerializer(serializers.Serializer):
    map_key = serializers.CharField()
    replica = serializers.CharField()
    version = serializers.CharField()
    session_id = serializers.CharField()


class SessionSerializer(serializers.Serializer):
    id = serializers.CharField()
    instance = serializers.CharField(help_text="The instance that opened the session (the id's first part).")
    protocol_version = serializers.CharField()
    transport = serializers.CharField()
    key_id = serializers.IntegerField()
    key_name = serializers.CharField(help_text="Empty when the key is gone or the caller used a token.")
    virtual_host = serializers.CharField()
    idle_seconds = serializers.FloatField(help_text="Seconds since the session was last used (within its idle expiry).")
    backends = BackendSessionSerializer(many=True)


class ReplicaProbeSerializer(serializers.Serializer):
    url = serializers.CharField()
    up = serializers.BooleanField()
    latency_ms = serializers.IntegerField()
    error = serializers.CharField(help_text="Why the check failed; empty when up.")
    server_name = serializers.CharField(help_text="From an MCP initialize.")
    server_version = serializers.CharField()
    protocol_version = serializers.CharField()
    detail = serializers.CharField(help_text="What an up replica said besides (an HTTP status, an SSE endpoint).")


class GatewaysDownSerializer(serializers.Serializer):
    url = serializers.CharField()
    since = serializers.FloatField(help_text="Unix time a gateway instance found it down.")
    instance = serializers.CharField(help_text="The gateway instance that found it down.")
    checked = serializers.FloatField(help_text="Unix time a gateway's check last found it still down.")


class BackendProbeSerializer(serializers.Serializer):
    backend_id = serializers.IntegerField()
    up = serializers.BooleanField(help_text="Whether any replica answered.")
    checked_at = serializers.FloatField(help_text="Unix time of the check.")
    note = serializers.CharField()
    replicas = ReplicaProbeSerializer(many=True)
    gateways_down = GatewaysDownSerializer(
        many=True, allow_null=True, required=False,
        help_text="The replicas the gateway instances have marked down and route no request to (one that "
        "finds a replica down tells the others); null when they track none (one replica, or OpenAPI).",
    )


class ExposedToolSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="As the host lists it; empty when its curation hides it.")
    map_key = serializers.CharField()
    backend = serializers.CharField()
    upstream_name = serializers.CharField()
    description = serializers.CharField(help_text="The start of the description the host shows.")
    described = serializers.BooleanField(help_text="Whether the host shows its own description, not the backend's.")
    hidden = serializers.CharField(help_text="Why the host's curation hides it; empty when served.")


class DroppedToolSerializer(serializers.Serializer):
    map_key = serializers.CharField()
    upstream_name = serializers.CharField()
    reason = serializers.CharField()


class ExposedToolsSerializer(serializers.Serializer):
    tools = ExposedToolSerializer(many=True)
    dropped = DroppedToolSerializer(many=True, help_text="Tools no exposed name routes back to.")
    unavailable = serializers.DictField(child=serializers.CharField(), help_text="map key -> why its tools could not be listed.")
    tool_search = serializers.CharField(help_text="The gateway's own search tool's name; empty when off.")
    count = serializers.IntegerField(help_text="How many tools matched the state and search, before paging.")
    served = serializers.IntegerField(help_text="How many tools the host serves.")
    hidden = serializers.IntegerField(help_text="How many tools its curation hides.")
    map_keys = serializers.ListField(child=serializers.CharField(), help_text="The host's map keys: what `map_key` may name.")
