"""Signing people in through a tenant's OpenID Connect provider (docs/identity.md, "Signing in
through the tenant's identity provider"): the authorization code flow with PKCE, `state` and `nonce`
kept in the person's session, the ID token's signature checked with the provider's published keys
(joserfc) and its claims as OpenID Connect Core §3.1.3.7 says (Authlib's `CodeIDToken`). The
provider's `sub` names the person; their first sign-in makes them a console user and a member of the
tenant with the provider's role. Every URL goes through the SSRF guard."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import httpx
from authlib.oidc.core import CodeIDToken
from django.contrib.auth import get_user_model
from django.db import transaction
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from apps.common.guarded_http import guarded_client
from apps.common.oauth_metadata import MetadataUnavailable, json_fetch, secure_url, well_known
from apps.common.secrets import SecretUnreadable, secret_decrypt
from apps.common.token_answers import TokenAnswerRefused, token_answer_check
from apps.oauth.models import ExternalAccount, IdentityProvider
from apps.tenants.access import access_get
from apps.tenants.services import membership_set

SESSION_KEY = "gw-idp-sign-in"
_PENDING_SECONDS = 600
_TIMEOUT = 10.0
_ALGORITHMS = ["RS256", "PS256", "ES256", "EdDSA"]
_USERNAME = re.compile(r"[^\w.@+-]")


class SignInFailed(Exception):
    """Signing in through the provider did not work; the message says why, for the person."""


@dataclass(frozen=True)
class _Metadata:
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    auth_methods: tuple[str, ...]


def _metadata(http: httpx.Client, issuer: str) -> _Metadata:
    """The provider's OpenID discovery document (OpenID Connect Discovery §4), about `issuer`."""
    url = well_known(issuer, "openid-configuration", suffix=True)
    status, body, _ = json_fetch(http, "GET", secure_url(url, "the provider's metadata"), "the provider's metadata")
    if status != 200 or not isinstance(body, dict):
        raise MetadataUnavailable(f"the provider publishes no OpenID metadata at {url} (HTTP {status})")
    if body.get("issuer") != issuer:
        raise MetadataUnavailable(f"the provider's metadata names the issuer {str(body.get('issuer'))[:200]!r}, "
                                  f"not {issuer!r}")
    for name in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
        if not isinstance(body.get(name), str):
            raise MetadataUnavailable(f"the provider's metadata has no {name}")
    methods = body.get("token_endpoint_auth_methods_supported")
    return _Metadata(
        secure_url(body["authorization_endpoint"], "the provider's authorization endpoint"),
        secure_url(body["token_endpoint"], "the provider's token endpoint"),
        secure_url(body["jwks_uri"], "the provider's keys"),
        tuple(m for m in methods if isinstance(m, str)) if isinstance(methods, list) else ("client_secret_basic",),
    )


def identity_provider_check(*, issuer: str, allow_private: bool) -> str | None:
    """Why `issuer` cannot be signed in through (None: it can): its metadata must be readable."""
    try:
        with guarded_client(allow_private=allow_private, timeout=_TIMEOUT) as http:
            _metadata(http, secure_url(issuer, "the issuer"))
    except MetadataUnavailable as exc:
        return str(exc)
    return None


def sign_in_start(*, provider: IdentityProvider, redirect_uri: str, next_path: str, session: Any) -> str:
    """The provider's authorization URL for this browser; what the answer is checked against is
    kept in its session. Raises SignInFailed."""
    try:
        with guarded_client(allow_private=provider.tenant.private_networks_allowed, timeout=_TIMEOUT) as http:
            metadata = _metadata(http, provider.issuer)
    except MetadataUnavailable as exc:
        raise SignInFailed(f"the identity provider cannot be reached: {exc}") from None
    state, nonce, verifier = secrets.token_urlsafe(32), secrets.token_urlsafe(32), secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    pending = {k: v for k, v in session.get(SESSION_KEY, {}).items() if v["at"] > time.time() - _PENDING_SECONDS}
    pending[state] = {"tenant": provider.tenant_id, "nonce": nonce, "verifier": verifier, "next": next_path,
                      "at": time.time()}
    session[SESSION_KEY] = dict(list(pending.items())[-5:])  # a few tabs at once, no more
    query = {"response_type": "code", "client_id": provider.client_id, "redirect_uri": redirect_uri,
             "scope": provider.scope, "state": state, "nonce": nonce, "code_challenge": challenge,
             "code_challenge_method": "S256"}
    separator = "&" if "?" in metadata.authorization_endpoint else "?"
    return f"{metadata.authorization_endpoint}{separator}{urlencode(query)}"


