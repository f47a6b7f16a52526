"""Reading a tenant's authorization server (docs/identity.md, "Signing in people")."""

from __future__ import annotations

import base64
import re
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.db.models import QuerySet
from django.utils import timezone

from apps.catalog.models import VirtualHost
from apps.common.secrets import secret_decrypt
from apps.kernel.identity import OwnIssuerView
from apps.oauth.models import AuthorizationServer, Grant, IdentityProvider
from apps.tenants.models import Tenant

#: How long an access token of a tenant's server is good for: revoking its grant refuses it at once.
ACCESS_TOKEN_SECONDS = 600

#: Under the gateway's origin, a tenant's authorization server (its issuer identifier).
ISSUER_PATH = "/oauth/{tenant}"


def authorization_server_state(*, tenant: Tenant) -> AuthorizationServer | None:
    """The tenant's authorization server, on or off; None when it was never switched on."""
    return AuthorizationServer.objects.filter(tenant=tenant).first()


def authorization_server_get(*, tenant: Tenant) -> AuthorizationServer | None:
    """The tenant's authorization server when it is switched on; None otherwise."""
    return AuthorizationServer.objects.filter(tenant=tenant, enabled=True).first()


def issuer_url(*, origin: str, tenant: Tenant) -> str:
    """The issuer identifier of the tenant's authorization server at `origin` (scheme://host[:port])."""
    return origin.rstrip("/") + ISSUER_PATH.format(tenant=tenant.slug)


def server_metadata(*, server: AuthorizationServer, issuer: str) -> dict[str, Any]:
    """The server's metadata (RFC 8414), as MCP clients read it to sign a person in."""
    metadata: dict[str, Any] = {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/authorize",
        "token_endpoint": f"{issuer}/token",
        "revocation_endpoint": f"{issuer}/revoke",
        "jwks_uri": f"{issuer}/jwks",
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "revocation_endpoint_auth_methods_supported": ["none"],
        "authorization_response_iss_parameter_supported": True,  # RFC 9207
        "client_id_metadata_document_supported": server.allow_metadata_documents,
    }
    if server.allow_registration:
        metadata["registration_endpoint"] = f"{issuer}/register"
    return metadata


def public_key_pem(*, server: AuthorizationServer) -> str:
    """The PEM public key its access tokens are verified with."""
    key = serialization.load_pem_private_key(secret_decrypt(server.signing_key).encode(), password=None)
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def jwks(*, server: AuthorizationServer) -> dict[str, Any]:
    """The server's key set (RFC 7517): its one ES256 public key."""
    public = serialization.load_pem_public_key(public_key_pem(server=server).encode())
    assert isinstance(public, ec.EllipticCurvePublicKey)
    numbers = public.public_numbers()

    def b64(value: int) -> str:
        return base64.urlsafe_b64encode(value.to_bytes(32, "big")).rstrip(b"=").decode()

    return {"keys": [{"kty": "EC", "crv": "P-256", "x": b64(numbers.x), "y": b64(numbers.y),
                      "kid": server.key_id, "use": "sig", "alg": "ES256"}]}


def resource_host_get(*, tenant: Tenant, origin: str, resource: str) -> VirtualHost | None:
    """The tenant's virtual host whose MCP URL at `origin` is `resource` (RFC 8707: the URL the
    client connects to, `<origin>/mcp/<tenant>/<host>`, or spelled with `/mcp` at the end as the
    Connect page gives it); None when it names none."""
    parts = urlsplit(resource)
    if parts.query or parts.fragment or f"{parts.scheme}://{parts.netloc}".lower() != origin.lower():
        return None
    segments = parts.path.rstrip("/").split("/")
    if len(segments) == 5 and segments[4] == "mcp":
        segments = segments[:4]
    if len(segments) != 4 or segments[:3] != ["", "mcp", tenant.slug]:
        return None
    return VirtualHost.objects.filter(tenant=tenant, slug=segments[3]).first()


def resource_url(*, origin: str, host: VirtualHost) -> str:
    """The one URL a host's tokens are for (their `aud`), however the client spelled it."""
    return f"{origin}/mcp/{host.tenant.slug}/{host.slug}"


def grant_list(*, tenant: Tenant, user: Any = None) -> QuerySet[Grant]:
    """The grants at the tenant's server that still stand (of `user` only, when given), newest first."""
    grants = Grant.objects.filter(tenant=tenant, revoked_at__isnull=True).select_related("client", "user")
    return (grants.filter(user=user) if user is not None else grants).order_by("-created_at", "-pk")


def grant_get(*, tenant: Tenant, grant_id: int) -> Grant | None:
    return Grant.objects.filter(tenant=tenant, pk=grant_id).select_related("client", "user").first()


def own_issuer_get(*, tenant: Tenant) -> OwnIssuerView | None:
    """The tenant's server as the gateway verifies its tokens: its public key, and the grants
    revoked within an access token's lifetime (older ones' tokens have expired)."""
    server = authorization_server_get(tenant=tenant)
    if server is None:
        return None
    since = timezone.now() - timedelta(seconds=ACCESS_TOKEN_SECONDS + 60)
    revoked = Grant.objects.filter(tenant=tenant, revoked_at__gte=since).values_list("pk", flat=True)
    return OwnIssuerView(public_key=public_key_pem(server=server), revoked_grants=frozenset(str(pk) for pk in revoked))


def identity_provider_get(*, tenant: Tenant) -> IdentityProvider | None:
    return IdentityProvider.objects.filter(tenant=tenant).select_related("tenant").first()


def identity_provider_for_path(*, path: str) -> IdentityProvider | None:
    """The identity provider of the tenant a path of this site belongs to (its console pages, its
    authorization server), for the sign-in page to offer: None for any other path."""
    found = re.match(r"/(?:oauth|console/t)/([\w-]+)/", path)
    if found is None:
        return None
    return IdentityProvider.objects.filter(tenant__slug=found.group(1)).select_related("tenant").first()
