"""The configuration document as typed, immutable values (what `config_parse` returns).

The document is self-contained: every tenant, team, key and backend that something refers to is
named in it, so it can be validated without a database."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from apps.gateway.pipeline.policy import RuleSpec


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


@dataclass(frozen=True)
class TenantSpec:
    slug: str
    name: str
    teams: tuple[str, ...] = ()
    keys: tuple[KeySpec, ...] = ()


@dataclass(frozen=True)
class CredentialSpec:
    """An OpenAPI backend's egress credential. The secret is written in the file or named by an
    environment variable (`secret_env`), read when the document is applied. `remove`: the file
    says `credential: null`, so the stored credential goes."""

    kind: str = ""
    name: str = ""
    username: str = ""
    secret: str | None = None
    secret_env: str | None = None
    remove: bool = False


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
