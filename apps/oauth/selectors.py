"""Reading a tenant's authorization server (docs/identity.md, "Signing in people")."""

from __future__ import annotations

import base64
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from apps.common.secrets import secret_decrypt
from apps.oauth.models import AuthorizationServer
from apps.tenants.models import Tenant

#: Under the gateway's origin, a tenant's authorization server (its issuer identifier).
ISSUER_PATH = "/oauth/{tenant}"


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
