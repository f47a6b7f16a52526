"""Signing a person in at a tenant's authorization server, through Authlib's grants: the
authorization code grant with PKCE (S256 only) and the refresh token grant with rotation, for
public clients, each access token bound to one virtual host (RFC 8707) and signed by the tenant's
key (a JWT, RFC 9068) so that the gateway verifies it as it does any issuer's, without a query
(docs/identity.md, "Signing in people").

What Authlib does not know is added here: the `resource` a code and its tokens are for, the grant
(a person's consent to one client for one host) behind every code and token, reuse detection (a
code or a replaced refresh token used again revokes the grant), and the `iss` parameter on every
authorization response (RFC 9207)."""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import jwt
from authlib.common.urls import add_params_to_uri
from authlib.integrations.django_oauth2 import AuthorizationServer as DjangoAuthorizationServer
from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749 import (
    AuthorizationCodeMixin,
    ClientMixin,
    TokenMixin,
)
from authlib.oauth2.rfc6749.grants import AuthorizationCodeGrant, RefreshTokenGrant
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc9207 import IssuerParameter
from cryptography.hazmat.primitives import serialization
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from apps.common.secrets import secret_decrypt
from apps.oauth.models import AuthorizationCode, AuthorizationServer, Grant, OAuthClient, RefreshToken
from apps.oauth.selectors import ACCESS_TOKEN_SECONDS, resource_host_get, resource_url
from apps.oauth.services import grants_revoke
from apps.tenants.access import access_get
from apps.tenants.models import Tenant

REFRESH_TOKEN_SECONDS = 30 * 86400
CODE_SECONDS = 300


def token_hash(token: str) -> str:
    """What is stored of a code or refresh token: they are random (256 bits), so one hash is enough."""
    return hashlib.sha256(token.encode()).hexdigest()


class InvalidTargetError(OAuth2Error):
    """RFC 8707 §2: the resource is not one this server issues tokens for, or not the grant's."""

    error = "invalid_target"


@dataclass(frozen=True)
class Context:
    """What every step of a flow at one tenant's server needs."""

    tenant: Tenant
    server: AuthorizationServer
    origin: str  # scheme://host[:port] the request came to
    issuer: str


# --- Authlib's views of the stored rows ------------------------------------------------------------

class _Client(ClientMixin):
    def __init__(self, row: OAuthClient) -> None:
        self.row = row

    def get_client_id(self) -> str:
        return self.row.client_id

    def get_default_redirect_uri(self) -> str | None:
        uris = self.row.redirect_uris
        return uris[0] if len(uris) == 1 else None  # with several, the request must name one

    def get_allowed_scope(self, scope: str) -> str:
        return ""  # no scopes: a grant is for one virtual host, whose access rules then apply

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in self.row.redirect_uris  # exactly as registered

    def check_client_secret(self, client_secret: str) -> bool:
        return False  # public clients only

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method == "none"

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in (self.row.metadata.get("grant_types") or ["authorization_code"])


class _Code(AuthorizationCodeMixin):
    def __init__(self, row: AuthorizationCode) -> None:
        self.row = row
        self.code_challenge = row.code_challenge
        self.code_challenge_method = "S256"

    def get_redirect_uri(self) -> str:
        return self.row.redirect_uri

    def get_scope(self) -> str:
        return self.row.grant.scope


class _Refresh(TokenMixin):
    def __init__(self, row: RefreshToken) -> None:
        self.row = row

    def check_client(self, client: _Client) -> bool:
        return self.row.grant.client_id == client.row.pk

    def get_scope(self) -> str:
        return self.row.grant.scope

    def get_expires_in(self) -> int:
        return max(0, int((self.row.expires_at - timezone.now()).total_seconds()))

    def is_revoked(self) -> bool:
        return self.row.replaced_at is not None or self.row.grant.revoked_at is not None

    def is_expired(self) -> bool:
        return self.row.expires_at <= timezone.now()


# --- tokens ------------------------------------------------------------------------------------------

def _tokens_issue(context: Context, grant: Grant, *, refresh: bool) -> dict[str, Any]:
    """An access token for the grant's host (a JWT signed by the tenant's key), and a refresh token."""
    now = int(time.time())
    claims = {
        "iss": context.issuer, "sub": grant.user.get_username(), "aud": grant.resource, "iat": now,
        "exp": now + ACCESS_TOKEN_SECONDS, "jti": secrets.token_urlsafe(16), "client_id": grant.client.client_id,
        "gid": str(grant.pk),  # the grant it stands on: revoking that refuses the token at once
    }
    if grant.scope:
        claims["scope"] = grant.scope
    key = serialization.load_pem_private_key(secret_decrypt(context.server.signing_key).encode(), password=None)
    access = jwt.encode(claims, key, algorithm="ES256", headers={"kid": context.server.key_id, "typ": "at+jwt"})  # type: ignore[arg-type]
    token: dict[str, Any] = {"token_type": "Bearer", "access_token": access, "expires_in": ACCESS_TOKEN_SECONDS}
    if refresh:
        token["refresh_token"] = secrets.token_urlsafe(32)
    return token


