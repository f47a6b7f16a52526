"""Who may see and call which tool of a virtual host (the rules' semantics: apps/gateway/pipeline/policy.py)."""

from django.db import models

from apps.catalog.models import VirtualHost
from apps.common.models import TimeStampedModel


class Effect(models.TextChoices):
    ALLOW = "allow", "Allow"
    DENY = "deny", "Deny"


class AccessPolicy(TimeStampedModel):
    """The access policy of one virtual host. A host without one lets every key of its tenant see and
    call everything."""

    virtual_host = models.OneToOneField(VirtualHost, on_delete=models.CASCADE, related_name="access_policy")
    default_effect = models.CharField(max_length=8, choices=Effect.choices, default=Effect.ALLOW)

    def __str__(self) -> str:
        return f"{self.virtual_host} (default {self.default_effect})"


class AccessRule(models.Model):
    class Subject(models.TextChoices):
        TENANT = "tenant", "Tenant"
        TEAM = "team", "Team"
        KEY = "key", "Key"

    policy = models.ForeignKey(AccessPolicy, on_delete=models.CASCADE, related_name="rules")
    rule_id = models.CharField(max_length=64)
    position = models.PositiveIntegerField()  # the order the rules were written in
    subject_kind = models.CharField(max_length=8, choices=Subject.choices)
    subject_name = models.CharField(max_length=100)
    effect = models.CharField(max_length=8, choices=Effect.choices)
    tools = models.JSONField(help_text="Exposed or upstream tool names; globs (* ?) allowed.")
    condition = models.TextField(blank=True, help_text="Optional CEL over `arguments` and `principal`.")

    class Meta:
        ordering = ["policy", "position"]
        constraints = [
            models.UniqueConstraint(fields=["policy", "rule_id"], name="access_rule_unique_id_per_policy"),
        ]

    def __str__(self) -> str:
        return f"{self.rule_id}: {self.effect} {self.subject_kind}:{self.subject_name}"


class RateLimit(TimeStampedModel):
    """At most `limit` routed calls per `window_seconds`, for one key or for a whole team (a ceiling
    over all its keys together). Enforced atomically in Redis across every gateway instance."""

    class Scope(models.TextChoices):
        KEY = "key", "Key"
        TEAM = "team", "Team"

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="rate_limits")
    scope = models.CharField(max_length=8, choices=Scope.choices)
    name = models.CharField(max_length=100, help_text="The key's name or the team's slug.")
    limit = models.PositiveIntegerField()
    window_seconds = models.PositiveIntegerField()

    class Meta:
        ordering = ["tenant", "scope", "name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "scope", "name"], name="rate_limit_unique_per_subject"),
            models.CheckConstraint(condition=models.Q(limit__gte=1), name="rate_limit_positive"),
            models.CheckConstraint(condition=models.Q(window_seconds__gte=1), name="rate_limit_window_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.scope}:{self.name} {self.limit}/{self.window_seconds}s"
