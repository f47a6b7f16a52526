"""Connecting a person's account at a per-person backend, keeping its tokens fresh, and ending it
(docs/identity.md, "Connected accounts").

A connection is made with the authorization code grant and PKCE (S256), the `resource` indicator
naming the backend (RFC 8707) and `state` bound to the person who started it; the server's `iss`
is checked when it sends one (RFC 9207). Tokens are encrypted at rest; the current access token is
also kept in Redis (encrypted, under `token_cache_key`) for the gateway's instances, which read it
there and ask `connection_token_get` only when it is missing. Whatever changes a connection — a
refresh, an end — happens under its row lock, so one instance at a time refreshes it and an ended
one is not cached again. Only `invalid_grant` (the server ended the grant) or the person leaving
the tenant ends a connection; a server failing for now leaves it standing."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
import time
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cache
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import orjson
import redis
from django.conf import settings
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme

from apps.catalog.models import Backend, EgressCredential
from apps.common.guarded_http import guarded_client
from apps.common.oauth_metadata import MetadataUnavailable, json_fetch
from apps.common.redis import redis_client
from apps.common.secrets import SecretUnreadable, derived_key, secret_decrypt, secret_encrypt
from apps.common.token_answers import TokenAnswerRefused, token_answer_check
from apps.connections.discovery import DiscoveryFailed, discover, register, resource_matches
from apps.connections.models import Connection, PendingConnection, UpstreamServer
from apps.tenants.access import access_get
from apps.tenants.models import Tenant

log = logging.getLogger(__name__)

PENDING_SECONDS = 600
#: A token this close to its end is refreshed before it is used.
REFRESH_AHEAD_SECONDS = 60
_DEFAULT_LIFETIME = 3600
_TIMEOUT = 10.0
#: What a refresh answered with means the grant is over (RFC 6749 §5.2): the person connects again.
_GRANT_ENDED = frozenset({"invalid_grant"})


class ConnectionFailed(Exception):
    """Connecting did not work; the message says why, for the person."""


class NotConnected(Exception):
    """The person has no usable connection to the backend (`reason`: why, when it just ended)."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason or "not connected")
        self.reason = reason


class ConnectionUnavailable(Exception):
    """The connection stands, but no token can be had for it now (the server failing, the gateway's
    client refused there); the message says why. Connecting again would not help."""


@dataclass(frozen=True)
class PersonToken:
    value: str = field(repr=False)
    expires_at: float  # unix time


@cache
def _cache_key_secret() -> bytes:
    return derived_key(settings.SECRET_KEY, b"mcp-gateway person token cache v1")


def token_cache_key(*, backend_id: int, person: str) -> str:
    """Where the current access token of `person` (a username; "" for the gateway's own account) for
    the backend is kept in Redis: a keyed hash names it, so the key reveals no username."""
    digest = hmac.new(_cache_key_secret(), person.encode(), hashlib.sha256).hexdigest()[:32]
    return f"gw:person-token:{backend_id}:{digest}"


def token_cache_read(raw: bytes | str | None) -> PersonToken | None:
    """A cached token as written by `_cache`; None for none, an unreadable one, or one near its end."""
    if raw is None:
        return None
    try:
        value, expires_at = orjson.loads(secret_decrypt(raw.decode() if isinstance(raw, bytes) else raw))
    except (SecretUnreadable, ValueError, TypeError):
        return None
    return PersonToken(value, expires_at) if expires_at - REFRESH_AHEAD_SECONDS > time.time() else None


def _cache(backend_id: int, person: str, token: PersonToken) -> None:
    ttl = int(token.expires_at - REFRESH_AHEAD_SECONDS - time.time())
    if ttl > 0:
        payload = secret_encrypt(orjson.dumps([token.value, token.expires_at]).decode())
        try:
            redis_client().set(token_cache_key(backend_id=backend_id, person=person), payload, ex=ttl)
        except redis.RedisError as exc:  # the instances read the database instead
            log.warning("could not share a person's token in Redis: %s", exc)


def _forget(backend_id: int, person: str) -> None:
    try:
        redis_client().delete(token_cache_key(backend_id=backend_id, person=person))
    except redis.RedisError as exc:
        # The instances may use the shared copy until it expires: say so loudly.
        log.error("could not drop an ended connection's token from Redis (%s): it serves until it expires", exc)


