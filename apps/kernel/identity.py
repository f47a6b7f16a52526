"""Who calls, and what binds their calls: the caller (`Principal`) with its rate limits and budgets, and
the issuers whose access tokens a tenant accepts."""

from __future__ import annotations

from dataclasses import dataclass, field

#: Key names starting with this are the console's test identities (`console:<username>`, the tool
#: tester's own caller): no API key may take one, so access rules naming one mean only that user.
CONSOLE_KEY_PREFIX = "console:"

@dataclass(frozen=True, slots=True)
class Limit:
    """At most `limit` routed calls per `window_seconds` for one key or one team (`scope`)."""

    tenant_id: int
    scope: str  # key | team
    name: str
    limit: int
    window_seconds: int


@dataclass(frozen=True, slots=True)
class Budget:
    """Cost units one key, team or token subject (`scope`) may spend per UTC calendar day and per UTC
    calendar month; None: no cap for that period. The caps are the effective ones, already clamped
    to the tenant's plan; `daily_plan` / `monthly_plan` name the plan when its cap is the one in
    force (for the refusal's message)."""

    tenant_id: int
    scope: str  # key | team | token
    name: str
    daily: int | None
    monthly: int | None
    daily_plan: str = ""
    monthly_plan: str = ""


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling. `anonymous` callers act as the configured key of the virtual host. `limits`:
    the rate limits that apply to its calls (its key's, its team's); `budgets` likewise."""

    tenant_id: int
    tenant_slug: str
    key_id: int
    key_name: str
    team: str | None
    anonymous: bool = False
    limits: tuple[Limit, ...] = field(default=(), compare=False)
    #: For a JWT access token: its issuer (`key_name` is then the token's subject, `key_id` a
    #: stable number for that issuer and subject). None for API keys.
    issuer: str | None = None
    scopes: tuple[str, ...] = ()
    budgets: tuple[Budget, ...] = field(default=(), compare=False)
    #: The console user who made the call with the console's tool tester, as this principal (a key
    #: they chose, or their own test identity); "" for every call of an MCP client. Read only by
    #: the audit row, so that an MCP client's call pays nothing for it.
    console_user: str = field(default="", compare=False)
    #: For a JWT access token of one of the tenant's issuers: the token itself, which a
    #: `token_exchange` egress credential exchanges at that issuer (docs/identity.md). Never shown:
    #: not in repr, logs, audit rows or metrics.
    token: str = field(default="", compare=False, repr=False)
    #: The person calling (a console username) when the call is a person's: a token of the gateway's
    #: own authorization server, the console's tool tester, or a key bound to them. Their connected
    #: accounts reach `per_person` backends (docs/identity.md, "Connected accounts").
    person: str = field(default="", compare=False)

    @property
    def label(self) -> str:
        if self.issuer is not None:
            return f"token:{self.key_name}@{self.issuer}"
        return f"{'anonymous' if self.anonymous else 'key'}:{self.key_name}"


@dataclass(frozen=True, slots=True)
class TokenIssuerView:
    """An authorization server whose JWT access tokens a tenant accepts (`public_key`: PEM, or '' to
    use `jwks_url`)."""

    issuer: str
    audience: str
    jwks_url: str
    public_key: str
    algorithms: tuple[str, ...]
    team_claim: str
    subject_claim: str
    #: Whether `jwks_url` may be at a private address (the tenant's setting).
    allow_private: bool = False


@dataclass(frozen=True, slots=True)
class OwnIssuerView:
    """The tenant's own authorization server at the gateway (docs/identity.md, "Signing in people"):
    its tokens' key, and the grants revoked within an access token's lifetime (their tokens are
    refused at once). Its issuer and each token's audience are URLs at the origin a request came to."""

    public_key: str  # PEM
    revoked_grants: frozenset[str] = frozenset()

    def issuer_for(self, *, origin: str, tenant: str, vhost: str) -> TokenIssuerView:
        """As an issuer of tokens for the host `vhost`: `iss` is `<origin>/oauth/<tenant>`, `aud`
        the host's MCP URL at that origin (RFC 8707: a token for one host is refused on another)."""
        return TokenIssuerView(
            issuer=f"{origin}/oauth/{tenant}", audience=f"{origin}/mcp/{tenant}/{vhost}", jwks_url="",
            public_key=self.public_key, algorithms=("ES256",), team_claim="team", subject_claim="sub",
        )


class InvalidToken(Exception):
    """A bearer token that is not a valid access token for the tenant; the message says why."""
