"""Egress credentials on the hot path: the `Egress` port of each backend, built per configuration
snapshot with its secrets decrypted once, and the OAuth token cache shared by every gateway
instance (client-credentials tokens, and tokens exchanged for callers' own, RFC 8693).

Inbound credentials never reach a backend: requests to backends carry only headers the gateway
builds, and the credential headers come from here."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
import time
from dataclasses import dataclass, field, replace
from urllib.parse import quote

import httpx
import orjson
import redis
import redis.asyncio
from django.conf import settings
from django.urls import reverse

from apps.catalog.models import Backend, EgressCredential
from apps.catalog.openapi import Credential
from apps.catalog.selectors import egress_credential_applied, egress_schemes
from apps.common.guarded_http import address_refusal, guarded_async_client
from apps.common.secrets import SecretUnreadable, secret_decrypt, secret_encrypt
from apps.common.token_answers import TokenAnswerRefused, token_answer_read
from apps.connections.discovery import resource_matches
from apps.gateway.adapters.person_tokens import PersonTokens
from apps.gateway.pipeline.ports import ConnectionRequired, CredentialUnavailable
from apps.kernel.identity import Principal
from apps.kernel.singleflight import SingleFlight

log = logging.getLogger(__name__)

_Headers = tuple[tuple[str, str], ...]


CLIENT_CREDENTIALS = "client_credentials"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
_ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
#: What an exchange may issue to be sent as a bearer token (RFC 8693 §3).
_ISSUED_TYPES = frozenset({_ACCESS_TOKEN_TYPE, "urn:ietf:params:oauth:token-type:jwt"})


@dataclass(frozen=True, slots=True)
class OAuthClient:
    """An OAuth 2.0 client the gateway obtains access tokens as: with the client credentials grant
    (RFC 6749 §4.4), or by exchanging `subject_token`, a caller's access token, for one
    (`grant` TOKEN_EXCHANGE, RFC 8693)."""

    token_url: str
    client_id: str
    client_secret: str = field(repr=False)
    scope: str = ""
    audience: str = ""
    client_auth: str = "client_secret_basic"
    #: Whether the token endpoint may be at a private address (the backend's tenant's setting).
    allow_private: bool = False
    grant: str = CLIENT_CREDENTIALS
    subject_token: str = field(default="", repr=False)


@dataclass(frozen=True, slots=True)
class _Token:
    value: str = field(repr=False)
    expires_at: float  # unix time
    refresh_at: float  # from then on one instance fetches the next one


#: Releases the refresh lock only if this instance still holds it (it may have expired and been
#: taken by another instance meanwhile).
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
#: Tokens (and failures) kept in this process: one per client, and one per caller's token for an
#: exchange; past this many, the expired go, then the oldest.
_KEPT_MAX = 10_000
_MAX_LIFETIME = 86400.0  # a token said to live longer is fetched again daily anyway


def _token_key(key: str) -> str:
    """A credential's shared token; its lock and remembered failure share its hash tag (one slot)."""
    return f"gw:oauth:{{{key}}}"


def _lock_key(key: str) -> str:
    return f"gw:oauth:{{{key}}}:lock"


def _error_key(key: str) -> str:
    return f"gw:oauth:{{{key}}}:error"