def _person_of(connection: Connection) -> str:
    return connection.user.get_username() if connection.user is not None else ""


def _verifier_challenge() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def upstream_server_ensure(*, backend: Backend, redirect_uri: str) -> UpstreamServer:
    """The backend's authorization server, discovered and registered with now when it is not yet,
    when the credential changed since, or when the backend moved off the resource it was found for;
    raises ConnectionFailed. The redirect URI registered is this request's (the gateway's address),
    kept until the credential changes. When the server, the gateway's client there or the resource
    change, the backend's connections end: their tokens belong to the old ones."""
    with transaction.atomic():
        # One discovery at a time per backend: two first visits register one client, not two.
        Backend.objects.select_for_update().filter(pk=backend.pk).first()
        credential = EgressCredential.objects.filter(backend=backend).first()  # as stored now
        if credential is None or credential.source != EgressCredential.Source.PER_PERSON:
            raise ConnectionFailed(f"backend {backend.name!r} does not take each person's own account")
        url = backend.replicas.order_by("pk").values_list("url", flat=True).first()
        if url is None:
            raise ConnectionFailed(f"backend {backend.name!r} has no URL")
        stored = UpstreamServer.objects.filter(backend=backend).first()
        same_credential = stored is not None and stored.credential_at == credential.updated_at
        if stored is not None and same_credential and resource_matches(stored.resource, url):
            return stored
        redirect = stored.redirect_uri if stored is not None and same_credential else redirect_uri
        server = _discovered(backend, credential, url, redirect)
        if stored is not None and (stored.issuer, stored.client_id, stored.resource) != (
                server["issuer"], server["client_id"], server["resource"]):
            for connection in Connection.objects.filter(backend=backend).select_related("user"):
                _end(connection, stored)
        found, _ = UpstreamServer.objects.update_or_create(backend=backend, defaults=server)
        return found


def _discovered(backend: Backend, credential: EgressCredential, url: str, redirect_uri: str) -> dict[str, Any]:
    allow_private = backend.tenant.private_networks_allowed
    try:
        found = discover(backend_url=url, allow_private=allow_private)
        if credential.client_id:
            registration = UpstreamServer.Registration.PREREGISTERED
            client_id, secret = credential.client_id, secret_decrypt(credential.secret) if credential.secret else ""
            client_auth = credential.client_auth if secret else "none"
        elif found.metadata_documents and redirect_uri.startswith("https://"):
            # The server fetches the document at the client id (which must be https): nothing to register.
            registration = UpstreamServer.Registration.METADATA_DOCUMENT
            client_id, secret, client_auth = client_document_url(backend=backend, redirect_uri=redirect_uri), "", "none"
        else:
            registration = UpstreamServer.Registration.DYNAMIC
            client_id, secret, client_auth = register(
                found=found, redirect_uri=redirect_uri, allow_private=allow_private,
                client_name=f"MCP gateway ({backend.tenant.name})")
    except DiscoveryFailed as exc:
        raise ConnectionFailed(f"the gateway cannot reach {backend.name}'s sign-in: {exc}") from None
    except SecretUnreadable:
        raise ConnectionFailed(f"the client secret of {backend.name}'s credential cannot be read (the encryption "
                               "keys changed): set the credential again") from None
    return {
        "credential_at": credential.updated_at, "resource": found.resource, "issuer": found.issuer,
        "authorization_endpoint": found.authorization_endpoint, "token_endpoint": found.token_endpoint,
        "revocation_endpoint": found.revocation_endpoint, "scope": credential.scope or found.scope,
        "iss_parameter": found.iss_parameter, "registration": registration, "client_id": client_id,
        "client_secret": secret_encrypt(secret) if secret else "", "client_auth": client_auth,
        "redirect_uri": redirect_uri,
    }


def client_document_url(*, backend: Backend, redirect_uri: str) -> str:
    """The URL of the gateway's client metadata document for the backend, at the gateway's address
    that `redirect_uri` is at: the client id an authorization server that takes such documents knows
    the gateway by."""
    parts = urlsplit(redirect_uri)
    path = reverse("connections-client-document", kwargs={"tenant": backend.tenant.slug, "backend_id": backend.pk})
    return f"{parts.scheme}://{parts.netloc}{path}"


