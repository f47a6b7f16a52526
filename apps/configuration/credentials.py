"""A backend's `credential` and a tenant's `secrets` in the configuration document: checking them
(pure, like `validation`) and bringing what is stored in line with them (for `reconcile`). Secrets are written in the file
or named by environment variables (`secret_env`), read when the document is applied; exports carry
no credential at all (they hold no secrets).

The rules are the service's (apps/catalog/credentials.py), which refuses anything these checks let
through with a message at the credential's path."""

from __future__ import annotations

import os
from typing import Any

from django.core.exceptions import ValidationError

from apps.catalog.credentials import (
    CredentialFields,
    IdentitySecret,
    egress_credential_check,
    egress_credential_clear,
    egress_credential_set,
    tenant_secret_check,
    tenant_secret_delete,
    tenant_secret_set,
)
from apps.catalog.models import Backend, EgressCredential, TenantSecret
from apps.common.secrets import SecretUnreadable, secret_decrypt
from apps.configuration.document import CredentialSpec, IdentitySpec, TenantSecretSpec
from apps.configuration.fields import FieldChecks
from apps.configuration.reports import Action, Change
from apps.kernel.problems import FieldProblem
from apps.tenants.models import Tenant

_FIELDS = (
    "kind", "name", "username", "secret", "secret_env", "source", "tenant_secret", "identities",
    "token_url", "client_id", "scope", "audience", "client_auth", "subject_issuer",
)
_SUBJECTS = ("key", "subject", "team")


# --- validation ----------------------------------------------------------------------------------
def credential_check(
    checks: FieldChecks, raw: Any, path: str, *, backend_kind: str, allow_private: bool
) -> CredentialSpec | None:
    """The credential as written at `path` (`null`: remove the stored one); problems go to `checks`,
    the rules being the service's own (`egress_credential_check`)."""
    if raw is None:
        return CredentialSpec(remove=True)
    fields = checks.mapping(raw, path, fields=_FIELDS, required=())
    if fields is None:
        return None
    before = len(checks.problems)
    for field in _FIELDS:
        if field != "identities" and field in fields and not isinstance(fields[field], str):
            checks.add(f"{path}.{field}", "must be a string")
    text = {field: fields[field] for field in _FIELDS if isinstance(fields.get(field), str)}
    if "secret" in fields and "secret_env" in fields:
        checks.add(path, "give at most one of 'secret' and 'secret_env'")
    source = text.get("source", EgressCredential.Source.STATIC.value)
    identities: tuple[IdentitySpec, ...] = ()
    if "identities" in fields:
        identities = _identities(checks, fields["identities"], f"{path}.identities")
    if len(checks.problems) > before:
        return None
    spec = CredentialSpec(
        kind=text.get("kind", ""), name=text.get("name", ""), username=text.get("username", ""),
        secret=text.get("secret"), secret_env=text.get("secret_env"), source=source,
        tenant_secret=text.get("tenant_secret", ""), identities=identities,
        token_url=text.get("token_url", ""), client_id=text.get("client_id", ""), scope=text.get("scope", ""),
        audience=text.get("audience", ""),
        client_auth=text.get("client_auth", EgressCredential.ClientAuth.BASIC.value),
        subject_issuer=text.get("subject_issuer", ""),
    )
    wrong = checks.refuse(path, egress_credential_check(
        _fields(spec), backend_kind=backend_kind, allow_private=allow_private, resolve=False), given=_FIELDS)
    return None if wrong else spec


# A secret named by `secret_env` is read when the document is applied: until then its value is
# unknown, and this stands in for it (the service checks the real one).
_FROM_ENVIRONMENT = "from-the-environment"


def _fields(spec: CredentialSpec) -> CredentialFields:
    def secret(value: str | None, env: str | None) -> str:
        return _FROM_ENVIRONMENT if env is not None else value or ""

    return CredentialFields(
        kind=spec.kind, name=spec.name, username=spec.username, secret=secret(spec.secret, spec.secret_env),
        source=spec.source, tenant_secret=spec.tenant_secret,
        identities=tuple(IdentitySecret(i.subject_kind, i.subject_name, secret(i.secret, i.secret_env), i.issuer)
                         for i in spec.identities),
        token_url=spec.token_url, client_id=spec.client_id, scope=spec.scope, audience=spec.audience,
        client_auth=spec.client_auth, subject_issuer=spec.subject_issuer,
    )


def _identities(checks: FieldChecks, raw: Any, path: str) -> tuple[IdentitySpec, ...]:
    """The callers' entries as written: their shape is checked here, their rules by the service's check."""
    found: list[IdentitySpec] = []
    for i, item in enumerate(checks.items(raw, path)):
        where = f"{path}[{i}]"
        fields = checks.mapping(item, where, fields=(*_SUBJECTS, "issuer", "secret", "secret_env"), required=())
        if fields is None:
            continue
        subjects = [s for s in _SUBJECTS if s in fields]
        if len(subjects) != 1:
            checks.add(where, "name exactly one of 'key', 'subject' and 'team'")
            continue
        name, issuer = fields[subjects[0]], fields.get("issuer", "")
        for field, value in ((subjects[0], name), ("issuer", issuer)):
            if not isinstance(value, str):
                checks.add(f"{where}.{field}", "must be a string")
        secret, secret_env = _one_secret(checks, fields, where)
        found.append(IdentitySpec(subjects[0], str(name), secret, secret_env, str(issuer)))
    return tuple(found)