class OAuthTokens:
    """Access tokens per OAuth client, cached in this process and in Redis (encrypted) for every
    instance. A token is fetched again a little before it expires, by one instance only: the one
    that takes the refresh lock in Redis; the others keep using the current token meanwhile, or,
    when there is none, wait for the new one. Without Redis each instance fetches its own.

    A token endpoint that fails is not asked again for `failure_seconds` by any instance: callers
    get the same error without adding to the load. `key` keys the cache names (an HMAC of the
    client's settings, secret included, so that Redis key names reveal nothing of it).

    `people` keeps each person's own tokens for `per_person` backends (`PersonTokens`)."""

    def __init__(
        self,
        client: redis.asyncio.Redis | None,
        *,
        key: bytes = b"",
        timeout: float = 10.0,
        lock_seconds: float = 15.0,
        failure_seconds: float = 5.0,
        default_lifetime: float = 300.0,
        poll_seconds: float = 0.025,
    ) -> None:
        self._redis = client
        self._key = key
        self._timeout = min(timeout, lock_seconds * 0.8)  # a fetch ends well before its lock expires
        self._lock_seconds = lock_seconds
        self._failure_seconds = failure_seconds
        self._default_lifetime = default_lifetime
        self._poll = poll_seconds
        self._tokens: dict[str, _Token] = {}
        self._failures: dict[str, tuple[float, str]] = {}  # cache id -> (until, error)
        self._flights: SingleFlight[_Token] = SingleFlight()
        self._refreshing: set[str] = set()
        self._http: dict[bool, httpx.AsyncClient] = {}  # by whether private addresses are allowed
        self._release = client.register_script(_RELEASE) if client is not None else None
        self.fetches = 0  # token endpoint requests made by this process (for tests and metrics)
        self.people = PersonTokens(client, fresh_seconds=settings.GATEWAY_PERSON_TOKEN_FRESH_SECONDS)

    def cache_id(self, oauth: OAuthClient) -> str:
        """Names the token in the shared cache: any change of the client (a rotated secret too)
        names another token, so no instance keeps using one obtained with the old settings."""
        parts = (oauth.token_url, oauth.client_id, oauth.client_secret, oauth.scope, oauth.audience, oauth.client_auth,
                 "private" if oauth.allow_private else "", oauth.grant, oauth.subject_token)
        return hmac.new(self._key, "\x00".join(parts).encode(), hashlib.sha256).hexdigest()[:32]

    async def token(self, oauth: OAuthClient) -> str:
        """A valid access token for `oauth`; raises CredentialUnavailable."""
        key = self.cache_id(oauth)
        token = self._tokens.get(key)
        now = time.time()
        if token is not None and now < token.expires_at:
            if now >= token.refresh_at and key not in self._refreshing:
                self._refreshing.add(key)
                asyncio.get_running_loop().create_task(self._refresh(oauth, key, token))
            return token.value
        failed = self._failures.get(key)
        if failed is not None and now < failed[0]:
            raise CredentialUnavailable(failed[1])
        return (await self._flights.run(key, lambda: self._obtain(oauth, key, stale=None))).value

    async def _refresh(self, oauth: OAuthClient, key: str, stale: _Token) -> None:
        try:
            # A flight of its own: a caller whose token has expired meanwhile must not be handed
            # the stale one this refresh may fall back to.
            await self._flights.run(f"{key}:refresh", lambda: self._obtain(oauth, key, stale=stale))
        except CredentialUnavailable as exc:
            log.warning("refreshing the access token from %s failed: %s", oauth.token_url, exc)
            # Try again when the failure has passed, still before the current token expires.
            self._tokens[key] = _Token(stale.value, stale.expires_at, time.time() + self._failure_seconds)
        finally:
            self._refreshing.discard(key)

    async def _obtain(self, oauth: OAuthClient, key: str, *, stale: _Token | None) -> _Token:
        """A fresh token from the shared cache, else fetched under the fleet-wide lock. `stale`: the
        still-valid token a background refresh replaces (kept while another instance refreshes)."""
        if self._redis is None:
            return self._keep(key, await self._fetch_remembering(oauth, key))
        try:
            shared = await self._shared(key)
            if shared is not None and (stale is None or shared.refresh_at > time.time()):
                return self._keep(key, shared)
            deadline = time.monotonic() + self._lock_seconds
            owner = secrets.token_hex(8)
            while True:
                failure = await self._redis.get(_error_key(key))
                if failure is not None:
                    self._failed(key, failure.decode())
                    raise CredentialUnavailable(failure.decode())
                if await self._redis.set(_lock_key(key), owner, nx=True, px=int(self._lock_seconds * 1000)):
                    shared = await self._shared(key)  # another instance may have just finished
                    if shared is None or shared.refresh_at <= time.time():
                        shared = await self._fetch_and_share(oauth, key, owner)
                    else:
                        await self._release(keys=[_lock_key(key)], args=[owner])
                    return self._keep(key, shared)
                if stale is not None and stale.expires_at > time.time():
                    # Another instance refreshes; the current token serves, and is looked at again soon.
                    return self._keep(key, _Token(stale.value, stale.expires_at, min(stale.expires_at, time.time() + 1)))
                await asyncio.sleep(self._poll)
                shared = await self._shared(key)
                if shared is not None:
                    return self._keep(key, shared)
                if time.monotonic() > deadline:
                    raise CredentialUnavailable("no access token: another gateway instance is still fetching one")
        except (redis.RedisError, OSError) as exc:
            log.warning("OAuth token cache unreachable (%s); fetching a token for this instance alone", exc)
            return self._keep(key, await self._fetch_remembering(oauth, key))

    def _keep(self, key: str, token: _Token) -> _Token:
        if len(self._tokens) >= _KEPT_MAX:  # clients come and go with configuration changes, callers with time
            now = time.time()
            self._tokens = {k: t for k, t in self._tokens.items() if t.expires_at > now}
            if len(self._tokens) >= _KEPT_MAX:
                self._tokens = dict(list(self._tokens.items())[_KEPT_MAX // 2:])
        self._tokens[key] = token
        self._failures.pop(key, None)
        return token

    def _failed(self, key: str, error: str) -> None:
        if len(self._failures) >= _KEPT_MAX:
            now = time.time()
            self._failures = {k: f for k, f in self._failures.items() if f[0] > now}
            if len(self._failures) >= _KEPT_MAX:
                self._failures.clear()
        self._failures[key] = (time.time() + self._failure_seconds, error)

    async def _shared(self, key: str) -> _Token | None:
        assert self._redis is not None
        raw = await self._redis.get(_token_key(key))
        if raw is None:
            return None
        try:
            value, expires_at, refresh_at = orjson.loads(secret_decrypt(raw.decode()))
        except (SecretUnreadable, ValueError, TypeError):
            return None  # written with other keys; fetch a new one
        return _Token(value, expires_at, refresh_at) if expires_at > time.time() else None

    async def _fetch_remembering(self, oauth: OAuthClient, key: str) -> _Token:
        try:
            return await self._fetch(oauth)
        except CredentialUnavailable as exc:
            self._failed(key, str(exc))
            raise

    async def _fetch_and_share(self, oauth: OAuthClient, key: str, owner: str) -> _Token:
        assert self._redis is not None and self._release is not None
        lock = _lock_key(key)
        try:
            token = await self._fetch_remembering(oauth, key)
        except CredentialUnavailable as exc:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.set(_error_key(key), str(exc), px=int(self._failure_seconds * 1000))
                # Held on through the failure: no instance asks the endpoint again before it passes.
                pipe.pexpire(lock, int(self._failure_seconds * 1000))
                await pipe.execute()
            raise
        payload = secret_encrypt(orjson.dumps([token.value, token.expires_at, token.refresh_at]).decode())
        ttl = max(1, int((token.expires_at - time.time()) * 1000))
        await self._redis.set(_token_key(key), payload, px=ttl)
        await self._release(keys=[lock], args=[owner])
        return token

    async def _fetch(self, oauth: OAuthClient) -> _Token:
        """Ask the token endpoint (the client's grant); raises CredentialUnavailable."""
        form = {"grant_type": oauth.grant}
        if oauth.grant == TOKEN_EXCHANGE:
            form |= {"subject_token": oauth.subject_token, "subject_token_type": _ACCESS_TOKEN_TYPE,
                     "requested_token_type": _ACCESS_TOKEN_TYPE}
        if oauth.scope:
            form["scope"] = oauth.scope
        if oauth.audience:
            form["audience"] = oauth.audience
        auth: tuple[str, str] | None = None
        if oauth.client_auth == "client_secret_post":
            form |= {"client_id": oauth.client_id, "client_secret": oauth.client_secret}
        else:  # RFC 6749 §2.3.1: both parts form-encoded before they are joined
            auth = (quote(oauth.client_id, safe=""), quote(oauth.client_secret, safe=""))
        http = self._http.get(oauth.allow_private)
        if http is None:
            http = self._http[oauth.allow_private] = guarded_async_client(
                allow_private=oauth.allow_private, timeout=self._timeout
            )
        self.fetches += 1
        started = time.time()
        try:
            async with asyncio.timeout(self._timeout):
                response = await http.post(
                    oauth.token_url, data=form, auth=auth, headers={"Accept": "application/json"}
                )
        except (httpx.HTTPError, TimeoutError) as exc:
            refusal = address_refusal(exc)
            if refusal is not None:
                raise CredentialUnavailable(f"the token endpoint's address is not allowed ({refusal.reason})") from None
            raise CredentialUnavailable(f"the token endpoint cannot be reached ({type(exc).__name__})") from None
        try:
            body = token_answer_read(response.status_code, response.content)
        except TokenAnswerRefused as exc:
            raise CredentialUnavailable(str(exc)) from None
        token = body["access_token"]
        issued = body.get("issued_token_type", _ACCESS_TOKEN_TYPE)
        if oauth.grant == TOKEN_EXCHANGE and issued not in _ISSUED_TYPES:
            raise CredentialUnavailable(f"the token endpoint issued a {str(issued)[:100]!r}, not an access token")
        lifetime = body.get("expires_in")
        if not isinstance(lifetime, int | float) or isinstance(lifetime, bool) or lifetime <= 0:
            lifetime = self._default_lifetime
        lifetime = min(float(lifetime), _MAX_LIFETIME)
        # Fetch the next one a little ahead: a fifth of the lifetime, at most a minute.
        return _Token(token, started + lifetime, started + lifetime - min(60.0, lifetime / 5))


@dataclass(frozen=True, slots=True)
class _Sent:
    credential: Credential
    headers: _Headers  # for MCP backends: the credential's header, when it goes in one


class EgressPlan:
    """The `Egress` port of one backend as of one configuration snapshot: what each caller's
    requests carry. `placement` (kind, name, username) says where the value goes; the value is
    fixed (`fixed`), per caller (`by_key`, `by_subject` by (issuer, subject) with "" for any issuer,
    `by_team`, then `fixed` as the default), or an OAuth access token (`oauth`): the client's own, or,
    with `exchange_issuer`, the caller's token of that issuer exchanged for one (the gateway's own
    requests then carry the client's own token); or, with `connect_path`, each person's own access
    token (`tokens.people`; the gateway's own requests carry its own account's, when one is connected)."""

    def __init__(
        self,
        *,
        backend: str,
        placement: tuple[str, str, str],
        fixed: str | None = None,
        by_key: dict[str, str] | None = None,
        by_subject: dict[tuple[str, str], str] | None = None,
        by_team: dict[str, str] | None = None,
        oauth: OAuthClient | None = None,
        tokens: OAuthTokens | None = None,
        exchange_issuer: str = "",
        backend_id: int = 0,
        per_person: bool = False,
        moved: bool = False,
    ) -> None:
        self._backend = backend
        self._kind, self._name, self._username = placement
        self._per_identity = by_key is not None
        self._by_key = {name: self._sent(v) for name, v in (by_key or {}).items()}
        self._by_subject = {name: self._sent(v) for name, v in (by_subject or {}).items()}
        self._by_team = {name: self._sent(v) for name, v in (by_team or {}).items()}
        self._fixed = self._sent(fixed) if fixed else None
        self._oauth = oauth
        self._tokens = tokens
        self._exchange_issuer = exchange_issuer
        self._backend_id = backend_id
        self._per_person = per_person
        self._moved = moved
        self._sent_tokens: dict[str, _Sent] = {}  # built once per token, not per call
        self.per_caller = self._per_identity or bool(exchange_issuer) or per_person

    def _sent(self, value: str) -> _Sent:
        credential = Credential(kind=self._kind, value=value, name=self._name, username=self._username)  # type: ignore[arg-type]
        header = credential.header()
        return _Sent(credential, (header,) if header is not None else ())

    async def _choose(self, principal: Principal | None) -> _Sent | None:
        if self._per_person:
            assert self._tokens is not None
            token = await self._person_token(principal, self._tokens.people)
            return None if token is None else self._sent_token(token)
        if self._oauth is not None:
            assert self._tokens is not None
            return self._sent_token(await self._tokens.token(self._client_for(principal, self._oauth)))
        if not self._per_identity or principal is None:
            return self._fixed
        if principal.issuer is None:
            found = self._by_key.get(principal.key_name)
        else:
            found = self._by_subject.get((principal.issuer, principal.key_name)) or self._by_subject.get(
                ("", principal.key_name)
            )
        if found is None and principal.team is not None:
            found = self._by_team.get(principal.team)
        if found is None:
            found = self._fixed
        if found is None:
            raise CredentialUnavailable(f"no credential for {principal.label} is configured on backend {self._backend!r}")
        return found

    def _sent_token(self, token: str) -> _Sent:
        sent = self._sent_tokens.get(token)
        if sent is None:
            try:
                sent = self._sent(token)
            except ValueError:  # checked when fetched; this guards the header all the same
                raise CredentialUnavailable("the access token cannot be sent in a header") from None
            if len(self._sent_tokens) >= 256:
                self._sent_tokens.clear()
            self._sent_tokens[token] = sent
        return sent

    async def _person_token(self, principal: Principal | None, people: PersonTokens) -> str | None:
        """The person's own access token; None for the gateway's own requests when no account is
        connected for them (they go without); raises ConnectionRequired for a caller who has none."""
        if principal is not None and not principal.person:
            raise ConnectionRequired(
                f"backend {self._backend!r} is called with each person's own account, and {principal.label} is no "
                "person: sign in through the gateway (OAuth) or use a key bound to a person",
                backend=self._backend, path=self._connect_path(principal))
        if self._moved:
            if principal is None:
                return None
            raise ConnectionRequired(f"backend {self._backend!r} moved off the address its sign-in was found for",
                                     backend=self._backend, path=self._connect_path(principal))
        token, ended = await people.token(self._backend_id, principal.person if principal is not None else "")
        if token is None and principal is not None:
            why = f" ({ended})" if ended else ""
            raise ConnectionRequired(f"{principal.person} has no connected account at backend {self._backend!r}{why}",
                                     backend=self._backend, path=self._connect_path(principal))
        return token

    def _connect_path(self, principal: Principal) -> str:
        return reverse("console:account-connect", args=[principal.tenant_slug, self._backend_id])

    def _client_for(self, principal: Principal | None, oauth: OAuthClient) -> OAuthClient:
        """The client as it asks for `principal`'s token: with their token to exchange, when the
        backend takes exchanged tokens; raises CredentialUnavailable for a caller without one."""
        if not self._exchange_issuer or principal is None:
            return oauth
        if principal.issuer != self._exchange_issuer or not principal.token:
            # No other credential is ever sent to the token endpoint: it is the issuer's.
            raise CredentialUnavailable(
                f"backend {self._backend!r} is called with the caller's own access token from {self._exchange_issuer}, "
                f"exchanged; {principal.label} has none: call with a token of that issuer"
            )
        return replace(oauth, grant=TOKEN_EXCHANGE, subject_token=principal.token)

    async def credential(self, principal: Principal | None) -> Credential | None:
        """What requests on behalf of `principal` carry (None: the gateway's own requests); None
        when they carry nothing. Raises CredentialUnavailable."""
        sent = await self._choose(principal)
        return None if sent is None else sent.credential

    async def headers(self, principal: Principal | None) -> _Headers:
        sent = await self._choose(principal)
        return () if sent is None else sent.headers


def egress_plan_build(*, backend: Backend, tokens: OAuthTokens | None, allow_private: bool) -> EgressPlan | None:
    """The backend's plan (its `credential`, its identities, tenant secret and active spec fetched),
    or None when it has no credential; `allow_private`: its tenant allows private addresses. A credential that cannot be used (a secret encrypted with
    keys no longer configured) is logged and its requests go out without one: the backend answers
    401 and the caller sees that."""
    stored: EgressCredential | None = getattr(backend, "credential", None)
    if stored is None:
        return None
    kind, name, _ = egress_credential_applied(
        kind=stored.kind, name=stored.name, schemes=egress_schemes(backend=backend, source=stored.source)
    )
    placement = (kind, name, stored.username)
    try:
        secret = secret_decrypt(stored.secret) if stored.secret else None
        source = stored.source
        if source == EgressCredential.Source.STATIC:
            return EgressPlan(backend=backend.name, placement=placement, fixed=secret)
        if source == EgressCredential.Source.TENANT_SECRET:
            assert stored.tenant_secret is not None
            return EgressPlan(backend=backend.name, placement=placement, fixed=secret_decrypt(stored.tenant_secret.value))
        if source == EgressCredential.Source.PER_IDENTITY:
            mapped: dict[str, dict[str, str]] = {"key": {}, "team": {}}
            subjects: dict[tuple[str, str], str] = {}
            for identity in stored.identities.all():
                if identity.subject_kind == "subject":
                    subjects[(identity.issuer, identity.subject_name)] = secret_decrypt(identity.secret)
                else:
                    mapped[identity.subject_kind][identity.subject_name] = secret_decrypt(identity.secret)
            return EgressPlan(backend=backend.name, placement=placement, fixed=secret, by_key=mapped["key"],
                              by_subject=subjects, by_team=mapped["team"])
        if source == EgressCredential.Source.PER_PERSON:
            # People's tokens are for the resource their server was found for: a backend moved off it
            # gets none (its connect page finds the server again, which ends the old connections).
            server = getattr(backend, "upstream_server", None)
            moved = server is not None and not all(
                resource_matches(server.resource, replica.url) for replica in backend.replicas.all())
            return EgressPlan(backend=backend.name, placement=("bearer", "", ""), tokens=tokens or OAuthTokens(None),
                              backend_id=backend.pk, per_person=True, moved=moved)
        oauth = OAuthClient(stored.token_url, stored.client_id, secret or "", stored.scope, stored.audience,
                            stored.client_auth, allow_private)
        exchange = stored.subject_issuer if source == EgressCredential.Source.TOKEN_EXCHANGE else ""
        return EgressPlan(backend=backend.name, placement=placement, oauth=oauth, tokens=tokens,
                          exchange_issuer=exchange)
    except (SecretUnreadable, ValueError) as exc:
        log.error("backend %s: unusable credential, requests go out without one: %s", backend, exc)
        return None