def client_document(*, tenant_slug: str, backend_id: int) -> dict[str, Any] | None:
    """The gateway's client metadata document for the backend (draft-ietf-oauth-client-id-metadata-document),
    as the server that identifies it by its URL found it; None unless the gateway is known there so."""
    server = UpstreamServer.objects.select_related("backend__tenant").filter(
        backend_id=backend_id, backend__tenant__slug=tenant_slug,
        registration=UpstreamServer.Registration.METADATA_DOCUMENT).first()
    if server is None:
        return None
    return {"client_id": server.client_id, "client_name": f"MCP gateway ({server.backend.tenant.name})",
            "redirect_uris": [server.redirect_uri], "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"], "token_endpoint_auth_method": "none"}


def connection_start(*, backend: Backend, user: Any, redirect_uri: str, for_gateway: bool = False,
                     manages_tenant: bool = False, next_path: str = "") -> str:
    """The authorization URL that connects `user`'s account at `backend` (the gateway's own,
    `for_gateway`: for tenant admins only, `manages_tenant`); raises ConnectionFailed. `next_path`:
    where the person goes when it is done (a path of this site; anything else is dropped)."""
    if for_gateway and not manages_tenant:
        raise ConnectionFailed("only tenant admins connect the gateway's own account")
    if len(next_path) > 500 or not url_has_allowed_host_and_scheme(next_path, allowed_hosts=None):
        next_path = ""
    server = upstream_server_ensure(backend=backend, redirect_uri=redirect_uri)
    PendingConnection.objects.filter(created_at__lt=timezone.now() - timedelta(seconds=PENDING_SECONDS)).delete()
    state = secrets.token_urlsafe(32)
    verifier, challenge = _verifier_challenge()
    PendingConnection.objects.create(
        state_hash=hashlib.sha256(state.encode()).hexdigest(), backend=backend, user=user, for_gateway=for_gateway,
        code_verifier=secret_encrypt(verifier), next_path=next_path,
    )
    query = {"response_type": "code", "client_id": server.client_id, "redirect_uri": server.redirect_uri,
             "state": state, "code_challenge": challenge, "code_challenge_method": "S256",
             "resource": server.resource}
    if server.scope:
        query["scope"] = server.scope
    separator = "&" if "?" in server.authorization_endpoint else "?"
    return f"{server.authorization_endpoint}{separator}{urlencode(query)}"


def connection_complete(*, tenant: Tenant, user: Any, manages_tenant: bool, state: str, code: str, iss: str | None,
                        error: str = "") -> PendingConnection:
    """Finish what `connection_start` began, from the server's answer at the redirect URI: the
    connection is stored (replacing and revoking the person's earlier one) and its token shared.
    Returns the request it answered; raises ConnectionFailed."""
    with transaction.atomic():
        pending = (PendingConnection.objects.select_for_update().select_related("backend__tenant")
                   .filter(state_hash=hashlib.sha256(state.encode()).hexdigest()).first())
        if pending is not None:
            pending.delete()  # good once, whatever comes of it
    if (pending is None or pending.backend.tenant_id != tenant.pk
            or pending.created_at < timezone.now() - timedelta(seconds=PENDING_SECONDS)):
        raise ConnectionFailed("this sign-in is unknown or too old: start connecting again")
    if pending.user_id != user.pk:
        raise ConnectionFailed("this sign-in was started by someone else: start connecting again")
    if pending.for_gateway and not manages_tenant:
        raise ConnectionFailed("only tenant admins connect the gateway's own account")
    server = UpstreamServer.objects.filter(backend=pending.backend).first()
    credential = EgressCredential.objects.filter(backend=pending.backend).first()
    if server is None or credential is None or credential.source != EgressCredential.Source.PER_PERSON:
        raise ConnectionFailed("the backend's sign-in changed meanwhile: start connecting again")
    if (iss is not None and iss != server.issuer) or (iss is None and server.iss_parameter):
        # RFC 9207: the answer must come from the server the request went to (mix-up).
        raise ConnectionFailed("the answer did not come from the backend's authorization server")
    if error:
        raise ConnectionFailed(f"{pending.backend.name}'s sign-in answered: {error[:200]}")
    if not code:
        raise ConnectionFailed("the answer carries no authorization code")
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": server.redirect_uri,
            "code_verifier": secret_decrypt(pending.code_verifier), "resource": server.resource}
    body = _token_request(server, form, pending.backend.tenant.private_networks_allowed)
    owner = None if pending.for_gateway else user
    replaced = Connection(backend=pending.backend, user=owner)
    try:
        with transaction.atomic():
            earlier = (Connection.objects.select_for_update(of=("self",)).order_by()
                       .filter(backend=pending.backend, user=owner).first())
            if earlier is not None:
                replaced.access_token, replaced.refresh_token = earlier.access_token, earlier.refresh_token
                earlier.delete()
            connection = Connection(backend=pending.backend, user=owner, connected_by=user)
            token = _apply(connection, body)
            connection.save()
            _cache(pending.backend_id, _person_of(connection), token)
    except IntegrityError:
        raise ConnectionFailed("the account was being connected twice at once: look at Connected accounts") from None
    if replaced.access_token:
        _revoke(replaced, server)
    return pending


