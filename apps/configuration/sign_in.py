"""A tenant's `sign_in` (the gateway's authorization server for its hosts, docs/identity.md): what is
stored, as the document says it — for `reconcile` to compare and for the export to write."""

from __future__ import annotations

import dataclasses
from typing import Any

from apps.configuration.document import SignInSpec
from apps.oauth.selectors import authorization_server_state
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
