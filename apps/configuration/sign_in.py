"""A tenant's `sign_in` (the gateway's authorization server for its hosts, docs/identity.md) and its
`identity_provider` (the OpenID Connect provider people sign in through): what is stored, as the
document says it — for `reconcile` to compare and apply, and for the export to write."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from django.core.exceptions import ValidationError

from apps.common.secrets import SecretUnreadable, secret_decrypt
from apps.configuration.document import IdentityProviderSpec, SignInSpec
from apps.oauth.models import IdentityProvider
from apps.oauth.selectors import authorization_server_state, identity_provider_get
from apps.oauth.services import identity_provider_clear, identity_provider_set
from apps.tenants.models import Tenant


def sign_in_of(tenant: Tenant) -> SignInSpec | None:
    """The stored server as a spec; None when it was never switched on."""
    server = authorization_server_state(tenant=tenant)
    if server is None:
        return None
    return SignInSpec(enabled=server.enabled, registration=server.allow_registration,
                      metadata_documents=server.allow_metadata_documents)


def sign_in_wanted(tenant: Tenant, spec: SignInSpec) -> SignInSpec | None:
    """What `spec` asks of the stored server: `false` switches it off and keeps how clients may
    identify; None when there is nothing to do (off, and never switched on)."""
    stored = sign_in_of(tenant)
    if spec.enabled:
        return None if stored == spec else spec
    if stored is None or not stored.enabled:
        return None
    return dataclasses.replace(stored, enabled=False)


def sign_in_export(tenant: Tenant) -> dict[str, Any]:
    """The tenant's `sign_in` entry for the export ({} when it was never switched on)."""
    spec = sign_in_of(tenant)
    if spec is None:
        return {}
    if not spec.enabled or (spec.registration and spec.metadata_documents):
        return {"sign_in": spec.enabled}
    return {"sign_in": {"registration": spec.registration, "metadata_documents": spec.metadata_documents}}


def identity_provider_reconcile(*, tenant: Tenant, spec: IdentityProviderSpec) -> str | None:
    """Bring the tenant's identity provider in line with `spec`; what changed ("identity provider",
    "identity provider removed") or None. A spec without a secret keeps the stored one."""
    stored = identity_provider_get(tenant=tenant)
    if spec.remove:
        if stored is None:
            return None
        identity_provider_clear(tenant=tenant)
        return "identity provider removed"
    secret = spec.client_secret
    if spec.client_secret_env is not None:
        secret = os.environ.get(spec.client_secret_env)
        if not secret:
            raise ValidationError({"identity_provider": f"environment variable {spec.client_secret_env} is not set"})
    if stored is not None and (stored.issuer, stored.client_id, stored.scope, stored.label, stored.role) == (
            spec.issuer, spec.client_id, spec.scope, spec.label, spec.role) and (secret is None or _same_secret(stored, secret)):
        return None
    identity_provider_set(tenant=tenant, issuer=spec.issuer, client_id=spec.client_id, client_secret=secret,
                          scope=spec.scope, label=spec.label, role=spec.role)
    return "identity provider"


def _same_secret(stored: IdentityProvider, secret: str) -> bool:
    try:
        return (secret_decrypt(stored.client_secret) if stored.client_secret else "") == secret
    except SecretUnreadable:
        return False


def identity_provider_export(tenant: Tenant) -> dict[str, Any]:
    """The tenant's `identity_provider` entry for the export, without its secret ({} when it has none)."""
    provider = identity_provider_get(tenant=tenant)
    if provider is None:
        return {}
    entry = {"issuer": provider.issuer, "client_id": provider.client_id}
    entry |= {name: value for name, value, default in (
        ("scope", provider.scope, "openid email profile"), ("label", provider.label, ""), ("role", provider.role, "member"),
    ) if value != default}
    return {"identity_provider": entry}