def connection_token_get(*, backend_id: int, person: str) -> PersonToken:
    """The current access token of `person` ("" for the gateway's own account) for the backend,
    refreshed first when it is near its end; raises NotConnected (no connection, or it just ended)
    or ConnectionUnavailable (it stands, but no token can be had now)."""
    lookup = {"user__isnull": True} if person == "" else {"user__username": person}
    with transaction.atomic():
        # (no ordering: it joins the nullable user, which FOR UPDATE cannot lock)
        connection = (Connection.objects.select_for_update(of=("self",)).order_by()
                      .select_related("backend__tenant", "user").filter(backend_id=backend_id, **lookup).first())
        if connection is None:
            raise NotConnected()
        token, ended = _current_or_refreshed(connection)
        if token is not None:
            _cache(backend_id, person, token)  # under the lock: an end waits for it, then drops it
        else:
            connection.delete()  # committed with the block: the exception follows it
    if token is None:
        _forget(backend_id, person)
        raise NotConnected(ended)
    return token


def _current_or_refreshed(connection: Connection) -> tuple[PersonToken | None, str]:
    """(the connection's token, refreshed when near its end; or None and why the connection ends).
    Raises ConnectionUnavailable for a refresh that fails for now (the connection stands)."""
    if connection.user is not None and not (connection.user.is_active
                                            and access_get(user=connection.user).sees(connection.backend.tenant_id)):
        return None, "its person has left the tenant"
    try:
        expires_at = connection.expires_at.timestamp() if connection.expires_at else time.time() + _DEFAULT_LIFETIME
        token = PersonToken(secret_decrypt(connection.access_token), expires_at)
        refresh = secret_decrypt(connection.refresh_token) if connection.refresh_token else ""
    except SecretUnreadable:
        return None, "its tokens were encrypted with keys no longer configured"
    if token.expires_at - REFRESH_AHEAD_SECONDS > time.time():
        return token, ""
    server = UpstreamServer.objects.filter(backend_id=connection.backend_id).first()
    if not refresh or server is None:
        return None, "the account's access expired"
    try:
        body = _token_request(server, {"grant_type": "refresh_token", "refresh_token": refresh, "resource": server.resource},
                              connection.backend.tenant.private_networks_allowed)
    except _Refused as exc:
        if exc.error in _GRANT_ENDED:
            return None, "the account's authorization server ended the connection"
        if exc.error in ("invalid_client", "unauthorized_client"):
            raise ConnectionUnavailable(f"{server.issuer} refused the gateway's client ({exc.error}): a tenant admin "
                                        "sets the backend's credential again to register it anew") from None
        raise ConnectionUnavailable(f"refreshing the account's access failed for now ({exc})") from None
    except ConnectionFailed as exc:
        raise ConnectionUnavailable(f"refreshing the account's access failed for now ({exc})") from None
    token = _apply(connection, body, refresh=refresh)
    connection.refreshed_at = timezone.now()
    connection.save()
    return token, ""


