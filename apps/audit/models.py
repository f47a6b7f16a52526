from django.db import models


class AuditRecord(models.Model):
    """One row per routed call. Append-only: names are copied, not referenced, so a row still tells
    what happened after the key, backend or virtual host it names is gone."""

    class Outcome(models.TextChoices):
        OK = "ok", "ok"
        TOOL_ERROR = "tool_error", "tool error (isError)"
        ERROR = "error", "JSON-RPC error"
        CANCELLED = "cancelled", "cancelled"
        DENIED = "denied", "denied by policy"
        RATE_LIMITED = "rate_limited", "over a rate limit"
        OVER_BUDGET = "over_budget", "over a budget"

    created_at = models.DateTimeField(db_index=True)
    tenant_id = models.BigIntegerField(db_index=True)
    tenant_slug = models.CharField(max_length=64)
    virtual_host = models.CharField(max_length=64)
    principal = models.CharField(max_length=200, help_text="Who called: 'key:<name>' or 'anonymous:<key name>'.")
    api_key_id = models.BigIntegerField(null=True)
    backend = models.CharField(max_length=64, blank=True)
    backend_kind = models.CharField(max_length=16, default="mcp", help_text="mcp or openapi.")
    method = models.CharField(max_length=64)
    exposed_name = models.CharField(max_length=255, blank=True)
    upstream_name = models.CharField(max_length=255, blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    error_code = models.IntegerField(null=True)
    latency_ms = models.FloatField()
    bytes_in = models.PositiveIntegerField()
    bytes_out = models.PositiveIntegerField()
    session_id = models.CharField(max_length=200, blank=True)
    trace_id = models.CharField(max_length=32, blank=True)
    rule = models.CharField(max_length=64, blank=True, help_text="The access rule that decided, if one did.")
    arguments = models.JSONField(
        null=True, blank=True,
        help_text="Per the tenant's setting: null (off), each argument's keyed hash (hash), or as sent (full).",
    )
    limit_state = models.CharField(
        max_length=16, blank=True,
        help_text=(
            "Rate limits and budgets: empty (none apply), ok, limited, or unchecked (Redis unreachable, fail mode "
            "applied)."
        ),
    )
    cost = models.PositiveIntegerField(
        # In the database, so that instances still running the previous release (writing no cost)
        # keep writing rows while a deployment rolls out.
        db_default=0,
        help_text="Budget units the call cost, charged when it was admitted (also if it then failed); 0 if refused.",
    )

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["tenant_id", "-created_at"], name="audit_tenant_recent")]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.principal} {self.method} {self.exposed_name} {self.outcome}"
