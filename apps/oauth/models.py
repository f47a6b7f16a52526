"""The gateway as the OAuth 2.1 authorization server of a tenant's virtual hosts (docs/identity.md,
"Signing in people"): the tenant's server (on or off, how clients may register, its signing key),
the clients registered with it, and what people granted them — codes and refresh tokens are stored
only as keyed hashes."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.common.models import TimeStampedModel
from apps.tenants.models import Tenant


class AuthorizationServer(TimeStampedModel):
    """A tenant's authorization server. Its access tokens are JWTs signed with `signing_key` (ES256;
    the private key encrypted at rest), verified by the gateway like any issuer's."""

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="authorization_server")
    enabled = models.BooleanField(default=True)
    allow_metadata_documents = models.BooleanField(
        default=True, help_text="Clients may identify by the URL of their client metadata document.")
    allow_registration = models.BooleanField(
        default=True, help_text="Clients may register themselves (RFC 7591), as clients before 2025-11-25 do.")
    signing_key = models.TextField(help_text="The ES256 private key (PEM), encrypted.")
    key_id = models.CharField(max_length=32)

    def __str__(self) -> str:
        return f"authorization server of {self.tenant.slug}"


class OAuthClient(TimeStampedModel):
    """A client of a tenant's authorization server: registered (RFC 7591) or known by the URL of its
    metadata document (then `client_id` is that URL and the document was fetched and checked)."""

    class Kind(models.TextChoices):
        REGISTERED = "registered", "registered itself"
        METADATA_DOCUMENT = "metadata_document", "client metadata document"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="oauth_clients")
    client_id = models.CharField(max_length=500)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    client_name = models.CharField(max_length=200, blank=True)
    redirect_uris = models.JSONField(default=list)
    metadata = models.JSONField(default=dict, help_text="The client's metadata as registered or fetched.")

    class Meta:
        ordering = ["tenant__slug", "client_name", "client_id"]
        constraints = [models.UniqueConstraint(fields=["tenant", "client_id"], name="oauthclient_unique_per_tenant")]

    def __str__(self) -> str:
        return f"{self.tenant.slug}: {self.client_name or self.client_id}"


class Grant(TimeStampedModel):
    """What one person allowed one client: access to one virtual host (`resource`, its URL) with
    `scope`. Revoking it ends its refresh tokens at once and its access tokens within their lifetime."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="oauth_grants")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oauth_grants")
    client = models.ForeignKey(OAuthClient, on_delete=models.CASCADE, related_name="grants")
    resource = models.CharField(max_length=500)
    scope = models.CharField(max_length=500, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["tenant", "user"], name="oauthgrant_tenant_user")]


class AuthorizationCode(TimeStampedModel):
    """A code handed to the client's redirect URI: used once, within minutes, with its PKCE verifier."""

    grant = models.ForeignKey(Grant, on_delete=models.CASCADE, related_name="codes")
    code_hash = models.CharField(max_length=64, unique=True)
    redirect_uri = models.CharField(max_length=2000)
    code_challenge = models.CharField(max_length=128)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)


class RefreshToken(TimeStampedModel):
    """A refresh token; each use replaces it (rotation). Using a replaced one again revokes its grant:
    a stolen token is then worth nothing to anyone."""

    grant = models.ForeignKey(Grant, on_delete=models.CASCADE, related_name="refresh_tokens")
    token_hash = models.CharField(max_length=64, unique=True)
    expires_at = models.DateTimeField()
    replaced_at = models.DateTimeField(null=True, blank=True)


class IdentityProvider(TimeStampedModel):
    """A tenant's OpenID Connect provider, through which people sign in to the console and to the
    consent page of the tenant's authorization server (docs/identity.md, "Signing in through the
    tenant's identity provider"). `role`: what a person's first sign-in makes them in the tenant."""

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="identity_provider")
    issuer = models.CharField(max_length=500, help_text="The provider's issuer URL, exactly as its ID tokens say.")
    client_id = models.CharField(max_length=500)
    client_secret = models.TextField(blank=True, help_text="Encrypted.")
    scope = models.CharField(max_length=500, default="openid email profile")
    label = models.CharField(max_length=100, blank=True, help_text="The sign-in button's words: Sign in with …")
    role = models.CharField(max_length=16, default="member")

    def __str__(self) -> str:
        return f"{self.tenant.slug}: {self.issuer}"


class ExternalAccount(TimeStampedModel):
    """A console user as an identity provider of a tenant knows them: its `issuer` and `sub` (a `sub`
    is unique only within its issuer). Kept when the tenant's provider is removed or changed, so a
    person removed from the tenant stays out if the same provider comes back, and a new issuer's
    subjects never sign in as the old one's people."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="external_accounts")
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="external_accounts")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "issuer", "subject"], name="external_account_unique")]

    def __str__(self) -> str:
        return f"{self.tenant.slug}: {self.subject}@{self.issuer} → {self.user}"
