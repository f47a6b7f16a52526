"""Changing a tenant's authorization server and its clients (docs/identity.md, "Signing in people")."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.common.config_version import config_version_bump
from apps.common.oauth_metadata import MetadataUnavailable, secure_url
from apps.common.secrets import secret_encrypt
from apps.oauth.idp import identity_provider_check
from apps.oauth.models import (
    AuthorizationCode,
    AuthorizationServer,
    Grant,
    IdentityProvider,
    OAuthClient,
    RefreshToken,
)
from apps.tenants.models import Membership, Tenant

#: How long a revoked grant is kept (the console no longer lists it; it is there for investigations).
REVOKED_GRANTS_KEPT = timedelta(days=30)


def authorization_server_enable(*, tenant: Tenant) -> AuthorizationServer:
    """Switch the tenant's authorization server on, making its signing key the first time."""
    with transaction.atomic():
        server = AuthorizationServer.objects.select_for_update().filter(tenant=tenant).first()
        if server is None:
            key = ec.generate_private_key(ec.SECP256R1())
            pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()).decode()
            server = AuthorizationServer.objects.create(
                tenant=tenant, signing_key=secret_encrypt(pem), key_id=secrets.token_urlsafe(12))
        elif not server.enabled:
            server.enabled = True
            server.save(update_fields=["enabled", "updated_at"])
        config_version_bump(tenant_id=tenant.pk)  # the gateway takes its tokens from then on
        return server


def authorization_server_settings_set(
    *, server: AuthorizationServer, enabled: bool, allow_metadata_documents: bool, allow_registration: bool,
) -> AuthorizationServer:
    server.enabled = enabled
    server.allow_metadata_documents = allow_metadata_documents
    server.allow_registration = allow_registration
    server.save(update_fields=["enabled", "allow_metadata_documents", "allow_registration", "updated_at"])
    config_version_bump(tenant_id=server.tenant_id)
    return server


def grants_revoke(*, tenant: Tenant, grant_ids: list[int]) -> int:
    """End these grants of the tenant's server: their refresh tokens are refused from now on, their
    access tokens as soon as the gateway's configuration snapshot has the revocation (well under a
    second). Returns how many were standing."""
    ended = Grant.objects.filter(tenant=tenant, pk__in=grant_ids, revoked_at__isnull=True).update(
        revoked_at=timezone.now())
    if ended:
        config_version_bump(tenant_id=tenant.pk)
    return ended


def oauth_client_register(*, tenant: Tenant, client_id: str, metadata: Mapping[str, Any]) -> OAuthClient:
    """Keep a client that registered itself (RFC 7591), with its checked metadata."""
    return OAuthClient.objects.create(
        tenant=tenant, client_id=client_id, kind=OAuthClient.Kind.REGISTERED,
        client_name=str(metadata.get("client_name") or "")[:200], redirect_uris=list(metadata.get("redirect_uris") or []),
        metadata=dict(metadata),
    )


def authorization_server_configure(
    *, tenant: Tenant, enabled: bool, allow_registration: bool, allow_metadata_documents: bool,
) -> AuthorizationServer | None:
    """Switch the tenant's server on (making its key the first time) or off, and say how clients
    may identify. Off, no one signs in, and its tokens are refused and not refreshed; grants stay
    (their apps work again when it is switched back on). None when it is off and was never on."""
    if enabled:
        server = authorization_server_enable(tenant=tenant)
    else:
        server = AuthorizationServer.objects.filter(tenant=tenant).first()
        if server is None:
            return None
    return authorization_server_settings_set(server=server, enabled=enabled, allow_registration=allow_registration,
                                             allow_metadata_documents=allow_metadata_documents)


def oauth_clients_unused_delete(*, tenant: Tenant, older_than: timedelta) -> int:
    """Delete the tenant's clients that no one ever signed in with, made before `older_than` ago."""
    stale = OAuthClient.objects.filter(tenant=tenant, created_at__lt=timezone.now() - older_than, grants__isnull=True)
    deleted, _ = stale.delete()
    return deleted


def oauth_rows_prune(*, now: datetime | None = None) -> dict[str, int]:
    """Delete what the authorization server no longer needs: codes a day after they expired, refresh
    tokens a day after they were replaced or expired, and grants REVOKED_GRANTS_KEPT after they were
    revoked (with their codes and tokens). Returns how many of each went."""
    now = now or timezone.now()
    day = timedelta(days=1)
    codes, _ = AuthorizationCode.objects.filter(expires_at__lt=now - day).delete()
    tokens, _ = RefreshToken.objects.filter(Q(replaced_at__lt=now - day) | Q(expires_at__lt=now - day)).delete()
    grants = Grant.objects.filter(revoked_at__lt=now - REVOKED_GRANTS_KEPT)
    grants_count = grants.count()
    grants.delete()
    return {"codes": codes, "refresh_tokens": tokens, "grants": grants_count}


def identity_provider_problems(*, issuer: str, client_id: str, scope: str, label: str, role: str) -> dict[str, str]:
    """What is wrong with an identity provider's fields, by field (empty: nothing), before anyone asks
    it: the rules the service, the console and configuration documents apply, in the same words."""
    problems: dict[str, str] = {}
    try:
        secure_url(issuer, "the issuer")
    except MetadataUnavailable as exc:
        problems["issuer"] = str(exc)
    if not client_id or len(client_id) > 500:
        problems["client_id"] = "the client id is 1-500 characters"
    if "openid" not in scope.split() or len(scope) > 500:
        problems["scope"] = "the scopes must include openid (at most 500 characters)"
    if role not in Membership.Role.values:
        problems["role"] = f"unknown role {role!r}; use one of {', '.join(Membership.Role.values)}"
    if len(label) > 100:
        problems["label"] = "the label is at most 100 characters"
    return problems


def identity_provider_set(
    *, tenant: Tenant, issuer: str, client_id: str, client_secret: str | None = None, scope: str = "openid email profile",
    label: str = "", role: str = "member",
) -> IdentityProvider:
    """Let people sign in through the tenant's OpenID Connect provider at `issuer` (replacing the one
    set before); `client_secret` None keeps the stored one while the issuer and client id stay (else
    the client has none until given). The provider's metadata must be readable now. Refused with a
    ValidationError naming the field. People known to an earlier issuer stay linked to it only."""
    problems = identity_provider_problems(issuer=issuer, client_id=client_id, scope=scope, label=label, role=role)
    if not problems and (problem := identity_provider_check(issuer=issuer, allow_private=tenant.private_networks_allowed)):
        problems["issuer"] = problem
    if problems:
        raise ValidationError(problems)
    defaults: dict[str, Any] = {"issuer": issuer, "client_id": client_id, "scope": scope, "label": label, "role": role}
    stored = IdentityProvider.objects.filter(tenant=tenant).first()
    if client_secret is None and stored is not None and (stored.issuer, stored.client_id) != (issuer, client_id):
        client_secret = ""  # a secret is another server's (or client's) to keep: never sent to a new one
    if client_secret is not None:
        defaults["client_secret"] = secret_encrypt(client_secret) if client_secret else ""
    provider, _ = IdentityProvider.objects.update_or_create(tenant=tenant, defaults=defaults)
    return provider


def identity_provider_clear(*, tenant: Tenant) -> None:
    """People no longer sign in through the tenant's provider (the console users it made stay)."""
    IdentityProvider.objects.filter(tenant=tenant).delete()