def _resource_check(request: Any, context: Context, grant: Grant) -> None:
    asked = request.payload.data.get("resource")
    if not asked:
        return
    host = resource_host_get(tenant=context.tenant, origin=context.origin, resource=asked)
    if host is None or resource_url(origin=context.origin, host=host) != grant.resource:
        raise InvalidTargetError(description=f"the grant is for {grant.resource}, not {asked[:200]}")


# --- grants --------------------------------------------------------------------------------------------

class _CodeChallenge(CodeChallenge):
    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]


class _CodeGrant(AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["none"]
    server: TenantServer

    def save_authorization_code(self, code: str, request: Any) -> AuthorizationCode:
        client: _Client = request.client
        context = self.server.context
        host = resource_host_get(tenant=context.tenant, origin=context.origin, resource=request.payload.data["resource"])
        if host is None:  # (checked by the authorize view first)
            raise InvalidTargetError(description="the resource is not a virtual host of this tenant here")
        resource = resource_url(origin=context.origin, host=host)
        # One grant per sign-in: one device signing out, or a stolen code, ends that sign-in only.
        with transaction.atomic():
            grant = Grant.objects.create(tenant=context.tenant, user=request.user, client=client.row, resource=resource,
                                         scope="")
            return AuthorizationCode.objects.create(
                grant=grant, code_hash=token_hash(code), redirect_uri=request.payload.redirect_uri or "",
                code_challenge=request.payload.data["code_challenge"],
                expires_at=timezone.now() + timedelta(seconds=CODE_SECONDS))

    def query_authorization_code(self, code: str, client: _Client) -> _Code | None:
        row = AuthorizationCode.objects.select_related("grant__client", "grant__user").filter(
            code_hash=token_hash(code), grant__tenant=self.server.context.tenant).first()
        if row is None or row.grant.client_id != client.row.pk:
            return None
        if row.used_at is not None:  # a code used twice: someone has a copy; end what it gave
            grants_revoke(tenant=self.server.context.tenant, grant_ids=[row.grant_id])
            return None
        if row.expires_at <= timezone.now() or row.grant.revoked_at is not None:
            return None
        # Claimed here, at once: of two requests racing with one code, one gets it (a failed
        # PKCE check after this also spends it: a code is good for one attempt).
        if not AuthorizationCode.objects.filter(pk=row.pk, used_at__isnull=True).update(used_at=timezone.now()):
            return None
        return _Code(row)

    def delete_authorization_code(self, authorization_code: _Code) -> None:
        pass  # spent when it was claimed (`query_authorization_code`)

    def authenticate_user(self, authorization_code: _Code) -> AbstractBaseUser | None:
        return _person_still_here(self.server.context, authorization_code.row.grant)

    def validate_token_request(self) -> None:
        super().validate_token_request()
        _resource_check(self.request, self.server.context, self.request.authorization_code.row.grant)

    def generate_token(self, user: Any = None, scope: Any = None, grant_type: Any = None, expires_in: Any = None,
                       include_refresh_token: bool = True) -> dict[str, Any]:
        refresh = include_refresh_token and self.request.client.check_grant_type("refresh_token")
        return _tokens_issue(self.server.context, self.request.authorization_code.row.grant, refresh=refresh)

    def save_token(self, token: dict[str, Any]) -> None:
        _refresh_save(token, self.request.authorization_code.row.grant)


class _RefreshGrant(RefreshTokenGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["none"]
    INCLUDE_NEW_REFRESH_TOKEN = True  # rotation: each use gives a new one and ends the old
    server: TenantServer

    def authenticate_refresh_token(self, refresh_token: str) -> _Refresh | None:
        row = RefreshToken.objects.select_related("grant__client", "grant__user").filter(
            token_hash=token_hash(refresh_token), grant__tenant=self.server.context.tenant).first()
        if row is None:
            return None
        token = _Refresh(row)
        if token.is_expired() or row.grant.revoked_at is not None:
            return None
        # Claimed here, at once (a refresh token is good for one attempt): a token replaced before,
        # or one that two requests race with, is a copy in someone's hands: the grant ends.
        if row.replaced_at is not None or not RefreshToken.objects.filter(
                pk=row.pk, replaced_at__isnull=True).update(replaced_at=timezone.now()):
            grants_revoke(tenant=self.server.context.tenant, grant_ids=[row.grant_id])
            return None
        return token

    def authenticate_user(self, refresh_token: _Refresh) -> AbstractBaseUser | None:
        return _person_still_here(self.server.context, refresh_token.row.grant)

    def validate_token_request(self) -> None:
        super().validate_token_request()
        _resource_check(self.request, self.server.context, self.request.refresh_token.row.grant)

    def generate_token(self, user: Any = None, scope: Any = None, grant_type: Any = None, expires_in: Any = None,
                       include_refresh_token: bool = True) -> dict[str, Any]:
        return _tokens_issue(self.server.context, self.request.refresh_token.row.grant, refresh=True)

    def save_token(self, token: dict[str, Any]) -> None:
        _refresh_save(token, self.request.refresh_token.row.grant)

    def revoke_old_credential(self, refresh_token: _Refresh) -> None:
        pass  # replaced when it was claimed (`authenticate_refresh_token`)


def _person_still_here(context: Context, grant: Grant) -> AbstractBaseUser | None:
    """The grant's person, while their account is active and they may still see the tenant; a
    person who has left (membership removed, account deactivated) ends their grants here."""
    user = grant.user
    if user.is_active and access_get(user=user).sees(context.tenant.pk):
        return user
    grants_revoke(tenant=context.tenant, grant_ids=list(Grant.objects.filter(
        tenant=context.tenant, user=user, revoked_at__isnull=True).values_list("pk", flat=True)))
    return None


def _refresh_save(token: dict[str, Any], grant: Grant) -> None:
    if "refresh_token" in token:
        RefreshToken.objects.create(grant=grant, token_hash=token_hash(token["refresh_token"]),
                                    expires_at=timezone.now() + timedelta(seconds=REFRESH_TOKEN_SECONDS))


class _Grant(TokenMixin):
    """A token being revoked, as the grant it stands on (revoking any token of a grant ends it)."""

    def __init__(self, row: Grant) -> None:
        self.row = row

    def check_client(self, client: _Client) -> bool:
        return self.row.client_id == client.row.pk


class _Revocation(RevocationEndpoint):
    CLIENT_AUTH_METHODS = ["none"]
    server: TenantServer

    def query_token(self, token_string: str, token_type_hint: str | None) -> _Grant | None:
        tenant = self.server.context.tenant
        row = RefreshToken.objects.select_related("grant").filter(token_hash=token_hash(token_string),
                                                                   grant__tenant=tenant).first()
        if row is not None:
            return _Grant(row.grant)
        try:  # an access token: ours only if its signature says so
            key = serialization.load_pem_private_key(
                secret_decrypt(self.server.context.server.signing_key).encode(), password=None).public_key()
            claims = jwt.decode(token_string, key, algorithms=["ES256"], issuer=self.server.context.issuer,  # type: ignore[arg-type]
                                options={"verify_aud": False, "verify_exp": False})
        except jwt.PyJWTError:
            return None  # RFC 7009 §2.2: an unknown token is answered as if revoked
        found = Grant.objects.filter(tenant=tenant, pk=int(claims["gid"])).first() if str(claims.get("gid", "")).isdigit() else None
        return _Grant(found) if found is not None else None

    def revoke_token(self, token: _Grant, request: Any) -> None:
        grants_revoke(tenant=self.server.context.tenant, grant_ids=[token.row.pk])


class _Issuer(IssuerParameter):
    def __init__(self, issuer: str) -> None:
        self._issuer = issuer

    def get_issuer(self) -> str:
        return self._issuer

    def add_issuer_parameter(self, authorization_server: Any, response: HttpResponse) -> None:
        # (Authlib's reads `response.location`, which Django's responses do not have.)
        if response.has_header("Location"):
            response["Location"] = add_params_to_uri(response["Location"], {"iss": self._issuer})


class TenantServer(DjangoAuthorizationServer):
    """Authlib's authorization server for one tenant's, made per request (it holds no state of its own)."""

    def __init__(self, context: Context) -> None:
        super().__init__(OAuthClient, RefreshToken)
        self.context = context
        self.register_grant(_CodeGrant, [_CodeChallenge(required=True)])
        self.register_grant(_RefreshGrant)
        self.register_endpoint(_Revocation)
        self.register_extension(lambda server: _Issuer(context.issuer)(server))

    def query_client(self, client_id: str) -> _Client | None:
        row = OAuthClient.objects.filter(tenant=self.context.tenant, client_id=client_id).first()
        return _Client(row) if row is not None else None

    def save_token(self, token: dict[str, Any], request: Any) -> None:
        pass  # each grant keeps what it issued (`_refresh_save`): it knows the person's grant

    def handle_response(self, status_code: int, payload: Any, headers: Any) -> HttpResponse:
        response = super().handle_response(status_code, payload, headers)
        response.headers.setdefault("Cache-Control", "no-store")
        return response


def authorize_check(*, context: Context, request: HttpRequest) -> Any:
    """Authlib's check of an authorization request (client, redirect URI, response type, PKCE);
    raises OAuth2Error (with `redirect_uri` set once the redirect URI is known to be the client's)."""
    return TenantServer(context).get_consent_grant(request)


def authorization_respond(*, context: Context, request: HttpRequest, user: AbstractBaseUser | None) -> HttpResponse:
    """The redirect back to the client: with a code when `user` allowed it, else access_denied."""
    server = TenantServer(context)
    grant = server.get_consent_grant(request, end_user=user)
    return server.create_authorization_response(request, grant_user=user, grant=grant)


def token_respond(*, context: Context, request: HttpRequest) -> HttpResponse:
    return TenantServer(context).create_token_response(request)


def revocation_respond(*, context: Context, request: HttpRequest) -> HttpResponse:
    """RFC 7009: revoking a refresh or access token of a grant ends the grant (200 also for a token
    that is unknown or already revoked)."""
    return TenantServer(context).create_endpoint_response(_Revocation.ENDPOINT_NAME, request)
