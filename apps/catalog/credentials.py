"""Egress credentials: how the gateway authenticates to a backend, and the tenant secrets they may
share. Every write goes through these functions; each one checks everything before writing (a
refused credential leaves the stored one as it was) and moves the tenant's configuration version,
so every gateway instance sends the new credential from its next request on.

Secrets are encrypted before they reach the database (`apps.common.secrets`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.db import transaction

from apps.catalog.models import OAUTH_SOURCES, Backend, EgressCredential, EgressIdentity, TenantSecret, name_validator
from apps.catalog.openapi import Credential
from apps.catalog.validators import replica_url_validate
from apps.common.config_version import config_version_bump
from apps.common.egress_headers import header_name_problem
from apps.common.guarded_http import guarded_client
from apps.common.oauth_metadata import MetadataUnavailable, server_metadata
from apps.common.secrets import secret_encrypt
from apps.common.url_guard import url_address_validate
from apps.common.validation_errors import problems_refuse
from apps.kernel.problems import FieldProblem
from apps.tenants.models import Tenant, TokenIssuer

#: Where an MCP backend's credential can go: MCP requests carry it in a header.
MCP_KINDS = ("", "bearer", "api_key_header", "basic")
#: What an OAuth access token can be sent as.
TOKEN_KINDS = ("", "bearer", "api_key_header")
_SECRET_NAME_MAX = 64
_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
#: Headers the gateway writes on MCP requests, or that frame or route them: never a credential's.
_RESERVED = frozenset({
    "host", "content-length", "content-type", "transfer-encoding", "connection", "keep-alive", "te", "trailer",
    "upgrade", "accept", "expect", "mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name",
    "last-event-id", "traceparent", "tracestate", "baggage",
})


def _reserved_header(name: str) -> bool:
    low = name.lower()
    return low in _RESERVED or low.startswith(("mcp-param-", "proxy-"))


@dataclass(frozen=True)
class IdentitySecret:
    """The credential of one caller of a `per_identity` backend: a key (by name), a token subject
    (of `issuer`'s tokens, or of any of the tenant's issuers when it is empty) or a team (by slug)."""

    subject_kind: str
    subject_name: str
    secret: str = field(repr=False)
    issuer: str = ""


@dataclass(frozen=True)
class CredentialFields:
    """A credential as a face hands it over (see `egress_credential_set` for what each field means).
    Values are as given: `egress_credential_check` judges them."""

    kind: object = ""
    name: object = ""
    username: object = ""
    secret: object = field(default="", repr=False)
    source: object = EgressCredential.Source.STATIC
    tenant_secret: object = ""
    identities: Sequence[IdentitySecret] = ()
    token_url: object = ""
    client_id: object = ""
    scope: object = ""
    audience: object = ""
    client_auth: object = EgressCredential.ClientAuth.BASIC
    subject_issuer: object = ""


# The columns' lengths: a longer value is refused with a message, not by the database.
_LENGTHS = (
    ("kind", 32), ("name", EgressCredential._meta.get_field("name").max_length),
    ("username", EgressCredential._meta.get_field("username").max_length), ("secret", 10_000),
    ("source", 32), ("tenant_secret", _SECRET_NAME_MAX), ("token_url", 500),
    ("client_id", EgressCredential._meta.get_field("client_id").max_length), ("scope", 500), ("audience", 500),
    ("client_auth", 32), ("subject_issuer", 500),
)
_OAUTH_FIELDS = ("token_url", "client_id", "scope", "audience")


def egress_credential_check(
    fields: CredentialFields, *, backend_kind: str, allow_private: bool, resolve: bool = True
) -> list[FieldProblem]:
    """What is wrong with a credential for a backend of `backend_kind` (empty: nothing): the one set of
    credential rules the service, the REST API, the console and configuration documents apply, with
    the same words. Whether a named tenant secret exists is the service's to say (it is stored data).
    `resolve`: judge the token endpoint's host name by the addresses it resolves to now."""
    problems: list[FieldProblem] = []
    for name, limit in _LENGTHS:
        value = getattr(fields, name)
        if not isinstance(value, str):
            problems.append(FieldProblem(name, f"{name} must be a string"))
        elif len(value) > limit:
            problems.append(FieldProblem(name, f"{name} must be at most {limit} characters"))
    if problems:
        return problems
    kind, source, name, secret = str(fields.kind), str(fields.source), str(fields.name), str(fields.secret)
    if kind not in EgressCredential.Kind.values:
        problems.append(FieldProblem("kind", f"unknown credential kind {kind!r}"))
    if source not in EgressCredential.Source.values:
        return [*problems, FieldProblem("source", f"unknown credential source {source!r}; use one of "
                                                  f"{', '.join(EgressCredential.Source.values)}")]
    if backend_kind == Backend.Kind.MCP and kind not in MCP_KINDS:
        problems.append(FieldProblem("kind", "an MCP backend takes its credential in a header: use bearer, "
                                             f"api_key_header or basic, not {kind!r}"))
    elif backend_kind == Backend.Kind.MCP and kind == "api_key_header" and _reserved_header(name):
        problems.append(FieldProblem("name", f"the header {name!r} carries the MCP exchange itself; choose another name"))
    elif kind == "api_key_header" and (problem := header_name_problem(name)) is not None:
        problems.append(FieldProblem("name", problem))
    placement = {"kind": kind if kind in EgressCredential.Kind.values else "", "name": name,
                 "username": str(fields.username)}
    if kind.startswith("api_key_") and not name:
        problems.append(FieldProblem("name", f"credential kind {kind!r} needs the header, parameter or cookie name"))
        placement["kind"] = ""  # the value is still judged, as a bearer token's
    if placement_problems := _placement_problems(placement):
        problems += placement_problems
        placement = {"kind": "", "name": "", "username": ""}  # each value is still judged, as a bearer token's
    if source == EgressCredential.Source.STATIC:
        problems += _value_problems("secret", secret, "the secret", placement)
    elif source == EgressCredential.Source.TENANT_SECRET:
        if not fields.tenant_secret:
            problems.append(FieldProblem("tenant_secret", "name the tenant secret to send"))
        if secret:
            problems.append(FieldProblem("secret", "a tenant_secret credential sends the tenant secret, not a secret of its own"))
        # The tenant secret's value was checked when it was set; only where it goes (above) is checked here.
    elif source == EgressCredential.Source.PER_IDENTITY:
        problems += _identities_problems(fields.identities, placement)
        if secret:
            problems += _value_problems("secret", secret, "the default secret", placement)
    elif source == EgressCredential.Source.PER_PERSON:
        problems += _per_person_problems(fields, kind, backend_kind, placement)
    else:
        problems += _oauth_problems(fields, kind, allow_private, resolve)
        problems += _value_problems("secret", secret, "the client secret", placement)
    if source == EgressCredential.Source.TOKEN_EXCHANGE and not fields.subject_issuer:
        problems.append(FieldProblem("subject_issuer", "name the token issuer whose callers' tokens are exchanged "
                                                       "(one of the tenant's issuers)"))
    elif source != EgressCredential.Source.TOKEN_EXCHANGE and fields.subject_issuer:
        problems.append(FieldProblem("subject_issuer", "subject_issuer is only for source token_exchange"))
    if source != EgressCredential.Source.TENANT_SECRET and fields.tenant_secret:
        problems.append(FieldProblem("tenant_secret", "tenant_secret is only for source tenant_secret"))
    if source != EgressCredential.Source.PER_IDENTITY and fields.identities:
        problems.append(FieldProblem("identities", "identities are only for source per_identity"))
    if source not in OAUTH_SOURCES:
        allowed = ("client_id", "scope") if source == EgressCredential.Source.PER_PERSON else ()
        problems += [FieldProblem(name, f"{name} is only for source oauth_client_credentials or token_exchange")
                     for name in _OAUTH_FIELDS if getattr(fields, name) and name not in allowed]
        # (basic is the default, which every face sends)
        if fields.client_auth != EgressCredential.ClientAuth.BASIC and source != EgressCredential.Source.PER_PERSON:
            problems.append(FieldProblem("client_auth", "client_auth is only for source oauth_client_credentials "
                                                        "or token_exchange"))
    return problems


