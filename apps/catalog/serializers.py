"""JSON shapes of the catalog's REST API. Output shapes are read-only; the one input shape
(`EgressCredentialInputSerializer`) only checks types and lengths: the rules are the services'."""

from __future__ import annotations

from django.urls import reverse
from rest_framework import serializers

from apps.catalog.credentials import IdentitySecret
from apps.catalog.models import EgressCredential, SpecVersion
from apps.catalog.selectors import EgressCredentialState


def spec_version_path(version: SpecVersion) -> str:
    """The API path of a spec version (the `Location` of an upload)."""
    return reverse("catalog-api:spec-version-detail", kwargs={
        "tenant": version.backend.tenant.slug, "backend_id": version.backend_id, "number": version.number})


def spec_version_action_path(version: SpecVersion, action: str) -> str:
    """The API path of `publish` (a held version) or `rollback` (to a ready one)."""
    return reverse(f"catalog-api:spec-version-{action}", kwargs={
        "tenant": version.backend.tenant.slug, "backend_id": version.backend_id, "number": version.number})


class SpecVersionSummarySerializer(serializers.ModelSerializer):
    """A version in the history list: what happened to it, without the document and problem lists.
    `status` `held`: compiled, not published, because it would remove more than half of the tools
    served (`changes.removed` of `changes.served`); `notice` says so and how to publish it."""

    url = serializers.SerializerMethodField()
    active = serializers.SerializerMethodField()
    error_count = serializers.SerializerMethodField()
    warning_count = serializers.SerializerMethodField()
    notice = serializers.SerializerMethodField(help_text="Why a version is not served, and what to do; \"\" otherwise.")

    class Meta:
        model = SpecVersion
        fields = [
            "number", "url", "status", "active", "filename", "size", "sha256", "uploaded_by", "created_at",
            "compiled_at", "title", "api_version", "openapi_version", "tool_count", "error_count",
            "warning_count", "changes", "allow_removals", "restores", "notice",
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

    def get_notice(self, version: SpecVersion) -> str:
        # The view passes the served version's number; None when the backend serves none.
        active = self.context.get("active_number")
        if version.status == SpecVersion.Status.HELD:
            changes = version.changes
            if active is not None and active > version.number:
                return (f"Not published; version {active} has been published since: upload the document again "
                        f"to serve it.")
            served = f"version {active}" if active is not None else "no version"
            return (f"Not published: it would remove {len(changes.get('removed', []))} of the "
                    f"{changes.get('served', 0)} tools served now (more than half); the backend keeps serving "
                    f"{served}. To publish it anyway: POST {spec_version_action_path(version, 'publish')}.")
        if version.status == SpecVersion.Status.FAILED:
            return "Not published: it has errors; the backend keeps serving the version it served."
        if version.changes.get("superseded_by"):
            return f"Not published: version {version.changes['superseded_by']} was published first."
        return ""


class SpecVersionDetailSerializer(SpecVersionSummarySerializer):
    """One version in full: its errors and warnings (`[{pointer, message}]`, pointers into the
    document), changes and security schemes, and where to fetch the document."""

    document_url = serializers.SerializerMethodField()

    class Meta(SpecVersionSummarySerializer.Meta):
        fields = [*SpecVersionSummarySerializer.Meta.fields, "errors", "warnings", "security_schemes", "document_url"]
        read_only_fields = fields

    def get_document_url(self, version: SpecVersion) -> str:
        path = reverse(
            "catalog-api:spec-version-document",
            kwargs={"tenant": version.backend.tenant.slug, "backend_id": version.backend_id, "number": version.number}
        )
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request is not None else path


class EgressIdentityInputSerializer(serializers.Serializer):
    subject_kind = serializers.CharField(allow_blank=True)  # key | subject | team
    subject_name = serializers.CharField(allow_blank=True)
    issuer = serializers.CharField(required=False, allow_blank=True, default="")
    secret = serializers.CharField(allow_blank=True, trim_whitespace=False, write_only=True)


class EgressCredentialInputSerializer(serializers.Serializer):
    """The body of `PUT …/credential`. Only types are checked here: what a credential may be, and
    the words that refuse it, are the service's (`egress_credential_check`: one set of messages for
    the API, the console and `gateway apply`)."""

    kind = serializers.CharField(required=False, allow_blank=True, default="")
    name = serializers.CharField(required=False, allow_blank=True, default="")
    username = serializers.CharField(required=False, allow_blank=True, default="")
    # Taken exactly as sent: spaces may be part of a secret.
    secret = serializers.CharField(required=False, allow_blank=True, default="", trim_whitespace=False, write_only=True)
    source = serializers.CharField(required=False, default=EgressCredential.Source.STATIC)
    tenant_secret = serializers.CharField(required=False, allow_blank=True, default="")
    identities = EgressIdentityInputSerializer(many=True, required=False, default=list)
    token_url = serializers.CharField(required=False, allow_blank=True, default="")
    client_id = serializers.CharField(required=False, allow_blank=True, default="")
    scope = serializers.CharField(required=False, allow_blank=True, default="")
    audience = serializers.CharField(required=False, allow_blank=True, default="")
    client_auth = serializers.CharField(required=False, default=EgressCredential.ClientAuth.BASIC)
    subject_issuer = serializers.CharField(required=False, allow_blank=True, default="")

    def validate_identities(self, value: list[dict[str, str]]) -> tuple[IdentitySecret, ...]:
        return tuple(IdentitySecret(i["subject_kind"], i["subject_name"], i["secret"], i["issuer"]) for i in value)


class EgressCredentialStateSerializer(serializers.Serializer):
    """A credential as `selectors.egress_credential_state` describes it: never the secret. `applied`
    is what the gateway sends (`kind` "" leaves it to the spec's scheme named in `applied.scheme`)."""

    kind = serializers.CharField()
    name = serializers.CharField()
    username = serializers.CharField()
    source = serializers.CharField()
    tenant_secret = serializers.CharField()
    identities = serializers.ListField(child=serializers.DictField(child=serializers.CharField()))
    oauth = serializers.DictField(child=serializers.CharField(), allow_null=True)
    applied = serializers.SerializerMethodField()
    description = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def get_applied(self, state: EgressCredentialState) -> dict[str, str]:
        return {"kind": state.applied_kind, "name": state.applied_name, "scheme": state.scheme}
