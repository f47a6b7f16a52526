"""The `token_issuers` section of the configuration document: checking it (pure, like `validation`),
bringing a tenant's stored token issuers in line with it (for `reconcile`), and exporting them.

How tokens are verified is the gateway's (docs/identity.md); here issuers are only stored, through
apps/tenants/services.py, with the service's own check (`token_issuer_check`), so that a document
that validates never fails on an issuer when it is applied."""

from __future__ import annotations

import dataclasses
from typing import Any

from apps.configuration.document import TenantSpec, TokenIssuerSpec
from apps.configuration.fields import FieldChecks, private_networks_allowed
from apps.configuration.reports import Action, Change
from apps.tenants.models import Tenant, TokenIssuer
from apps.tenants.selectors import token_issuer_list
from apps.tenants.services import token_issuer_delete, token_issuer_set
from apps.tenants.validators import ALGORITHMS, TokenIssuerFields, token_issuer_check

# The service's defaults: an entry that leaves these out gets them, and an export leaves them out.
DEFAULT_TEAM_CLAIM = "team"
DEFAULT_SUBJECT_CLAIM = "sub"
_FIELDS = ("tenant", "issuer", "audience", "jwks_url", "public_key", "algorithms", "team_claim", "subject_claim")
_REQUIRED = ("tenant", "issuer", "audience")


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
        tenant = checks.text(fields["tenant"], f"{path}.tenant", max_length=64) if "tenant" in fields else ""
        if tenant and tenant not in tenants:
            checks.add(f"{path}.tenant", f"unknown tenant {tenant!r} (add it under tenants)")
            tenant = ""
        given = TokenIssuerFields(
            issuer=fields.get("issuer"), audience=fields.get("audience"), jwks_url=fields.get("jwks_url", ""),
            public_key=fields.get("public_key", ""), algorithms=fields.get("algorithms", ALGORITHMS),
            team_claim=fields.get("team_claim", DEFAULT_TEAM_CLAIM),
            subject_claim=fields.get("subject_claim", DEFAULT_SUBJECT_CLAIM),
        )
        private = private_networks_allowed(tenants.get(tenant))
        # Neither key source given is reported at jwks_url, as the service reports it.
        wrong = checks.refuse(path, token_issuer_check(given, allow_private=private, resolve=False),
                              given={*fields, "jwks_url"})
        if wrong or any(field not in fields for field in _REQUIRED):
            continue
        issuer, audience = str(given.issuer), str(given.audience)
        if (tenant, issuer) in issuers:
            checks.add(f"{path}.issuer", f"duplicate token issuer {issuer!r} in tenant {tenant!r}")
        elif tenant and issuer:
            issuers[(tenant, issuer)] = TokenIssuerSpec(
                tenant=tenant, issuer=issuer, audience=audience, jwks_url=str(given.jwks_url),
                public_key=str(given.public_key), algorithms=tuple(given.algorithms),  # type: ignore[arg-type]
                team_claim=str(given.team_claim), subject_claim=str(given.subject_claim),
            )
    return tuple(issuers.values())


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
