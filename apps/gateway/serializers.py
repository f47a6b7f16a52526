"""JSON shapes of the gateway's REST API: the open MCP sessions."""

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
