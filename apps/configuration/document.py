"""The configuration document as typed, immutable values (what `config_parse` returns).

The document is self-contained: every tenant, team, key and backend that something refers to is
named in it, so it can be validated without a database."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from apps.kernel.curation import ToolRuleSpec
from apps.kernel.interceptors import InterceptorSpec
from apps.kernel.policy import RuleSpec


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a document, at a dotted path such as `tenants[1].keys[0].secret`."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class ConfigInvalid(Exception):
    """The document cannot be applied. Carries every problem found, not just the first."""

    def __init__(self, problems: list[Problem] | tuple[Problem, ...]) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


@dataclass(frozen=True)
class KeySpec:
    name: str
    team: str | None = None
    # None: generate a secret once, on creation, and keep the key's secret as it is afterwards.
    secret: str | None = None
    expires_at: datetime | None = None
    revoked: bool = False
    # None: the file names no scopes, and the key keeps the ones it has.
    scopes: tuple[str, ...] | None = None


@dataclass(frozen=True)
class TenantSpec:
    slug: str
    name: str
    teams: tuple[str, ...] = ()
    keys: tuple[KeySpec, ...] = ()
    plan: str | None = None  # the name of one of the document's plans; None: on no plan
    # Secrets backends' credentials can share (`source: tenant_secret`); None: the file names none
    # and the stored ones stay, also with --prune.
    secrets: tuple[TenantSecretSpec, ...] | None = None
    # Backends etc. at private addresses; None: the deployment's default (GATEWAY_ALLOW_PRIVATE_NETWORKS).
    allow_private_networks: bool | None = None
    # The gateway's authorization server for the tenant's hosts; None: the file says nothing, the
    # stored one stays as it is (also with --prune).
    sign_in: SignInSpec | None = None
    # The OpenID Connect provider people sign in through; None: the file says nothing (the stored one
    # stays, also with --prune); `remove`: `identity_provider: null`.
    identity_provider: IdentityProviderSpec | None = None


@dataclass(frozen=True)
class IdentityProviderSpec:
    """`identity_provider:` of a tenant (docs/identity.md): `client_secret`/`client_secret_env` None
    keeps the stored secret (an export holds none)."""

    issuer: str = ""
    client_id: str = ""
    client_secret: str | None = field(default=None, repr=False)
    client_secret_env: str | None = None
    scope: str = "openid email profile"
    label: str = ""
    role: str = "member"
    remove: bool = False


@dataclass(frozen=True)
class SignInSpec:
    """`sign_in:` of a tenant: `true`/`false`, or `{registration: …, metadata_documents: …}` (on)."""

    enabled: bool
    registration: bool = True
    metadata_documents: bool = True


@dataclass(frozen=True)
class TenantSecretSpec:
    name: str
    secret: str | None = field(default=None, repr=False)
    secret_env: str | None = None


@dataclass(frozen=True)
class IdentitySpec:
    """One caller's credential of a `per_identity` backend credential."""

    subject_kind: str  # key | subject | team
    subject_name: str
    secret: str | None = field(default=None, repr=False)
    secret_env: str | None = None
    issuer: str = ""  # subject entries: the issuer whose tokens it is for ("": any)


@dataclass(frozen=True)
class CredentialSpec:
    """A backend's egress credential (apps/configuration/credentials.py). Secrets are written in the
    file or named by environment variables (`secret_env`), read when the document is applied.
    `remove`: the file says `credential: null`, so the stored credential goes."""

    kind: str = ""
    name: str = ""
    username: str = ""
    secret: str | None = field(default=None, repr=False)
    secret_env: str | None = None
    remove: bool = False
    source: str = "static"
    tenant_secret: str = ""
    identities: tuple[IdentitySpec, ...] = ()
    token_url: str = ""
    client_id: str = ""
    scope: str = ""
    audience: str = ""
    client_auth: str = "client_secret_basic"
    subject_issuer: str = ""