def connection_delete(*, connection: Connection) -> None:
    """End the connection: its tokens are revoked at the server when it offers revocation (RFC
    7009, best effort), deleted, and dropped from Redis (every instance stops using them within
    GATEWAY_PERSON_TOKEN_FRESH_SECONDS)."""
    server = UpstreamServer.objects.filter(backend_id=connection.backend_id).first()
    with transaction.atomic():
        # A refresh under way finishes first, and its result is dropped with the rest.
        locked = Connection.objects.select_for_update(of=("self",)).order_by().filter(pk=connection.pk).first()
        if locked is None:
            return
        _end(locked, server, person=_person_of(connection))


def _end(connection: Connection, server: UpstreamServer | None, *, person: str | None = None) -> None:
    if server is not None:
        _revoke(connection, server)
    connection.delete()
    _forget(connection.backend_id, _person_of(connection) if person is None else person)


def _revoke(connection: Connection, server: UpstreamServer) -> None:
    if not server.revocation_endpoint:
        return
    for kind, stored in (("refresh_token", connection.refresh_token), ("access_token", connection.access_token)):
        if not stored:
            continue
        try:
            _post(server, server.revocation_endpoint, {"token": secret_decrypt(stored), "token_type_hint": kind},
                  connection.backend.tenant.private_networks_allowed)
        except (ConnectionFailed, SecretUnreadable) as exc:
            log.info("revoking a token of %s at %s failed: %s", connection, server.issuer, exc)


def _apply(connection: Connection, body: dict[str, Any], *, refresh: str = "") -> PersonToken:
    """Store a token answer on the connection (a refresh token not rotated stays the same)."""
    lifetime = body.get("expires_in")
    if not isinstance(lifetime, int | float) or isinstance(lifetime, bool) or lifetime <= 0:
        lifetime = _DEFAULT_LIFETIME
    expires_at = time.time() + float(lifetime)
    connection.access_token = secret_encrypt(body["access_token"])
    new_refresh = body.get("refresh_token") if isinstance(body.get("refresh_token"), str) else refresh
    connection.refresh_token = secret_encrypt(new_refresh) if new_refresh else ""
    connection.expires_at = timezone.now() + timedelta(seconds=float(lifetime))
    if isinstance(body.get("scope"), str):
        connection.scope = body["scope"][:500]
    return PersonToken(body["access_token"], expires_at)


class _Refused(ConnectionFailed):
    """The token endpoint's refusal, with its `error` code."""

    def __init__(self, message: str, error: str) -> None:
        super().__init__(message)
        self.error = error


def _token_request(server: UpstreamServer, form: dict[str, str], allow_private: bool) -> dict[str, Any]:
    status, body = _post(server, server.token_endpoint, form, allow_private)
    try:
        return token_answer_check(status, body)
    except TokenAnswerRefused as exc:
        raise _Refused(str(exc), exc.error) from None


def _post(server: UpstreamServer, url: str, form: dict[str, str], allow_private: bool) -> tuple[int, Any]:
    """POST `form` to one of the server's endpoints as the gateway's client there."""
    # client_id goes in the form whatever the authentication: some servers look for it only there.
    form = {**form, "client_id": server.client_id}
    auth: tuple[str, str] | None = None
    try:
        secret = secret_decrypt(server.client_secret) if server.client_secret else ""
    except SecretUnreadable:
        raise ConnectionFailed("the gateway's client secret at the backend's authorization server cannot be read "
                               "(the encryption keys changed): set the backend's credential again") from None
    if server.client_auth == "client_secret_basic" and secret:  # RFC 6749 §2.3.1: form-encoded, then joined
        auth = (quote(server.client_id, safe=""), quote(secret, safe=""))
    elif secret:
        form["client_secret"] = secret
    try:
        with guarded_client(allow_private=allow_private, timeout=_TIMEOUT) as http:
            # Read capped: the answer is the server's to make as large as it likes.
            status, body, _ = json_fetch(http, "POST", url, "the answer", data=form, auth=auth,
                                         headers={"accept": "application/json"})
    except MetadataUnavailable as exc:
        raise ConnectionFailed(str(exc)) from None
    return status, body
