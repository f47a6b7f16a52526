"""JSON shapes of the catalog's REST API. Read-only: writes go through the services."""

from __future__ import annotations

from django.urls import reverse
from rest_framework import serializers

from apps.catalog.models import SpecVersion


def spec_version_path(version: SpecVersion) -> str:
    """The API path of a spec version (the `Location` of an upload)."""
    return reverse("catalog-api:spec-version-detail", kwargs={"backend_id": version.backend_id, "number": version.number})


class SpecVersionSummarySerializer(serializers.ModelSerializer):
    """A version in the history list: what happened to it, without the document and problem lists."""

    url = serializers.SerializerMethodField()
    active = serializers.SerializerMethodField()
    error_count = serializers.SerializerMethodField()
    warning_count = serializers.SerializerMethodField()

    class Meta:
        model = SpecVersion
        fields = [
            "number", "url", "status", "active", "filename", "size", "sha256", "uploaded_by", "created_at",
            "compiled_at", "title", "api_version", "openapi_version", "tool_count", "error_count",
            "warning_count", "changes",
        ]
        read_only_fields = fields

    def get_url(self, version: SpecVersion) -> str:
        path = spec_version_path(version)
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request is not None else path

    def get_active(self, version: SpecVersion) -> bool:
        # The view passes the backend's active version id; None when it has none.
        return version.pk == self.context.get("active_spec_id")

    def get_error_count(self, version: SpecVersion) -> int:
        return len(version.errors)

    def get_warning_count(self, version: SpecVersion) -> int:
        return len(version.warnings)


class SpecVersionDetailSerializer(SpecVersionSummarySerializer):
    """One version in full: its errors and warnings (`[{pointer, message}]`, pointers into the
    document), changes and security schemes, and where to fetch the document."""

    document_url = serializers.SerializerMethodField()

    class Meta(SpecVersionSummarySerializer.Meta):
        fields = [*SpecVersionSummarySerializer.Meta.fields, "errors", "warnings", "security_schemes", "document_url"]
        read_only_fields = fields

    def get_document_url(self, version: SpecVersion) -> str:
        path = reverse(
            "catalog-api:spec-version-document", kwargs={"backend_id": version.backend_id, "number": version.number}
        )
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request is not None else path
