from django.core.validators import RegexValidator
from django.db import models

from apps.common.models import TimeStampedModel
from apps.tenants.models import ApiKey, Tenant, slug_validator

name_validator = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
    "Use 1-64 letters, digits, '_', '.' and '-', starting with a letter or digit.",
)
map_key_validator = RegexValidator(
    r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,30}[A-Za-z0-9])?$",
    "Use 1-32 letters, digits, '_', '.' and '-', starting and ending with a letter or digit.",
)
tool_name_validator = RegexValidator(
    r"^[A-Za-z0-9_.-]{1,128}$", "Tool names are 1-128 characters of A-Z a-z 0-9 _ - ."
)


class Backend(TimeStampedModel):
    class Kind(models.TextChoices):
        MCP = "mcp", "MCP server"

    class Transport(models.TextChoices):
        STREAMABLE_HTTP = "streamable-http", "Streamable HTTP"
        SSE = "sse", "HTTP+SSE (2024-11-05)"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="backends")
    name = models.CharField(max_length=64, validators=[name_validator])
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.MCP)
    transport = models.CharField(max_length=32, choices=Transport.choices, default=Transport.STREAMABLE_HTTP)
    timeout_seconds = models.FloatField(default=60.0)

    class Meta:
        ordering = ["tenant__slug", "name"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="backend_unique_name_per_tenant")]

    def __str__(self) -> str:
        return f"{self.tenant.slug}/{self.name}"


class BackendReplica(models.Model):
    backend = models.ForeignKey(Backend, on_delete=models.CASCADE, related_name="replicas")
    url = models.URLField(max_length=500)
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["backend", "position"]
        constraints = [models.UniqueConstraint(fields=["backend", "url"], name="replica_unique_url_per_backend")]

    def __str__(self) -> str:
        return self.url


class VirtualHost(TimeStampedModel):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="virtual_hosts")
    slug = models.CharField(max_length=64, validators=[slug_validator])
    allow_anonymous = models.BooleanField(
        default=False,
        help_text="Serve callers without credentials, acting as the anonymous key (for the conformance suite).",
    )
    anonymous_key = models.ForeignKey(
        ApiKey, on_delete=models.PROTECT, null=True, blank=True, related_name="+",
        help_text="The key anonymous callers act as: its policy, limits and audit apply.",
    )

    class Meta:
        ordering = ["tenant__slug", "slug"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "slug"], name="vhost_unique_slug_per_tenant"),
            models.CheckConstraint(
                condition=models.Q(allow_anonymous=False) | models.Q(anonymous_key__isnull=False),
                name="vhost_anonymous_needs_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tenant.slug}/{self.slug}"


class VirtualHostBackend(models.Model):
    virtual_host = models.ForeignKey(VirtualHost, on_delete=models.CASCADE, related_name="mounts")
    map_key = models.CharField(max_length=32, validators=[map_key_validator])
    backend = models.ForeignKey(Backend, on_delete=models.PROTECT, related_name="mounts")

    class Meta:
        ordering = ["virtual_host", "map_key"]
        constraints = [
            models.UniqueConstraint(fields=["virtual_host", "map_key"], name="mount_unique_key_per_vhost")
        ]

    def __str__(self) -> str:
        return f"{self.virtual_host}:{self.map_key}"


class ToolAlias(models.Model):
    """An exposed tool name routed to `map_key` / `upstream_name`, exactly as written."""

    virtual_host = models.ForeignKey(VirtualHost, on_delete=models.CASCADE, related_name="tool_aliases")
    alias = models.CharField(max_length=128, validators=[tool_name_validator])
    map_key = models.CharField(max_length=32, validators=[map_key_validator])
    upstream_name = models.CharField(max_length=128)

    class Meta:
        ordering = ["virtual_host", "alias"]
        constraints = [models.UniqueConstraint(fields=["virtual_host", "alias"], name="alias_unique_per_vhost")]

    def __str__(self) -> str:
        return f"{self.alias} -> {self.map_key}:{self.upstream_name}"