def _oauth_problems(fields: CredentialFields, kind: str, allow_private: bool, resolve: bool) -> list[FieldProblem]:
    problems = []
    if kind not in TOKEN_KINDS:
        problems.append(FieldProblem("kind", f"an OAuth access token is sent as bearer or api_key_header, not {kind!r}"))
    token_url = str(fields.token_url)
    try:
        replica_url_validate(token_url)
        url_address_validate(token_url, allow_private=allow_private, resolve=resolve)
    except ValidationError as exc:
        problems.append(FieldProblem("token_url", f"token endpoint: {exc.messages[0]}"))
    else:
        if urlsplit(token_url).scheme != "https" and urlsplit(token_url).hostname not in _LOOPBACK:
            problems.append(FieldProblem("token_url", "the token endpoint must use https (the client secret goes to "
                                                      "it); plain http is for loopback addresses only"))
    if not fields.client_id:
        problems.append(FieldProblem("client_id", "the client id is empty"))
    if fields.client_auth not in EgressCredential.ClientAuth.values:
        problems.append(FieldProblem("client_auth", f"unknown client authentication {fields.client_auth!r}; use one of "
                                                    f"{', '.join(EgressCredential.ClientAuth.values)}"))
    return problems


def _per_person_problems(
    fields: CredentialFields, kind: str, backend_kind: str, placement: dict[str, str]
) -> list[FieldProblem]:
    """A per-person credential: each person's access token, as a bearer token, to an MCP backend whose
    authorization server the gateway discovers; `client_id` (and `secret`) when an admin registered
    the gateway there, else the gateway registers itself."""
    problems = []
    if backend_kind != Backend.Kind.MCP:
        problems.append(FieldProblem("source", "per_person is for MCP backends (they name their authorization "
                                               "server, RFC 9728)"))
    if kind not in ("", "bearer"):
        problems.append(FieldProblem("kind", f"a person's access token is sent as a bearer token, not {kind!r}"))
    if fields.secret and not fields.client_id:
        problems.append(FieldProblem("secret", "a client secret needs the client id it belongs to"))
    elif fields.secret:
        problems += _value_problems("secret", str(fields.secret), "the client secret", placement)
    if fields.client_auth not in EgressCredential.ClientAuth.values:
        problems.append(FieldProblem("client_auth", f"unknown client authentication {fields.client_auth!r}; use one of "
                                                    f"{', '.join(EgressCredential.ClientAuth.values)}"))
    return problems


