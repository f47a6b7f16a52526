"""Who may see and call which tool of a virtual host (the rules' semantics: apps/kernel/policy.py)."""

from django.db import models

from apps.catalog.models import TenantSecret, VirtualHost
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


class Budget(TimeStampedModel):
    """At most `daily` cost units per UTC calendar day and `monthly` per UTC calendar month (either
    may be absent) for one key or for a whole team (a ceiling over all its keys together). The
    tenant's plan clamps both (apps/gateway/adapters/snapshot_directory.py). Counted atomically in Redis."""

    class Scope(models.TextChoices):
        KEY = "key", "Key"
        TEAM = "team", "Team"

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="budgets")
    scope = models.CharField(max_length=8, choices=Scope.choices)
    name = models.CharField(max_length=100, help_text="The key's name or the team's slug.")
    daily = models.PositiveIntegerField(null=True, blank=True, help_text="Units per UTC day; empty: no daily cap.")
    monthly = models.PositiveIntegerField(
        null=True, blank=True, help_text="Units per UTC month; empty: no monthly cap."
    )

    class Meta:
        ordering = ["tenant", "scope", "name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "scope", "name"], name="budget_unique_per_subject"),
            models.CheckConstraint(
                condition=models.Q(daily__isnull=False) | models.Q(monthly__isnull=False), name="budget_has_a_cap"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.scope}:{self.name} {self.daily}/day {self.monthly}/month"


class ToolCost(models.Model):
    """What one call of the tools `tools` names costs on a virtual host, in budget units. A host's
    entries are tried in the order written (`position`); the first that names the tool decides, and
    a tool none names costs 1 (apps/kernel/costs.py)."""

    virtual_host = models.ForeignKey(VirtualHost, on_delete=models.CASCADE, related_name="tool_costs")
    position = models.PositiveIntegerField()
    tools = models.JSONField(help_text="Exposed or upstream tool names; globs (* ? [...]) allowed.")
    cost = models.PositiveIntegerField(help_text="Units per call; 0: free.")

    class Meta:
        ordering = ["virtual_host", "position"]
        constraints = [
            models.UniqueConstraint(fields=["virtual_host", "position"], name="tool_cost_unique_position"),
        ]

    def __str__(self) -> str:
        return f"{self.virtual_host}: {', '.join(self.tools)} = {self.cost}"


class Interceptor(models.Model):
    """One interceptor of a virtual host: what inspects each call's request and result there, in
    `position` order (the semantics and each kind's settings: apps/kernel/interceptors,
    docs/interceptors.md). A webhook's signing key is a tenant secret (`secret`), which cannot be
    deleted while a webhook uses it."""

    class Kind(models.TextChoices):
        SECRETS = "secrets", "Secrets"
        PERSONAL_DATA = "personal_data", "Personal data"
        FIELDS = "fields", "Field rules"
        SIZE = "size", "Size"
        INJECTION = "injection", "Injection markers"
        WEBHOOK = "webhook", "Webhook"

    virtual_host = models.ForeignKey(VirtualHost, on_delete=models.CASCADE, related_name="interceptors")
    position = models.PositiveIntegerField()
    name = models.CharField(max_length=64)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    phases = models.JSONField(help_text="request, result or both.")
    methods = models.JSONField(help_text="tools/call, resources/read, prompts/get.")
    targets = models.JSONField(default=list, blank=True, help_text="Globs of tool or prompt names or resource URIs; "
                                                                   "empty: every call.")
    settings = models.JSONField(default=dict, blank=True, help_text="The kind's settings (a webhook's secret is "
                                                                    "`secret`, below).")
    secret = models.ForeignKey(TenantSecret, on_delete=models.PROTECT, null=True, blank=True,
                               related_name="interceptors", help_text="A webhook's signing key.")
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["virtual_host", "position"]
        constraints = [
            models.UniqueConstraint(fields=["virtual_host", "position"], name="interceptor_unique_position"),
            models.UniqueConstraint(fields=["virtual_host", "name"], name="interceptor_unique_name"),
        ]

    def __str__(self) -> str:
        return f"{self.virtual_host}: {self.name} ({self.kind})"