@dataclass(frozen=True)
class BackendSpec:
    tenant: str
    name: str
    kind: str
    transport: str
    urls: tuple[str, ...]
    timeout_seconds: float
    base_url: str = ""
    # OpenAPI: the spec file as written (relative to the configuration file); None leaves it alone.
    spec: str | None = None
    # None leaves the stored credential as it is (exports carry none: they hold no secrets).
    credential: CredentialSpec | None = None
    tool_name_max_length: int = 64
    include_deprecated: bool = False
    # Calls one gateway instance forwards at once; None: the deployment's default.
    max_concurrency: int | None = None
    # OpenAPI: publish the spec even when it removes more than half of the tools served (else held).
    allow_removals: bool = False


@dataclass(frozen=True)
class MountSpec:
    map_key: str
    backend: str


@dataclass(frozen=True)
class AliasSpec:
    alias: str
    map_key: str
    upstream_name: str


@dataclass(frozen=True)
class VirtualHostSpec:
    tenant: str
    slug: str
    mounts: tuple[MountSpec, ...] = ()
    tool_aliases: tuple[AliasSpec, ...] = ()
    allow_anonymous: bool = False
    anonymous_key: str | None = None
    #: auto | off | listed | only; None (not in the document): a new host gets auto, one that
    #: exists keeps its mode. The same for the name (a new host's is `tool_search`).
    tool_search: str | None = None
    tool_search_name: str | None = None
    #: The host's tool curation (`tools`: include/exclude rules; descriptions as (map key, tool, text)).
    tool_rules: tuple[ToolRuleSpec, ...] = ()
    tool_descriptions: tuple[tuple[str, str, str], ...] = ()
    #: The host's interceptors, in order; None (no `interceptors` section): the host keeps its own.
    interceptors: tuple[InterceptorSpec, ...] | None = None


@dataclass(frozen=True)
class PolicySpec:
    """The access policy of one virtual host of the document. Rules are the gateway's own
    `RuleSpec` (tools as a tuple), in the order written, which is the order they are decided in."""

    tenant: str
    virtual_host: str
    default: str = "allow"
    rules: tuple[RuleSpec, ...] = ()


@dataclass(frozen=True)
class RateLimitSpec:
    """At most `limit` routed calls per `window_seconds` for one key (`scope` "key", `name` the
    key's name) or one team (`scope` "team", `name` the team's slug) of the tenant."""

    tenant: str
    scope: str
    name: str
    limit: int
    window_seconds: int


@dataclass(frozen=True)
class BudgetSpec:
    """At most `daily` cost units per UTC day and `monthly` per UTC month (None: no cap for that
    period; at least one is set) for one key (`scope` "key") or one team (`scope` "team")."""

    tenant: str
    scope: str
    name: str
    daily: int | None
    monthly: int | None


@dataclass(frozen=True)
class ToolCostEntrySpec:
    """What one call of the tools `tools` names costs on one virtual host. A host's entries are
    decided in the order the document lists them."""

    tenant: str
    virtual_host: str
    tools: tuple[str, ...]
    cost: int


@dataclass(frozen=True)
class PlanSpec:
    """A plan of the platform: caps every key's and team's budget of the tenants on it, and says
    whether those tenants may edit their rate limits, budgets and tool costs."""

    name: str
    daily: int | None = None
    monthly: int | None = None
    limits_editable: bool = True


@dataclass(frozen=True)
class TokenIssuerSpec:
    """An authorization server whose JWT access tokens the tenant accepts: tokens whose `iss` is
    `issuer`, for `audience`, signed by a key from `jwks_url` or the PEM `public_key` (one of the
    two is set, the other is "") with one of `algorithms`."""

    tenant: str
    issuer: str
    audience: str
    jwks_url: str
    public_key: str
    algorithms: tuple[str, ...]
    team_claim: str
    subject_claim: str


@dataclass(frozen=True)
class ConfigDocument:
    tenants: tuple[TenantSpec, ...] = ()
    backends: tuple[BackendSpec, ...] = ()
    virtual_hosts: tuple[VirtualHostSpec, ...] = ()
    policies: tuple[PolicySpec, ...] = ()
    rate_limits: tuple[RateLimitSpec, ...] = ()
    token_issuers: tuple[TokenIssuerSpec, ...] = ()
    plans: tuple[PlanSpec, ...] = ()
    budgets: tuple[BudgetSpec, ...] = ()
    tool_costs: tuple[ToolCostEntrySpec, ...] = ()
