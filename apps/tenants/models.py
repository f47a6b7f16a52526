from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

from apps.common.models import TimeStampedModel

slug_validator = RegexValidator(
    r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$",
    "Use 1-64 lowercase letters, digits and inner hyphens.",
)


class Plan(TimeStampedModel):
    """What the platform grants the tenants on it: caps in budget units per UTC day and month (either
    may be absent) that every key's and every team's budget is clamped to — also of keys and teams
    without a budget of their own — and whether those tenants may edit their rate limits, budgets
    and tool costs. Assigned by platform admins."""

    name = models.CharField(max_length=64, unique=True, validators=[slug_validator])
    daily = models.PositiveIntegerField(null=True, blank=True, help_text="Units per UTC day; empty: no cap.")
    monthly = models.PositiveIntegerField(null=True, blank=True, help_text="Units per UTC month; empty: no cap.")
    limits_editable = models.BooleanField(
        default=True, help_text="Whether tenants on this plan may change their rate limits, budgets and tool costs."
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Tenant(TimeStampedModel):
    class AuditArguments(models.TextChoices):
        OFF = "off", "Not stored"
        HASH = "hash", "Keyed hash of each argument"
        FULL = "full", "Stored as sent"

    slug = models.CharField(max_length=64, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=200)
    audit_arguments = models.CharField(
        max_length=8, choices=AuditArguments.choices, default=AuditArguments.OFF,
        help_text="What audit rows keep of call arguments.",
    )
    plan = models.ForeignKey(
        Plan, on_delete=models.PROTECT, null=True, blank=True, related_name="tenants",
        help_text="Caps every budget of the tenant, and may forbid editing its limits.",
    )
    allow_private_networks = models.BooleanField(
        null=True, blank=True,
        help_text="Whether backends, token endpoints and key sets may be at private addresses (loopback, "
        "10/8, 192.168/16, fc00::/7, ...); empty: the deployment's default (GATEWAY_ALLOW_PRIVATE_NETWORKS). "
        "Link-local and cloud metadata addresses are refused whatever this says.",
    )

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    @property
    def private_networks_allowed(self) -> bool:
        """The setting in force: the tenant's own, else the deployment's default."""
        if self.allow_private_networks is None:
            return bool(settings.GATEWAY_ALLOW_PRIVATE_NETWORKS)
        return self.allow_private_networks


class Team(TimeStampedModel):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="teams")
    slug = models.CharField(max_length=64, validators=[slug_validator])

    class Meta:
        ordering = ["tenant__slug", "slug"]
        constraints = [models.UniqueConstraint(fields=["tenant", "slug"], name="team_unique_slug_per_tenant")]

    def __str__(self) -> str:
        return f"{self.tenant.slug}/{self.slug}"


class ApiKey(TimeStampedModel):
    """An API key. Only a label and a keyed hash of the secret are stored (`apps.tenants.keys`):
    keys are high-entropy secrets, so a fast hash is enough and verification costs microseconds."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")
    team = models.ForeignKey(Team, on_delete=models.SET_NULL, null=True, blank=True, related_name="api_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(
        max_length=16,
        help_text="A label for recognising the key, never part of its secret: a generated key's public id "
        "(mgw_<id>), else part of its keyed hash (#<hex>).",
    )
    secret_hash = models.CharField(max_length=64, unique=True, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    scopes = models.JSONField(
        default=list, blank=True,
        help_text="Scopes the key carries (e.g. tools:call); access rules can read them as principal.scopes.",
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="api_keys",
        help_text="The console user who issued the key; tenant members manage only their own keys.",
    )
    acts_as_owner = models.BooleanField(
        default=False,
        help_text="Calls with the key are its owner's: they reach per-person backends with the owner's connected accounts.",
    )

    class Meta:
        ordering = ["tenant__slug", "name"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="apikey_unique_name_per_tenant")]

    def __str__(self) -> str:
        return f"{self.tenant.slug}/{self.name} ({self.prefix}…)"


class TokenIssuer(TimeStampedModel):
    """An OAuth/OIDC authorization server whose JWT access tokens the tenant's virtual hosts accept.
    Keys come from `jwks_url` (fetched and cached by each gateway instance) or `public_key` (PEM)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="token_issuers")
    issuer = models.CharField(max_length=500, help_text="The `iss` its tokens carry, exactly.")
    audience = models.CharField(max_length=500, help_text="The `aud` a token must be for (this gateway's resource).")
    jwks_url = models.CharField(max_length=500, blank=True)
    public_key = models.TextField(blank=True, help_text="PEM public key, when the issuer publishes no JWKS.")
    algorithms = models.JSONField(default=list, help_text="Accepted `alg` values: RS256, ES256, EdDSA.")
    team_claim = models.CharField(max_length=100, default="team", help_text="Claim naming the caller's team.")
    subject_claim = models.CharField(max_length=100, default="sub")

    class Meta:
        ordering = ["tenant__slug", "issuer"]
        constraints = [models.UniqueConstraint(fields=["tenant", "issuer"], name="token_issuer_unique_per_tenant")]

    def __str__(self) -> str:
        return f"{self.tenant.slug}: {self.issuer}"


class Membership(TimeStampedModel):
    """A console user's role in a tenant. Platform admins (superusers) need none: they see every
    tenant. A user may belong to several tenants, with one role in each."""

    class Role(models.TextChoices):
        ADMIN = "admin", "Tenant admin"
        MEMBER = "member", "Tenant member"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=8, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        ordering = ["tenant__slug", "user__username"]
        constraints = [models.UniqueConstraint(fields=["user", "tenant"], name="membership_unique_per_tenant")]

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant.slug} ({self.role})"


class AdminToken(TimeStampedModel):
    """A token for the REST API, acting as its user with that user's roles. As for API keys, only
    a label (its public id, gwa_<id>) and a keyed hash of the token are stored."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="admin_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16)
    secret_hash = models.CharField(max_length=64, unique=True, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["user__username", "name"]
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="admintoken_unique_name_per_user")]

    def __str__(self) -> str:
        return f"{self.user}: {self.name} ({self.prefix}…)"
