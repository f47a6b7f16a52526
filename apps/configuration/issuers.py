"""The `token_issuers` section of the configuration document: checking it (pure, like `validation`),
bringing a tenant's stored token issuers in line with it (for `reconcile`), and exporting them.

How tokens are verified is the gateway's (docs/identity.md); here issuers are only stored, through
apps/tenants/services.py, whose rules the checks below repeat so that a document that validates
never fails on an issuer when it is applied."""

from __future__ import annotations

import dataclasses
from typing import Any

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from apps.configuration.document import TenantSpec, TokenIssuerSpec
from apps.configuration.fields import FieldChecks
from apps.configuration.reports import Action, Change
from apps.tenants.models import Tenant, TokenIssuer
from apps.tenants.selectors import token_issuer_list
from apps.tenants.services import (
    ALGORITHMS,
    key_algorithms_problem,
    public_key_algorithms,
    token_issuer_delete,
    token_issuer_set,
)

# The service's defaults: an entry that leaves these out gets them, and an export leaves them out.
DEFAULT_TEAM_CLAIM = "team"
DEFAULT_SUBJECT_CLAIM = "sub"
_FIELDS = ("tenant", "issuer", "audience", "jwks_url", "public_key", "algorithms", "team_claim", "subject_claim")
_REQUIRED = ("tenant", "issuer", "audience")
# The model's column lengths: anything longer would pass the check and then fail when written.
_TEXT_MAX_LENGTH = 500
_CLAIM_MAX_LENGTH = 100
# A PEM public key is short (an RSA 4096-bit one is about 800 characters); anything far longer is
# some other file pasted by mistake.
_PUBLIC_KEY_MAX_LENGTH = 10_000


# --- validation ----------------------------------------------------------------------------------
def token_issuers_check(
    checks: FieldChecks, raw: Any, *, tenants: dict[str, TenantSpec]
) -> tuple[TokenIssuerSpec, ...]:
    """The document's token issuers; problems are recorded on `checks` at their paths."""
    issuers: dict[tuple[str, str], TokenIssuerSpec] = {}
    for i, item in enumerate(checks.items(raw, "token_issuers")):
        path = f"token_issuers[{i}]"
        fields = checks.mapping(item, path, fields=_FIELDS, required=_REQUIRED)
        if fields is None:
            continue
        tenant = _text(checks, fields, "tenant", path, max_length=64)
        if tenant and tenant not in tenants:
            checks.add(f"{path}.tenant", f"unknown tenant {tenant!r} (add it under tenants)")
            tenant = ""
        issuer = _text(checks, fields, "issuer", path, max_length=_TEXT_MAX_LENGTH)
        audience = _text(checks, fields, "audience", path, max_length=_TEXT_MAX_LENGTH)
        jwks_url, public_key = _key_source(checks, fields, path)
        algorithms = ALGORITHMS
        if "algorithms" in fields:
            algorithms = _algorithms(checks, fields["algorithms"], f"{path}.algorithms")
        if public_key and algorithms:
            _check_key_type(checks, public_key, algorithms, f"{path}.public_key")
        team_claim = _text(checks, fields, "team_claim", path, max_length=_CLAIM_MAX_LENGTH, default=DEFAULT_TEAM_CLAIM)
        subject_claim = _text(
            checks, fields, "subject_claim", path, max_length=_CLAIM_MAX_LENGTH, default=DEFAULT_SUBJECT_CLAIM
        )
        if (tenant, issuer) in issuers:
            checks.add(f"{path}.issuer", f"duplicate token issuer {issuer!r} in tenant {tenant!r}")
        elif tenant and issuer:
            issuers[(tenant, issuer)] = TokenIssuerSpec(
                tenant=tenant, issuer=issuer, audience=audience, jwks_url=jwks_url, public_key=public_key,
                algorithms=algorithms, team_claim=team_claim, subject_claim=subject_claim,
            )
    return tuple(issuers.values())


def _key_source(checks: FieldChecks, fields: dict[str, Any], path: str) -> tuple[str, str]:
    """(jwks_url, public_key): where the issuer's signing keys come from; the one not given is ""."""
    if ("jwks_url" in fields) == ("public_key" in fields):
        checks.add(path, "give exactly one of 'jwks_url' and 'public_key'")
        return "", ""
    if "jwks_url" in fields:
        where = f"{path}.jwks_url"
        url = checks.text(fields["jwks_url"], where, max_length=_TEXT_MAX_LENGTH)
        if url and not url.startswith(("https://", "http://")):
            checks.add(where, "must be an http:// or https:// URL")
        return url, ""
    where = f"{path}.public_key"
    key = checks.text(fields["public_key"], where, max_length=_PUBLIC_KEY_MAX_LENGTH)
    if key and len(key) <= _PUBLIC_KEY_MAX_LENGTH:
        try:
            load_pem_public_key(key.encode())
        except (ValueError, UnsupportedAlgorithm):
            # Not the library's message: the problem list is printed, and should not quote the key.
            checks.add(where, "must be a PEM public key ('-----BEGIN PUBLIC KEY----- ...')")
    return "", key


