"""Per-person upstream accounts (docs/identity.md, "Connected accounts"): for a backend whose
credential is `per_person`, its authorization server as the gateway discovered it (with the
gateway's client there), and each person's tokens for it — encrypted at rest, never shown again."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.catalog.models import Backend
from apps.common.models import TimeStampedModel


class UpstreamServer(TimeStampedModel):
    """The authorization server of a per-person backend (RFC 9728 → RFC 8414), and the client the
    gateway is there: registered by the gateway (RFC 7591) or pre-registered by an admin (the
    credential's client id and secret). Found again when the credential changes."""

    class Registration(models.TextChoices):
        DYNAMIC = "dynamic", "registered by the gateway"
        PREREGISTERED = "preregistered", "registered by an admin"
        METADATA_DOCUMENT = "metadata_document", "identified by the gateway's client metadata document"

    backend = models.OneToOneField(Backend, on_delete=models.CASCADE, related_name="upstream_server")
    #: The credential as of the discovery (its `updated_at`): another one means discover again.
    credential_at = models.DateTimeField()
    resource = models.CharField(max_length=500, help_text="The backend's resource identifier (RFC 8707).")
    issuer = models.CharField(max_length=500)
    authorization_endpoint = models.CharField(max_length=500)
    token_endpoint = models.CharField(max_length=500)
    revocation_endpoint = models.CharField(max_length=500, blank=True)
    scope = models.CharField(max_length=500, blank=True, help_text="What the gateway asks each person for.")
    iss_parameter = models.BooleanField(default=False, help_text="The server names itself on its answers (RFC 9207).")
    registration = models.CharField(max_length=24, choices=Registration.choices)
    client_id = models.CharField(max_length=500)
    client_secret = models.TextField(blank=True, help_text="Encrypted; empty for a public client.")
    client_auth = models.CharField(max_length=32, default="none")
    redirect_uri = models.CharField(max_length=500)

    def __str__(self) -> str:
        return f"{self.backend}: {self.issuer}"


class Connection(TimeStampedModel):
    """One person's account at a per-person backend (`user` None: the gateway's own account, which
    its own requests — tool lists, probes — use). Tokens are Fernet-encrypted."""

    backend = models.ForeignKey(Backend, on_delete=models.CASCADE, related_name="connections")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True,
                             related_name="connections")
    #: Who connected it (the person, or the admin who connected the gateway's own account).
    connected_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                                     related_name="+")
    access_token = models.TextField()
    refresh_token = models.TextField(blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    scope = models.CharField(max_length=500, blank=True)
    refreshed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["backend__name", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["backend", "user"], name="connection_one_per_person"),
            models.UniqueConstraint(fields=["backend"], condition=models.Q(user__isnull=True),
                                    name="connection_one_for_the_gateway"),
        ]

    def __str__(self) -> str:
        return f"{self.backend}: {self.user or 'the gateway'}"


class PendingConnection(models.Model):
    """An authorization request on its way: found again by its `state` (kept as a hash), good once,
    for 10 minutes, for the person who started it."""

    state_hash = models.CharField(max_length=64, unique=True)
    backend = models.ForeignKey(Backend, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    for_gateway = models.BooleanField(default=False)
    code_verifier = models.TextField(help_text="Encrypted.")
    #: Where the person goes when it is done (a path of this site).
    next_path = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
