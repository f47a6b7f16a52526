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

from apps.catalog.models import Backend, EgressCredential, EgressIdentity, TenantSecret
from apps.catalog.openapi import Credential
from apps.catalog.validators import egress_url_validate
from apps.common.config_version import config_version_bump
from apps.common.egress_headers import header_name_problem
from apps.common.secrets import secret_encrypt
from apps.tenants.models import Tenant

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


def _check_value(value: str, what: str, *, kind: str = "bearer", name: str = "", username: str = "") -> None:
    if not value:
        raise ValidationError({"secret": f"{what} is empty"})
    try:  # the invoker's own rules (names for API keys, no line breaks, ...)
        Credential(kind=kind or "bearer", value=value, name=name, username=username)
    except ValueError as exc:
        raise ValidationError({"secret": f"{what}: {exc}"}) from None


def _check_identities(identities: Sequence[IdentitySecret], **placement: str) -> None:
    seen: set[tuple[str, str, str]] = set()
    for identity in identities:
        where = f"{identity.subject_kind}:{identity.subject_name}"
        if identity.issuer:
            where += f" of {identity.issuer}"
        if identity.subject_kind not in EgressIdentity.Subject.values:
            raise ValidationError({"identities": f"unknown subject kind {identity.subject_kind!r}; use key, subject or team"})
        if not identity.subject_name or len(identity.subject_name) > 500:
            raise ValidationError({"identities": f"{where}: the name must be 1-500 characters"})
        if identity.issuer and identity.subject_kind != EgressIdentity.Subject.SUBJECT:
            raise ValidationError({"identities": f"{where}: only token subject entries name an issuer"})
        if len(identity.issuer) > 500:
            raise ValidationError({"identities": f"{where}: the issuer must be at most 500 characters"})
        if (identity.subject_kind, identity.issuer, identity.subject_name) in seen:
            raise ValidationError({"identities": f"{where} is listed twice"})
        seen.add((identity.subject_kind, identity.issuer, identity.subject_name))
        _check_value(identity.secret, f"the secret of {where}", **placement)


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
      secret `secret` (`client_auth` says how it is presented), optionally for `scope`/`audience`."""
    if kind not in EgressCredential.Kind.values:
        raise ValidationError({"kind": f"unknown credential kind {kind!r}"})
    if source not in EgressCredential.Source.values:
        raise ValidationError({"source": f"unknown credential source {source!r}; use one of "
                                         f"{', '.join(EgressCredential.Source.values)}"})
    if backend.kind == Backend.Kind.MCP and kind not in MCP_KINDS:
        raise ValidationError({"kind": f"an MCP backend takes its credential in a header: use bearer, "
                                       f"api_key_header or basic, not {kind!r}"})
    if backend.kind == Backend.Kind.MCP and kind == "api_key_header" and _reserved_header(name):
        raise ValidationError({"name": f"the header {name!r} carries the MCP exchange itself; choose another name"})
    if kind == "api_key_header" and (problem := header_name_problem(name)) is not None:
        raise ValidationError({"name": problem})
    placement = {"kind": kind, "name": name, "username": username}
    shared: TenantSecret | None = None
    if source == EgressCredential.Source.STATIC:
        _check_value(secret, "the secret", **placement)
    elif source == EgressCredential.Source.TENANT_SECRET:
        shared = TenantSecret.objects.filter(tenant_id=backend.tenant_id, name=tenant_secret).first()
        if shared is None:
            raise ValidationError({"tenant_secret": f"the tenant has no secret named {tenant_secret!r}"})
        secret = ""
        # Its value was checked when the tenant secret was set; only where it goes is checked here.
        _check_value("stand-in", "the placement", **placement)
    elif source == EgressCredential.Source.PER_IDENTITY:
        if not identities:
            raise ValidationError({"identities": "list at least one caller's credential"})
        _check_identities(identities, **placement)
        if secret:
            _check_value(secret, "the default secret", **placement)
    else:
        if kind not in TOKEN_KINDS:
            raise ValidationError({"kind": f"an OAuth access token is sent as bearer or api_key_header, not {kind!r}"})
        try:
            egress_url_validate(token_url, allow_private=backend.tenant.private_networks_allowed)
        except ValidationError as exc:
            raise ValidationError({"token_url": f"token endpoint: {exc.messages[0]}"}) from None
        if urlsplit(token_url).scheme != "https" and urlsplit(token_url).hostname not in _LOOPBACK:
            raise ValidationError({"token_url": "the token endpoint must use https (the client secret goes to it); "
                                                "plain http is for loopback addresses only"})
        if not client_id:
            raise ValidationError({"client_id": "the client id is empty"})
        if client_auth not in EgressCredential.ClientAuth.values:
            raise ValidationError({"client_auth": f"unknown client authentication {client_auth!r}"})
        _check_value(secret, "the client secret", **placement)
    oauth = source == EgressCredential.Source.OAUTH
    credential, _ = EgressCredential.objects.update_or_create(
        backend=backend,
        defaults={
            "kind": kind, "name": name, "username": username, "source": source,
            "secret": secret_encrypt(secret) if secret else "", "tenant_secret": shared,
            "token_url": token_url if oauth else "", "client_id": client_id if oauth else "",
            "scope": scope if oauth else "", "audience": audience if oauth else "",
            "client_auth": client_auth if oauth else EgressCredential.ClientAuth.BASIC,
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


def tenant_secret_set(*, tenant: Tenant, name: str, value: str) -> TenantSecret:
    """Create or replace the tenant secret `name`: every credential using it sends the new value
    from the next request on."""
    if not name or len(name) > _SECRET_NAME_MAX:
        raise ValidationError({"name": f"a secret name is 1-{_SECRET_NAME_MAX} characters"})
    TenantSecret(tenant=tenant, name=name, value="x").clean_fields(exclude=["tenant", "value"])
    _check_value(value, f"the secret {name!r}")
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
    shared.delete()
    config_version_bump(tenant_id=tenant.pk)