def sign_in_complete(*, provider: IdentityProvider, redirect_uri: str, session: Any, params: dict[str, str]) -> tuple[Any, str]:
    """(the person, where they were going) from the provider's answer; raises SignInFailed."""
    pending = session.get(SESSION_KEY, {}).pop(params.get("state", ""), None)
    session.modified = True
    if pending is None or pending["tenant"] != provider.tenant_id or pending["at"] < time.time() - _PENDING_SECONDS:
        raise SignInFailed("this sign-in is unknown or too old (or was started in another browser): start again")
    if "iss" in params and params["iss"] != provider.issuer:
        raise SignInFailed("the answer did not come from the tenant's identity provider")  # RFC 9207 (mix-up)
    if params.get("error"):
        raise SignInFailed(f"the identity provider answered: {params.get('error_description') or params['error']}"[:300])
    if not params.get("code"):
        raise SignInFailed("the answer carries no authorization code")
    allow_private = provider.tenant.private_networks_allowed
    try:
        with guarded_client(allow_private=allow_private, timeout=_TIMEOUT) as http:
            metadata = _metadata(http, provider.issuer)
            tokens = _token_request(http, provider, metadata, {
                "grant_type": "authorization_code", "code": params["code"], "redirect_uri": redirect_uri,
                "code_verifier": pending["verifier"]})
            status, keys, _ = json_fetch(http, "GET", metadata.jwks_uri, "the provider's keys")
    except MetadataUnavailable as exc:
        raise SignInFailed(f"the identity provider cannot be reached: {exc}") from None
    if status != 200 or not isinstance(keys, dict) or not isinstance(keys.get("keys"), list):
        raise SignInFailed(f"the identity provider's keys cannot be read (HTTP {status})")
    claims = _id_token_claims(provider, tokens.get("id_token"), keys, pending["nonce"])
    return _person(provider, claims), pending["next"]


def _token_request(http: httpx.Client, provider: IdentityProvider, metadata: _Metadata, form: dict[str, str]) -> dict[str, Any]:
    try:
        secret = secret_decrypt(provider.client_secret) if provider.client_secret else ""
    except SecretUnreadable:
        raise SignInFailed("the identity provider's client secret cannot be read (the encryption keys changed): "
                           "a tenant admin sets it again") from None
    form = {**form, "client_id": provider.client_id}
    auth: tuple[str, str] | None = None
    method = next((m for m in metadata.auth_methods if m in ("client_secret_basic", "client_secret_post")), "")
    if secret and method == "client_secret_post":
        form["client_secret"] = secret
    elif secret:  # RFC 6749 §2.3.1: form-encoded, then joined
        auth = (quote(provider.client_id, safe=""), quote(secret, safe=""))
    try:
        status, body, _ = json_fetch(http, "POST", metadata.token_endpoint, "the identity provider's token endpoint",
                                     data=form, auth=auth, headers={"accept": "application/json"})  # read capped
        return token_answer_check(status, body)
    except TokenAnswerRefused as exc:
        raise SignInFailed(f"the identity provider refused the sign-in ({exc})") from None


def _id_token_claims(provider: IdentityProvider, id_token: object, keys: dict[str, Any], nonce: str) -> dict[str, Any]:
    if not isinstance(id_token, str):
        raise SignInFailed("the identity provider sent no ID token (is `openid` among the scopes?)")
    try:
        token = jwt.decode(id_token, KeySet.import_key_set(keys), algorithms=_ALGORITHMS)  # type: ignore[arg-type]
        claims = CodeIDToken(
            token.claims, token.header,
            options={"iss": {"essential": True, "value": provider.issuer},
                     "aud": {"essential": True, "value": provider.client_id}},
            params={"nonce": nonce, "client_id": provider.client_id},
        )
        claims.validate(leeway=60)
    except (JoseError, ValueError, TypeError, KeyError) as exc:  # (Authlib's claims raise joserfc's errors)
        raise SignInFailed(f"the identity provider's ID token is not valid here ({type(exc).__name__}: "
                           f"{str(exc)[:200]})") from None
    if not isinstance(claims.get("sub"), str) or not 0 < len(claims["sub"]) <= 255:  # OIDC Core §2: at most 255
        raise SignInFailed("the ID token names no subject of at most 255 characters")
    return dict(claims)


@transaction.atomic
def _person(provider: IdentityProvider, claims: dict[str, Any]) -> Any:
    """The console user the provider's `sub` is: known, or new (and then a member of the tenant with
    the provider's role). A known person who left the tenant is not let back in by signing in, nor
    is a platform admin ever signed in by a tenant's provider."""
    # One first sign-in at a time per provider: two tabs make one person, not two (or an error).
    IdentityProvider.objects.select_for_update().filter(pk=provider.pk).first()
    account = ExternalAccount.objects.select_related("user").filter(
        tenant_id=provider.tenant_id, issuer=provider.issuer, subject=claims["sub"]).first()
    if account is not None:
        user = account.user
        if user.is_superuser or user.is_staff:
            raise SignInFailed("platform admins sign in with their console account, not through a tenant's provider")
        if not user.is_active or not access_get(user=user).sees(provider.tenant_id):
            raise SignInFailed(f"{user.get_username()} is no longer a member of {provider.tenant.name}: ask a tenant "
                               "admin to add you again")
        return user
    user_model = get_user_model()
    room = 150 - len(provider.tenant.slug) - 8  # a username is at most 150 characters: "<slug>.<base>-<n>"
    base = _USERNAME.sub("", str(claims.get("preferred_username") or claims.get("email") or claims["sub"]))[:room]
    username, n = f"{provider.tenant.slug}.{base or 'person'}", 1
    while user_model.objects.filter(username__iexact=username).exists():
        n += 1
        username = f"{provider.tenant.slug}.{base or 'person'}-{n}"
    user = user_model(username=username)
    if isinstance(claims.get("email"), str) and claims.get("email_verified") is True:
        user.email = claims["email"][:254]
    user.set_unusable_password()  # they sign in through the provider only
    user.save()
    ExternalAccount.objects.create(tenant_id=provider.tenant_id, issuer=provider.issuer, subject=claims["sub"], user=user)
    membership_set(tenant=provider.tenant, user=user, role=provider.role)
    return user