def _exchange_endpoint_problem(*, token_url: str, issuer: str, allow_private: bool) -> str | None:
    """Why callers' tokens may not go to `token_url` (None: they may): it must be the issuer's own
    token endpoint — at the issuer's origin, or the one its metadata names. Anywhere else, whoever
    runs it would collect the callers' tokens."""
    def origin(url: str) -> tuple[str, str]:
        parts = urlsplit(url)
        return parts.scheme, parts.netloc.lower()

    if origin(token_url) == origin(issuer):
        return None
    try:
        with guarded_client(allow_private=allow_private, timeout=10.0) as http:
            named = server_metadata(http, issuer).get("token_endpoint")
    except MetadataUnavailable as exc:
        return (f"the token endpoint must be {issuer}'s own: {token_url} is not at its origin, and its metadata "
                f"cannot tell ({exc})")
    if named == token_url:
        return None
    return (f"the token endpoint must be {issuer}'s own: {token_url} is neither at its origin nor the one its "
            f"metadata names ({str(named)[:200]})")


def _placement_problems(placement: dict[str, str]) -> list[FieldProblem]:
    """What is wrong with where a value goes, each at its own field (`name`, `username`): judged with a
    stand-in value, so neither a value's problem is blamed on them nor theirs on every value sent."""
    kind = placement["kind"] or "bearer"
    problems: list[FieldProblem] = []
    for field_name, part in (("name", {"kind": kind, "name": placement["name"]}),
                             ("username", {"kind": "basic" if kind == "basic" else "bearer",
                                           "username": placement["username"]})):
        try:  # the invoker's own rules (no line breaks, no ':' in a basic-auth username, ...)
            Credential(value="stand-in", **part)  # type: ignore[arg-type]
        except ValueError as exc:
            problems.append(FieldProblem(field_name, f"the {field_name}: {exc}"))
    return problems