def _one_secret(checks: FieldChecks, fields: dict[str, Any], where: str) -> tuple[str | None, str | None]:
    """(secret, secret_env) of an entry that must give exactly one of them, as strings."""
    if ("secret" in fields) == ("secret_env" in fields):
        checks.add(where, "give exactly one of 'secret' and 'secret_env'")
    found: list[str | None] = []
    for field in ("secret", "secret_env"):
        value = fields.get(field)
        if value is not None and not isinstance(value, str):
            checks.add(f"{where}.{field}", "must be a string")
        found.append(value if isinstance(value, str) else None)
    return found[0], found[1]


def tenant_secrets_check(checks: FieldChecks, raw: Any, path: str) -> tuple[TenantSecretSpec, ...]:
    """A tenant's `secrets`: `[{name, secret | secret_env}]`, names unique."""
    found: list[TenantSecretSpec] = []
    for i, item in enumerate(checks.items(raw, path)):
        where = f"{path}[{i}]"
        fields = checks.mapping(item, where, fields=("name", "secret", "secret_env"), required=("name",))
        if fields is None:
            continue
        name = fields.get("name")
        secret, secret_env = _one_secret(checks, fields, where)
        value = _FROM_ENVIRONMENT if secret_env is not None else secret or ""
        # The value's problems are the secret's, at `secret` (the service calls the field `value`).
        checks.refuse(where, [FieldProblem("secret" if p.field == "value" else p.field, p.message)
                              for p in tenant_secret_check(name=name, value=value)], given={*fields, "secret"})
        name = name if isinstance(name, str) else ""
        if any(s.name == name for s in found):
            checks.add(f"{where}.name", f"duplicate secret {name!r}")
        found.append(TenantSecretSpec(name, secret, secret_env))
    return tuple(found)


# --- applying ------------------------------------------------------------------------------------
def _value(secret: str | None, secret_env: str | None, where: str) -> str:
    if secret_env is None:
        return secret or ""
    value = os.environ.get(secret_env)
    if not value:
        raise ValidationError({where: f"environment variable {secret_env} is not set"})
    return value


def _wanted(spec: CredentialSpec) -> dict[str, Any]:
    """The service's arguments for `spec`, secrets read from the environment."""
    return {
        "kind": spec.kind, "name": spec.name, "username": spec.username, "source": spec.source,
        "secret": _value(spec.secret, spec.secret_env, "credential"), "tenant_secret": spec.tenant_secret,
        "identities": tuple(
            IdentitySecret(i.subject_kind, i.subject_name, _value(i.secret, i.secret_env, "credential.identities"),
                           i.issuer)
            for i in spec.identities
        ),
        "token_url": spec.token_url, "client_id": spec.client_id, "scope": spec.scope, "audience": spec.audience,
        "client_auth": spec.client_auth, "subject_issuer": spec.subject_issuer,
    }


def _stored(stored: EgressCredential) -> dict[str, Any] | None:
    """The stored credential as the service's arguments; None when its secrets cannot be read."""
    try:
        identities = tuple(
            IdentitySecret(i.subject_kind, i.subject_name, secret_decrypt(i.secret), i.issuer)
            for i in stored.identities.all()
        )
        secret = secret_decrypt(stored.secret) if stored.secret else ""
    except SecretUnreadable:
        return None
    return {
        "kind": stored.kind, "name": stored.name, "username": stored.username, "source": stored.source,
        "secret": secret, "tenant_secret": stored.tenant_secret.name if stored.tenant_secret else "",
        "identities": identities, "token_url": stored.token_url, "client_id": stored.client_id,
        "scope": stored.scope, "audience": stored.audience, "client_auth": stored.client_auth,
        "subject_issuer": stored.subject_issuer,
    }


def credential_reconcile(*, backend: Backend, spec: CredentialSpec | None) -> str | None:
    """Bring the backend's credential in line with `spec` (None: leave it as it is). Returns what
    changed ("credential", "credential removed") or None."""
    if spec is None:
        return None
    stored: EgressCredential | None = getattr(backend, "credential", None)
    if spec.remove:
        if stored is None:
            return None
        egress_credential_clear(backend=backend)
        return "credential removed"
    wanted = _wanted(spec)
    if stored is not None:
        current = _stored(stored)
        order = sorted  # identities compare as sets: their order in the file means nothing
        if current is not None and {**current, "identities": order(current["identities"], key=repr)} == {
            **wanted, "identities": order(wanted["identities"], key=repr)
        }:
            return None
    egress_credential_set(backend=backend, **wanted)
    return "credential"


def tenant_secret_reconcile(*, tenant: Tenant, spec: TenantSecretSpec) -> Change:
    """Create the tenant secret, or replace its value when it differs."""
    value = _value(spec.secret, spec.secret_env, "secret")
    name = f"{tenant.slug}/{spec.name}"
    stored = TenantSecret.objects.filter(tenant=tenant, name=spec.name).first()
    if stored is not None:
        try:
            if secret_decrypt(stored.value) == value:
                return Change(Action.UNCHANGED, "secret", name)
        except SecretUnreadable:
            pass
    tenant_secret_set(tenant=tenant, name=spec.name, value=value)
    return Change(Action.CREATED if stored is None else Action.UPDATED, "secret", name, "" if stored is None else "value")


def tenant_secrets_prune(*, tenant: Tenant, specs: tuple[TenantSecretSpec, ...]) -> list[Change]:
    """Delete the tenant's secrets `specs` does not name (refused for one a credential still uses)."""
    named = {spec.name for spec in specs}
    changes = []
    for stored in TenantSecret.objects.filter(tenant=tenant).exclude(name__in=named).order_by("name"):
        tenant_secret_delete(tenant=tenant, name=stored.name)
        changes.append(Change(Action.DELETED, "secret", f"{tenant.slug}/{stored.name}"))
    return changes
