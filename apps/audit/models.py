from django.contrib.postgres.fields import ArrayField
from django.db import models


class AuditRecord(models.Model):
    """One row per routed call. Append-only: names are copied, not referenced, so a row still tells
    what happened after the key, backend or virtual host it names is gone. The one change a row
    ever sees: a call that created a task (`working`) gets the task's final outcome when the gateway
    sees it end (`apps.audit.writer`).

    In the database the table is partitioned by day of `created_at` (migration 0013; partitions made
    and dropped by `apps.audit.services`), and its primary key is (id, created_at): ids are unique all
    the same (one sequence). PostgreSQL builds no index CONCURRENTLY on a partitioned table: a later
    index is built on each partition first, then on the table (docs/deploy.md, "Audit storage")."""

    class Outcome(models.TextChoices):
        OK = "ok", "ok"
        TOOL_ERROR = "tool_error", "tool error (isError)"
        ERROR = "error", "JSON-RPC error"
        CANCELLED = "cancelled", "cancelled"
        DENIED = "denied", "denied by policy"
        RATE_LIMITED = "rate_limited", "over a rate limit"
        OVER_BUDGET = "over_budget", "over a budget"
        WORKING = "working", "task running"

    class Origin(models.TextChoices):
        MCP = "mcp", "MCP client"
        CONSOLE = "console", "console tool tester"

    created_at = models.DateTimeField(db_index=True)
    tenant_id = models.BigIntegerField()  # leads every index below
    tenant_slug = models.CharField(max_length=64)
    virtual_host = models.CharField(max_length=64)
    principal = models.CharField(max_length=200, help_text="Who called: 'key:<name>' or 'anonymous:<key name>'.")
    api_key_id = models.BigIntegerField(null=True)
    team = models.CharField(
        # In the database, so that instances of the previous release (writing no team) keep writing.
        max_length=64, blank=True, db_default="", help_text="The caller's team (slug) when the call was made.",
    )
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
    task_id = models.CharField(
        max_length=255, blank=True, db_default="",
        help_text="The backend's id of the task the call created, if it created one.",
    )
    task_ended_at = models.DateTimeField(
        null=True, blank=True, help_text="When the gateway saw the call's task end (its outcome is then the task's).",
    )
    cost = models.PositiveIntegerField(
        # In the database, so that instances still running the previous release (writing no cost)
        # keep writing rows while a deployment rolls out.
        db_default=0,
        help_text="Budget units the call cost, charged when it was admitted (also if it then failed); 0 if refused.",
    )
    # Both in the database too, so that instances of the previous release (writing neither) keep writing.
    origin = models.CharField(
        max_length=8, choices=Origin.choices, default=Origin.MCP, db_default=Origin.MCP,
        help_text="Where the call came from: an MCP client, or the console's tool tester.",
    )
    console_user = models.CharField(
        max_length=150, blank=True, default="", db_default="",
        help_text="The console user who ran the call in the tool tester (origin console).",
    )
    interceptions = models.JSONField(
        null=True, blank=True,
        help_text="What the host's interceptors decided, each decision but a built-in's plain pass: interceptor, "
                  "kind, phase, action, findings (types, never values), a webhook's ms (docs/interceptors.md).",
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        # The log's pages read (created_at, id) downwards from a cursor (keyset pagination), for the
        # tenant alone or with one filter: each has an index that answers the first page directly.
        indexes = [
            models.Index(fields=["tenant_id", "-created_at", "-id"], name="audit_tenant_recent"),
            models.Index(fields=["tenant_id", "api_key_id", "-created_at", "-id"], name="audit_tenant_key"),
            models.Index(fields=["tenant_id", "team", "-created_at", "-id"], name="audit_tenant_team"),
            models.Index(fields=["tenant_id", "exposed_name", "-created_at", "-id"], name="audit_tenant_tool"),
            models.Index(fields=["tenant_id", "backend", "-created_at", "-id"], name="audit_tenant_backend"),
            models.Index(fields=["tenant_id", "outcome", "-created_at", "-id"], name="audit_tenant_outcome"),
            # Where a task's end finds the row of the call that created it.
            models.Index(fields=["tenant_id", "task_id"], condition=~models.Q(task_id=""), name="audit_tenant_task"),
        ]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.principal} {self.method} {self.exposed_name} {self.outcome}"


#: Upper bounds (ms) of the latency histogram's buckets, ~19% apart from 0.1 ms to 10 minutes; the
#: last bucket takes everything slower. Percentiles read from it are within one bucket's width.
LATENCY_BOUNDS: tuple[float, ...] = tuple(round(0.1 * 1.19**i, 4) for i in range(92))


class AuditMinute(models.Model):
    """One tenant's calls in one minute, counted by the audit writer as it writes their rows: what
    the dashboard reads (aggregating raw rows over a day took ~1 s at 1M rows). The row with an
    empty `tool` counts every call and holds the latency histogram; one row per tool counts that
    tool's calls (top tools). One table, so that a batch's counts are one statement."""

    tenant_id = models.BigIntegerField()
    tool = models.CharField(max_length=255, blank=True)
    minute = models.DateTimeField()
    calls = models.PositiveIntegerField(default=0)
    errors = models.PositiveIntegerField(default=0, help_text="error and tool_error outcomes.")
    denied = models.PositiveIntegerField(default=0)
    rate_limited = models.PositiveIntegerField(default=0)
    over_budget = models.PositiveIntegerField(default=0)
    latency = ArrayField(
        models.BigIntegerField(), null=True, blank=True,
        help_text="Calls per LATENCY_BOUNDS bucket (one more: slower); on the all-tools row only.",
    )

    class Meta:
        # A window is a range of minutes: both the totals and the top tools read only its rows,
        # however many days are kept.
        constraints = [
            models.UniqueConstraint(fields=["tenant_id", "minute", "tool"], name="audit_minute_unique"),
        ]
        indexes = [
            models.Index(fields=["tenant_id", "minute"], condition=models.Q(tool=""), name="audit_minute_totals"),
        ]