def _value_problems(field_name: str, value: str, what: str, placement: dict[str, str]) -> list[FieldProblem]:
    if not value:
        return [FieldProblem(field_name, f"{what} is empty")]
    try:  # the invoker's own rules (names for API keys, no line breaks, ...)
        Credential(kind=placement["kind"] or "bearer", value=value, name=placement["name"],
                   username=placement["username"])
    except ValueError as exc:
        return [FieldProblem(field_name, f"{what}: {exc}")]
    return []


def _identities_problems(identities: Sequence[IdentitySecret], placement: dict[str, str]) -> list[FieldProblem]:
    if not identities:
        return [FieldProblem("identities", "list at least one caller's credential")]
    problems: list[FieldProblem] = []
    seen: set[tuple[str, str, str]] = set()
    for identity in identities:
        where = f"{identity.subject_kind}:{identity.subject_name}"
        if identity.issuer:
            where += f" of {identity.issuer}"
        found = ""
        if identity.subject_kind not in EgressIdentity.Subject.values:
            found = f"unknown subject kind {identity.subject_kind!r}; use key, subject or team"
        elif not identity.subject_name or len(identity.subject_name) > 500:
            found = f"{where}: the name must be 1-500 characters"
        elif identity.issuer and identity.subject_kind != EgressIdentity.Subject.SUBJECT:
            found = f"{where}: only token subject entries name an issuer"
        elif len(identity.issuer) > 500:
            found = f"{where}: the issuer must be at most 500 characters"
        elif (identity.subject_kind, identity.issuer, identity.subject_name) in seen:
            found = f"{where} is listed twice"
        if found:
            problems.append(FieldProblem("identities", found))
            continue
        seen.add((identity.subject_kind, identity.issuer, identity.subject_name))
        problems += [FieldProblem("identities", p.message)
                     for p in _value_problems("identities", identity.secret, f"the secret of {where}", placement)]
    return problems


@transaction.atomic
def egress_credential_set(
    *,
    backend: Backend,
    secret: str = "",
    kind: str = "",
    name: str = "",
    username: str = "",
    source: str = EgressCredential.Source.STATIC,
    tenant_secret: str = "",
    identities: Sequence[IdentitySecret] = (),
    token_url: str = "",
    client_id: str = "",
    scope: str = "",
    audience: str = "",
    client_auth: str = EgressCredential.ClientAuth.BASIC,
    subject_issuer: str = "",
) -> EgressCredential:
    """Set (or replace, identities included) how the gateway authenticates to the backend.

    `kind`/`name`/`username` say where the value goes; an empty `kind` follows an OpenAPI spec's
    first supported security scheme, and means bearer for an MCP backend (whose requests can carry
    a credential in a header only). `source` says where the value comes from:
    - `static`: `secret`;
    - `tenant_secret`: the tenant secret named `tenant_secret`;
    - `per_identity`: `identities` (at least one); `secret`, optional, is the default for callers
      without an entry and for the gateway's own requests (listing, probing);
    - `oauth_client_credentials`: an access token from `token_url` for `client_id` and the client
      secret `secret` (`client_auth` says how it is presented), optionally for `scope`/`audience`;
    - `token_exchange`: the caller's access token, if `subject_issuer` (one of the tenant's token
      issuers) issued it, exchanged at `token_url` (RFC 8693) by the same client for a token for
      `audience`/`scope`. Callers with another credential get none: their calls are refused;
    - `per_person`: each person's own access token at the backend's authorization server, which
      they connect on the console's Connected accounts page (apps/connections); `client_id`/`secret`
      when an admin registered the gateway there (else it registers itself), `scope` what it asks for."""
    problems_refuse(egress_credential_check(CredentialFields(
        kind=kind, name=name, username=username, secret=secret, source=source, tenant_secret=tenant_secret,
        identities=identities, token_url=token_url, client_id=client_id, scope=scope, audience=audience,
        client_auth=client_auth, subject_issuer=subject_issuer,
    ), backend_kind=backend.kind, allow_private=backend.tenant.private_networks_allowed))
    shared: TenantSecret | None = None
    if source == EgressCredential.Source.TENANT_SECRET:
        shared = TenantSecret.objects.filter(tenant_id=backend.tenant_id, name=tenant_secret).first()
        if shared is None:
            raise ValidationError({"tenant_secret": f"the tenant has no secret named {tenant_secret!r}"})
    if source == EgressCredential.Source.TOKEN_EXCHANGE and not TokenIssuer.objects.filter(
        tenant_id=backend.tenant_id, issuer=subject_issuer
    ).exists():
        raise ValidationError({"subject_issuer": f"the tenant trusts no token issuer {subject_issuer!r}; add it first "
                                                 "(only its tokens are exchanged)"})
    if source == EgressCredential.Source.TOKEN_EXCHANGE and (problem := _exchange_endpoint_problem(
            token_url=token_url, issuer=subject_issuer, allow_private=backend.tenant.private_networks_allowed)):
        raise ValidationError({"token_url": problem})
    oauth = source in OAUTH_SOURCES
    per_person = source == EgressCredential.Source.PER_PERSON
    credential, _ = EgressCredential.objects.update_or_create(
        backend=backend,
        defaults={
            "kind": kind, "name": name, "username": username, "source": source,
            "secret": secret_encrypt(secret) if secret else "", "tenant_secret": shared,
            "token_url": token_url if oauth else "", "client_id": client_id if oauth or per_person else "",
            "scope": scope if oauth or per_person else "", "audience": audience if oauth else "",
            "client_auth": client_auth if oauth or per_person else EgressCredential.ClientAuth.BASIC,
            "subject_issuer": subject_issuer if source == EgressCredential.Source.TOKEN_EXCHANGE else "",
        },
    )
    credential.identities.all().delete()
    if source == EgressCredential.Source.PER_IDENTITY:
        EgressIdentity.objects.bulk_create(
            EgressIdentity(credential=credential, subject_kind=i.subject_kind, subject_name=i.subject_name,
                           issuer=i.issuer, secret=secret_encrypt(i.secret))
            for i in identities
        )
    config_version_bump(tenant_id=backend.tenant_id)
    return credential


