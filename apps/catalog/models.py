from django.contrib.postgres.indexes import GinIndex
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Value

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
        OPENAPI = "openapi", "REST service (OpenAPI)"

    class Transport(models.TextChoices):
        STREAMABLE_HTTP = "streamable-http", "Streamable HTTP"
        SSE = "sse", "HTTP+SSE (2024-11-05)"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="backends")
    name = models.CharField(max_length=64, validators=[name_validator])
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.MCP)
    transport = models.CharField(max_length=32, choices=Transport.choices, default=Transport.STREAMABLE_HTTP)
    timeout_seconds = models.FloatField(default=60.0)
    max_concurrency = models.PositiveIntegerField(
        null=True, blank=True,
        validators=[MinValueValidator(1, "max_concurrency must be at least 1 (empty: the deployment's default).")],
        help_text="Most calls one gateway instance forwards to this backend at once (over all its replicas); "
                  "more wait their turn briefly, then fail. Empty: the deployment's default.",
    )
    base_url = models.CharField(
        max_length=500, blank=True,
        help_text="OpenAPI backends: where the service is reached; overrides the spec's servers.",
    )
    active_spec = models.ForeignKey(
        "SpecVersion", on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
        help_text="OpenAPI backends: the spec version whose tools are served.",
    )
    tool_name_max_length = models.PositiveSmallIntegerField(
        default=64, validators=[MinValueValidator(1), MaxValueValidator(128)],
        help_text="OpenAPI backends: tool names longer than this are cut (with a stable hash suffix).",
    )
    include_deprecated = models.BooleanField(
        default=False, help_text="OpenAPI backends: turn deprecated operations into tools too.",
    )

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

    class ToolSearch(models.TextChoices):
        AUTO = "auto", "Automatic (listed alone on a host with many tools, off on a small one)"
        OFF = "off", "Off"
        LISTED = "listed", "Listed with the other tools"
        ONLY = "only", "Listed alone (the other tools stay callable by name)"

    tool_search = models.CharField(
        max_length=8, choices=ToolSearch.choices, default=ToolSearch.AUTO,
        help_text="The gateway's own tool that finds the tools for a task among this host's.",
    )
    tool_search_name = models.CharField(
        max_length=128, default="tool_search", validators=[tool_name_validator],
        help_text="The name tool_search is listed and called by.",
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


class ToolRule(models.Model):
    """One rule of a virtual host's tool curation: include or exclude the tools of the backend under
    `map_key` (empty: of every mounted backend) that `pattern` matches (`apps.kernel.curation`)."""

    class Action(models.TextChoices):
        INCLUDE = "include", "Include only"
        EXCLUDE = "exclude", "Exclude"

    class Match(models.TextChoices):
        NAME = "name", "Name"
        GLOB = "glob", "Glob"
        TAG = "tag", "Tag"

    virtual_host = models.ForeignKey(VirtualHost, on_delete=models.CASCADE, related_name="tool_rules")
    action = models.CharField(max_length=8, choices=Action.choices)
    match = models.CharField(max_length=8, choices=Match.choices)
    pattern = models.CharField(max_length=200)
    map_key = models.CharField(max_length=32, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["virtual_host", "action", "map_key", "match", "pattern"]
        constraints = [
            models.UniqueConstraint(fields=["virtual_host", "action", "map_key", "match", "pattern"],
                                    name="tool_rule_unique_per_vhost"),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.match}:{self.pattern}" + (f" of {self.map_key}" if self.map_key else "")


class ToolOverride(models.Model):
    """What a virtual host shows of one tool instead of what its backend says: its description.
    (Its exposed name is changed with a `ToolAlias`.)"""

    virtual_host = models.ForeignKey(VirtualHost, on_delete=models.CASCADE, related_name="tool_overrides")
    map_key = models.CharField(max_length=32, validators=[map_key_validator])
    upstream_name = models.CharField(max_length=128)
    description = models.TextField()

    class Meta:
        ordering = ["virtual_host", "map_key", "upstream_name"]
        constraints = [
            models.UniqueConstraint(fields=["virtual_host", "map_key", "upstream_name"], name="tool_override_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.map_key}:{self.upstream_name}"


class TenantSecret(TimeStampedModel):
    """A secret a tenant stores once and several backends' credentials use (source `tenant_secret`):
    rotating it rotates it everywhere. `value` holds a Fernet token, never the plaintext."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="secrets")
    name = models.CharField(max_length=64, validators=[name_validator])
    value = models.TextField(help_text="Encrypted.")

    class Meta:
        ordering = ["tenant__slug", "name"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="tenant_secret_unique_name")]

    def __str__(self) -> str:
        return f"{self.tenant.slug}/{self.name}"


class EgressCredential(TimeStampedModel):
    """How the gateway authenticates to a backend. `kind` says where the credential goes (an empty
    kind takes kind and name from an OpenAPI spec's first supported security scheme; bearer for MCP
    backends); `source` where its value comes from. Secrets are Fernet tokens (apps.common.secrets),
    never plaintext. Inbound credentials are never forwarded: a backend without one gets none."""

    class Kind(models.TextChoices):
        FROM_SPEC = "", "as the spec's security scheme says"
        API_KEY_HEADER = "api_key_header", "API key in a header"
        API_KEY_QUERY = "api_key_query", "API key in the query string"
        API_KEY_COOKIE = "api_key_cookie", "API key in a cookie"
        BEARER = "bearer", "Bearer token"
        BASIC = "basic", "HTTP basic"

    class Source(models.TextChoices):
        STATIC = "static", "A secret of this backend"
        TENANT_SECRET = "tenant_secret", "A secret of the tenant"
        PER_IDENTITY = "per_identity", "One secret per caller (key, token subject or team)"
        OAUTH = "oauth_client_credentials", "OAuth 2.0 client credentials"
        TOKEN_EXCHANGE = "token_exchange", "The caller's token, exchanged (OAuth 2.0 token exchange)"
        PER_PERSON = "per_person", "Each person's own account, which they connect"

    class ClientAuth(models.TextChoices):
        BASIC = "client_secret_basic", "HTTP basic"
        POST = "client_secret_post", "In the form body"

    backend = models.OneToOneField(Backend, on_delete=models.CASCADE, related_name="credential")
    kind = models.CharField(max_length=16, choices=Kind.choices, blank=True)
    name = models.CharField(max_length=128, blank=True, help_text="Header, query parameter or cookie name.")
    username = models.CharField(max_length=128, blank=True)
    source = models.CharField(max_length=32, choices=Source.choices, default=Source.STATIC)
    secret = models.TextField(
        blank=True,
        help_text="Encrypted. static: the secret; per_identity: the default (for unmapped callers and the "
        "gateway's own requests), may be empty; oauth and token_exchange: the client secret.",
    )
    tenant_secret = models.ForeignKey(
        TenantSecret, on_delete=models.PROTECT, null=True, blank=True, related_name="credentials",
    )
    token_url = models.CharField(max_length=500, blank=True, help_text="OAuth: the token endpoint.")
    client_id = models.CharField(max_length=200, blank=True)
    scope = models.CharField(max_length=500, blank=True)
    audience = models.CharField(max_length=500, blank=True)
    client_auth = models.CharField(max_length=24, choices=ClientAuth.choices, default=ClientAuth.BASIC)
    subject_issuer = models.CharField(
        max_length=500, blank=True,
        help_text="token_exchange: the tenant's token issuer whose callers' tokens are exchanged (no other "
        "caller's token is ever sent to the token endpoint).",
    )

    def __str__(self) -> str:
        return f"{self.backend}: {self.kind or 'from spec'} ({self.source})"


#: The sources whose value is an access token the gateway asks a token endpoint for.
OAUTH_SOURCES = frozenset({EgressCredential.Source.OAUTH, EgressCredential.Source.TOKEN_EXCHANGE})


class EgressIdentity(models.Model):
    """One caller's credential for a `per_identity` backend credential. A key's entry wins over its
    token subject's, which wins over its team's."""

    class Subject(models.TextChoices):
        KEY = "key", "API key"
        SUBJECT = "subject", "Token subject"
        TEAM = "team", "Team"

    credential = models.ForeignKey(EgressCredential, on_delete=models.CASCADE, related_name="identities")
    subject_kind = models.CharField(max_length=8, choices=Subject.choices)
    subject_name = models.CharField(max_length=500)
    issuer = models.CharField(
        max_length=500, blank=True,
        help_text="Token subjects only: the issuer whose tokens the entry is for; empty: any of the tenant's.",
    )
    secret = models.TextField(help_text="Encrypted.")

    class Meta:
        ordering = ["credential", "subject_kind", "issuer", "subject_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["credential", "subject_kind", "issuer", "subject_name"], name="egress_identity_unique"
            ),
        ]

    def __str__(self) -> str:
        issuer = f"@{self.issuer}" if self.issuer else ""
        return f"{self.subject_kind}:{self.subject_name}{issuer}"


class SpecVersion(models.Model):
    """One uploaded OpenAPI document of a backend and what compiling it gave. Immutable once
    `ready` or `failed`; `held` (compiled, not published: it would remove too many tools) until it
    is published anyway. The backend serves the tools of its `active_spec`."""

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        COMPILING = "compiling", "compiling"
        READY = "ready", "ready"
        HELD = "held", "held"
        FAILED = "failed", "failed"

    backend = models.ForeignKey(Backend, on_delete=models.CASCADE, related_name="spec_versions")
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    filename = models.CharField(max_length=255, blank=True)
    document = models.BinaryField()
    sha256 = models.CharField(max_length=64)
    size = models.PositiveIntegerField()
    uploaded_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True, help_text="When a worker claimed it for compiling.")
    compiled_at = models.DateTimeField(null=True, blank=True)
    title = models.CharField(max_length=255, blank=True)
    api_version = models.CharField(max_length=64, blank=True)
    openapi_version = models.CharField(max_length=8, blank=True, help_text="2.0, 3.0 or 3.1")
    tool_count = models.PositiveIntegerField(default=0)
    errors = models.JSONField(default=list, blank=True, help_text="[{pointer, message}]")
    warnings = models.JSONField(default=list, blank=True, help_text="[{pointer, message}]")
    changes = models.JSONField(default=dict, blank=True, help_text="{added, removed, changed}: tool names")
    security_schemes = models.JSONField(default=list, blank=True)
    allow_removals = models.BooleanField(
        default=False, db_default=False, help_text="Published even when it removes more than half of the tools served (confirmed).")
    restores = models.PositiveIntegerField(
        null=True, blank=True, help_text="The number of the earlier version whose document this one restores (a rollback).")

    class Meta:
        ordering = ["backend", "-number"]
        constraints = [models.UniqueConstraint(fields=["backend", "number"], name="spec_unique_number_per_backend")]

    def __str__(self) -> str:
        return f"{self.backend} v{self.number} ({self.status})"


class Tool(models.Model):
    """A tool compiled from the active spec version of an OpenAPI backend."""

    backend = models.ForeignKey(Backend, on_delete=models.CASCADE, related_name="tools")
    spec_version = models.ForeignKey(SpecVersion, on_delete=models.CASCADE, related_name="tools")
    name = models.CharField(max_length=128)
    description = models.TextField(blank=True)
    input_schema = models.JSONField()
    output_schema = models.JSONField(null=True, blank=True)
    annotations = models.JSONField(default=dict, blank=True)
    binding = models.JSONField()
    operation_id = models.CharField(max_length=255, blank=True)
    tags = models.JSONField(
        # A database default too: an instance of the previous release inserting tool rows (COPY) during a
        # rolling deploy names no tags.
        default=list, db_default=Value([], output_field=models.JSONField()), blank=True,
        help_text="The operation's tags in the spec.",
    )
    pointer = models.CharField(max_length=1000, blank=True)
    fingerprint = models.CharField(max_length=32, help_text="Changes when anything a caller sees changes.")

    class Meta:
        ordering = ["backend", "name"]
        constraints = [models.UniqueConstraint(fields=["spec_version", "name"], name="tool_unique_name_per_spec")]
        # A host's curation by tag asks for the tools carrying a tag (`tags @> '["x"]'`) when snapshots load.
        indexes = [GinIndex(fields=["tags"], opclasses=["jsonb_path_ops"], name="tool_tags")]

    def __str__(self) -> str:
        return f"{self.backend}:{self.name}"