def _check_key_type(checks: FieldChecks, public_key: str, algorithms: tuple[str, ...], path: str) -> None:
    try:
        usable = public_key_algorithms(public_key)
    except ValueError:
        return  # reported by _key_source
    if not set(usable) & set(algorithms):
        checks.add(path, key_algorithms_problem(usable, algorithms))


def _algorithms(checks: FieldChecks, raw: Any, path: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not raw:
        checks.add(path, f"must be a list of one or more of: {', '.join(ALGORITHMS)}")
        return ()
    algorithms: list[str] = []
    for k, item in enumerate(raw):
        algorithm = checks.choice(item, f"{path}[{k}]", list(ALGORITHMS))
        if algorithm in algorithms:
            checks.add(f"{path}[{k}]", f"duplicate algorithm {algorithm!r}")
        elif algorithm:
            algorithms.append(algorithm)
    return tuple(algorithms)


def _text(
    checks: FieldChecks, fields: dict[str, Any], field: str, path: str, *, max_length: int, default: str = ""
) -> str:
    """The field's text, or `default` when it is absent (a missing required field is already
    reported, once, by `mapping`)."""
    if field not in fields:
        return default
    return checks.text(fields[field], f"{path}.{field}", max_length=max_length)


# --- reconcile -----------------------------------------------------------------------------------
def token_issuer_reconcile(*, tenant: Tenant, spec: TokenIssuerSpec) -> Change:
    """Make the tenant accept tokens as `spec` describes, writing (and moving the configuration
    version) only when the stored issuer differs. Raises the service's ValidationError."""
    name = _name(tenant.slug, spec.issuer)
    summary = f"for {spec.audience}, keys from {spec.jwks_url or 'a PEM public key'}"
    stored = token_issuer_list(tenant=tenant).filter(issuer=spec.issuer).first()
    current = _as_spec(stored, tenant=tenant.slug) if stored is not None else None
    if current == spec:
        return Change(action=Action.UNCHANGED, kind="token_issuer", name=name, detail=summary)
    token_issuer_set(
        tenant=tenant, issuer=spec.issuer, audience=spec.audience, jwks_url=spec.jwks_url,
        public_key=spec.public_key, algorithms=spec.algorithms, team_claim=spec.team_claim,
        subject_claim=spec.subject_claim,
    )
    if current is None:
        return Change(action=Action.CREATED, kind="token_issuer", name=name, detail=summary)
    changed = [f.name for f in dataclasses.fields(spec) if getattr(current, f.name) != getattr(spec, f.name)]
    return Change(action=Action.UPDATED, kind="token_issuer", name=name, detail=", ".join(changed))


def token_issuers_prune(*, tenant: Tenant, specs: tuple[TokenIssuerSpec, ...]) -> list[Change]:
    """Remove the tenant's stored issuers that `specs` do not name (for a tenant the document names)."""
    named = {spec.issuer for spec in specs if spec.tenant == tenant.slug}
    changes = []
    for token_issuer in token_issuer_list(tenant=tenant):
        if token_issuer.issuer not in named:
            token_issuer_delete(token_issuer=token_issuer)
            name = _name(tenant.slug, token_issuer.issuer)
            changes.append(Change(action=Action.DELETED, kind="token_issuer", name=name))
    return changes


def _as_spec(token_issuer: TokenIssuer, *, tenant: str) -> TokenIssuerSpec:
    """The stored issuer in the document's terms, so that the two compare field by field."""
    return TokenIssuerSpec(
        tenant=tenant, issuer=token_issuer.issuer, audience=token_issuer.audience,
        jwks_url=token_issuer.jwks_url, public_key=token_issuer.public_key,
        algorithms=tuple(token_issuer.algorithms), team_claim=token_issuer.team_claim,
        subject_claim=token_issuer.subject_claim,
    )


def _name(tenant: str, issuer: str) -> str:
    return f"{tenant}/{issuer}"


# --- export --------------------------------------------------------------------------------------
def token_issuers_export(*, tenant: Tenant) -> list[dict[str, Any]]:
    """The tenant's `token_issuers` entries, by issuer. Like the rest of an export, optional fields
    are written only when they differ from their defaults."""
    entries = []
    for token_issuer in token_issuer_list(tenant=tenant):
        item: dict[str, Any] = {
            "tenant": tenant.slug,
            "issuer": token_issuer.issuer,
            "audience": token_issuer.audience,
        }
        # The service stores exactly one of the two; write whichever is set.
        if token_issuer.jwks_url:
            item["jwks_url"] = token_issuer.jwks_url
        if token_issuer.public_key:
            item["public_key"] = token_issuer.public_key
        if tuple(token_issuer.algorithms) != ALGORITHMS:
            item["algorithms"] = list(token_issuer.algorithms)
        if token_issuer.team_claim != DEFAULT_TEAM_CLAIM:
            item["team_claim"] = token_issuer.team_claim
        if token_issuer.subject_claim != DEFAULT_SUBJECT_CLAIM:
            item["subject_claim"] = token_issuer.subject_claim
        entries.append(item)
    return entries
