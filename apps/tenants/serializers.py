"""JSON shapes of the tenants REST API: tenants, plans, teams, members, API keys and admin tokens.
Output shapes are read-only; input shapes check only types: every rule, with its words, is the
services' (`apps.tenants.validators`), so that the API refuses what the console and `gateway apply`
refuse, as they do."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone
from rest_framework import serializers

from apps.tenants.models import AdminToken, ApiKey, Membership, Plan, Team, Tenant


def _text(**options: object) -> serializers.CharField:
    """A string as given: blank, long or padded ones are the service's to refuse."""
    return serializers.CharField(allow_blank=True, trim_whitespace=False, **options)  # type: ignore[arg-type]


def _in_the_future(value: datetime | None) -> datetime | None:
    """As in the console: a new key or token that expires in the past is a mistake."""
    if value is not None and value <= timezone.now():
        raise serializers.ValidationError("must be in the future")
    return value


class PlanSerializer(serializers.ModelSerializer):
    class Meta:
        model = Plan
        fields = ["name", "daily", "monthly", "limits_editable", "created_at", "updated_at"]
        read_only_fields = fields


class PlanInputSerializer(serializers.Serializer):
    """The body of `POST plans` (with `name`) and `PUT plans/<name>` (without)."""

    name = _text(required=False)
    daily = serializers.IntegerField(allow_null=True, required=False, default=None)
    monthly = serializers.IntegerField(allow_null=True, required=False, default=None)
    limits_editable = serializers.BooleanField(required=False, default=True)


class TenantSerializer(serializers.ModelSerializer):
    plan = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = Tenant
        fields = ["slug", "name", "plan", "audit_arguments", "allow_private_networks", "created_at", "updated_at"]
        read_only_fields = fields


class TenantCreateSerializer(serializers.Serializer):
    slug = _text()
    name = _text()
    plan = serializers.SlugRelatedField(slug_field="name", queryset=Plan.objects.all(), allow_null=True,
                                        required=False, default=None)
    allow_private_networks = serializers.BooleanField(
        allow_null=True, required=False, default=None,
        help_text="Backends etc. at private addresses; null: the deployment's default.",
    )


class TenantUpdateSerializer(serializers.Serializer):
    """`PATCH tenants/<slug>`: the fields given are changed (`plan`: a plan's name, or null)."""

    name = _text(required=False)
    plan = serializers.SlugRelatedField(slug_field="name", queryset=Plan.objects.all(), allow_null=True,
                                        required=False)
    audit_arguments = serializers.ChoiceField(choices=Tenant.AuditArguments.choices, required=False)
    allow_private_networks = serializers.BooleanField(
        allow_null=True, required=False,
        help_text="Backends etc. at private addresses; null: the deployment's default.",
    )


class TeamSerializer(serializers.ModelSerializer):
    class Meta:
        model = Team
        fields = ["id", "slug", "created_at"]
        read_only_fields = fields


class TeamInputSerializer(serializers.Serializer):
    slug = _text()


class MembershipSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username", read_only=True)

    class Meta:
        model = Membership
        fields = ["id", "username", "role", "created_at", "updated_at"]
        read_only_fields = fields


class MembershipInputSerializer(serializers.Serializer):
    """`POST members`: give an existing console user a role (replacing the one they had)."""

    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(choices=Membership.Role.choices)


class RoleSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=Membership.Role.choices)


class ApiKeySerializer(serializers.ModelSerializer):
    """A key as listed: never its secret (only the display prefix)."""

    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    owner = serializers.CharField(source="owner.username", read_only=True, allow_null=True, default=None)
    state = serializers.SerializerMethodField()

    class Meta:
        model = ApiKey
        fields = ["id", "name", "prefix", "team", "owner", "acts_as_owner", "scopes", "expires_at", "revoked_at",
                  "state", "created_at", "updated_at"]
        read_only_fields = fields

    def get_state(self, api_key: ApiKey) -> str:
        """active, revoked or expired."""
        if api_key.revoked_at is not None:
            return "revoked"
        if api_key.expires_at is not None and api_key.expires_at <= timezone.now():
            return "expired"
        return "active"


class IssuedApiKeySerializer(ApiKeySerializer):
    """The answer to issuing a key: the key and, this once, its `secret`."""

    secret = serializers.CharField(read_only=True)

    class Meta(ApiKeySerializer.Meta):
        fields = [*ApiKeySerializer.Meta.fields, "secret"]
        read_only_fields = fields


class ApiKeyCreateSerializer(serializers.Serializer):
    """`POST keys`: `team` is the slug of one of the tenant's teams (or null)."""

    name = _text()
    team = serializers.CharField(allow_null=True, required=False, default=None)
    expires_at = serializers.DateTimeField(allow_null=True, required=False, default=None)
    scopes = serializers.ListField(child=_text(), required=False, default=list)
    acts_as_owner = serializers.BooleanField(required=False, default=False)

    def validate_expires_at(self, value: datetime | None) -> datetime | None:
        # An existing key may be given a past expiry (which ends it now); a new one may not.
        return _in_the_future(value)


class ApiKeyUpdateSerializer(serializers.Serializer):
    """`PATCH keys/<id>`: the fields given are changed; null clears `team` or `expires_at`."""

    team = serializers.CharField(allow_null=True, required=False)
    expires_at = serializers.DateTimeField(allow_null=True, required=False)
    scopes = serializers.ListField(child=_text(), required=False)


class AdminTokenSerializer(serializers.ModelSerializer):
    class Meta:
        model = AdminToken
        fields = ["id", "name", "prefix", "expires_at", "revoked_at", "last_used_at", "created_at"]
        read_only_fields = fields


class IssuedAdminTokenSerializer(AdminTokenSerializer):
    secret = serializers.CharField(read_only=True)

    class Meta(AdminTokenSerializer.Meta):
        fields = [*AdminTokenSerializer.Meta.fields, "secret"]
        read_only_fields = fields


class AdminTokenInputSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=AdminToken._meta.get_field("name").max_length)
    expires_at = serializers.DateTimeField(allow_null=True, required=False, default=None)

    def validate_expires_at(self, value: datetime | None) -> datetime | None:
        return _in_the_future(value)