def egress_credential_clear(*, backend: Backend) -> None:
    """Remove the backend's credential (if any): requests go out unauthenticated from then on."""
    EgressCredential.objects.filter(backend=backend).delete()
    config_version_bump(tenant_id=backend.tenant_id)


def tenant_secret_check(*, name: object, value: object) -> list[FieldProblem]:
    """What is wrong with a tenant secret (empty: nothing): the rule the service and configuration
    documents apply, with the same words."""
    if not isinstance(name, str) or not name_validator.regex.fullmatch(name) or len(name) > _SECRET_NAME_MAX:
        return [FieldProblem("name", f"a secret name is 1-{_SECRET_NAME_MAX} letters, digits, '_', '.' and '-', starting with a letter or digit")]
    if not isinstance(value, str):
        return [FieldProblem("value", f"the secret {name!r} must be a string")]
    return _value_problems("value", value, f"the secret {name!r}", {"kind": "", "name": "", "username": ""})


def tenant_secret_set(*, tenant: Tenant, name: str, value: str) -> TenantSecret:
    """Create or replace the tenant secret `name`: every credential using it sends the new value
    from the next request on."""
    problems_refuse(tenant_secret_check(name=name, value=value))
    shared, _ = TenantSecret.objects.update_or_create(
        tenant=tenant, name=name, defaults={"value": secret_encrypt(value)}
    )
    config_version_bump(tenant_id=tenant.pk)
    return shared


def tenant_secret_delete(*, tenant: Tenant, name: str) -> None:
    """Delete the tenant secret `name`; refused while a backend's credential uses it."""
    shared = TenantSecret.objects.filter(tenant=tenant, name=name).first()
    if shared is None:
        raise ValidationError({"name": f"the tenant has no secret named {name!r}"})
    users = sorted(shared.credentials.values_list("backend__name", flat=True))
    if users:
        raise ValidationError({"name": f"the secret {name!r} is used by the credential of {', '.join(users)}; "
                                       "change those first"})
    hooks = sorted(f"{host}/{hook}" for host, hook in shared.interceptors.values_list("virtual_host__slug", "name"))
    if hooks:
        raise ValidationError({"name": f"the secret {name!r} signs the requests of the webhook interceptor "
                                       f"{', '.join(hooks)}; change those first"})
    shared.delete()
    config_version_bump(tenant_id=tenant.pk)
