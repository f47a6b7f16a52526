"""The `TokenVerifier` port: JWT access tokens (RS256, ES256, EdDSA) from a tenant's configured
issuers, checked with PyJWT. Keys come from the issuer's PEM public key or its JWKS, fetched once
and kept for `jwks_seconds`; a token naming a key id the cached set lacks fetches the set again (at
most every `refetch_seconds`, so a stream of forged key ids cannot hammer the issuer)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import jwt
from cryptography.hazmat.primitives import serialization

from apps.common.guarded_http import address_refusal, guarded_async_client
from apps.kernel.identity import InvalidToken, TokenIssuerView
from apps.kernel.singleflight import SingleFlight

_LEEWAY_SECONDS = 10  # clock skew between the issuer and this instance
_VERIFIED_MAX = 10_000  # tokens remembered as verified (oldest forgotten first)


def _claims_check(claims: Mapping[str, Any], issuer: TokenIssuerView) -> None:
    """Refuse what PyJWT lets through but the principal cannot stand on. The subject is the
    caller's identity (its budget, its audit rows, its per-identity credential): tokens without one
    would all be the same caller. RFC 7519 dates are JSON numbers; PyJWT converts strings with
    `int()`, so `"exp": "99999999999"` would pass and the verified-token cache would trust it."""
    subject = claims.get(issuer.subject_claim)
    if not isinstance(subject, str) or not subject:
        raise InvalidToken(f"the token has no subject: its {issuer.subject_claim!r} claim must be a non-empty string")
    for name in ("exp", "nbf", "iat"):
        value = claims.get(name)
        if name in claims and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise InvalidToken(f"the token's {name!r} claim must be a number (seconds since 1970), not {value!r:.40}")


class JwtVerifier:
    def __init__(self, *, jwks_seconds: float = 600.0, refetch_seconds: float = 30.0, timeout: float = 5.0) -> None:
        self._jwks_seconds = jwks_seconds
        self._refetch_seconds = refetch_seconds
        self._timeout = timeout
        # (private addresses allowed, JWKS URL) -> (fetched at, kid -> key): a set fetched for a
        # tenant that allows private addresses is never handed to one that does not.
        self._sets: dict[tuple[bool, str], tuple[float, dict[str, Any]]] = {}
        self._pem: dict[str, Any] = {}
        self._flights: SingleFlight[dict[str, Any]] = SingleFlight()
        self._http: dict[bool, httpx.AsyncClient] = {}  # by whether private addresses are allowed
        self._verified: dict[str, tuple[TokenIssuerView, Mapping[str, Any], float]] = {}
        self._failed: dict[tuple[bool, str], float] = {}  # as _sets -> when fetching it last failed

    async def verify(self, token: str, issuers: Sequence[TokenIssuerView]) -> tuple[TokenIssuerView, Mapping[str, Any]]:
        # A client sends the same token with every call until it expires: verify it once. The entry
        # holds only while the token is unexpired and its issuer is still configured as it was.
        cached = self._verified.get(token)
        if cached is not None and cached[2] > time.time() and cached[0] in issuers:
            return cached[0], cached[1]
        issuer, claims = await self._verify(token, issuers)
        if len(self._verified) >= _VERIFIED_MAX:
            self._verified.pop(next(iter(self._verified)))
        self._verified[token] = (issuer, claims, float(claims["exp"]) + _LEEWAY_SECONDS)
        return issuer, claims

    async def _verify(self, token: str, issuers: Sequence[TokenIssuerView]) -> tuple[TokenIssuerView, Mapping[str, Any]]:
        try:
            header = jwt.get_unverified_header(token)
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            raise InvalidToken("the bearer token is neither an API key nor a well-formed JWT") from None
        issuer = next((i for i in issuers if i.issuer == unverified.get("iss")), None)
        if issuer is None:
            raise InvalidToken("the token's issuer is not trusted here")
        if header.get("alg") not in issuer.algorithms:
            raise InvalidToken(f"the token's algorithm {header.get('alg')!r} is not accepted")
        key = await self._key(issuer, header.get("kid"))
        try:
            claims = jwt.decode(
                token, key, algorithms=list(issuer.algorithms), audience=issuer.audience, issuer=issuer.issuer,
                leeway=_LEEWAY_SECONDS, options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidToken("the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise InvalidToken("the token is not valid yet (nbf)") from None
        except jwt.InvalidAudienceError:
            raise InvalidToken("the token is for another audience") from None
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"the token is invalid: {exc}") from None
        except (TypeError, ValueError):  # the key does not fit the algorithm the header names
            raise InvalidToken("the token's algorithm does not fit the issuer's key") from None
        _claims_check(claims, issuer)
        return issuer, claims

    async def _key(self, issuer: TokenIssuerView, kid: object) -> Any:
        if issuer.public_key:
            key = self._pem.get(issuer.public_key)
            if key is None:
                key = self._pem[issuer.public_key] = serialization.load_pem_public_key(issuer.public_key.encode())
            return key
        if not isinstance(kid, str):
            raise InvalidToken("the token names no key id (kid)")
        url = (issuer.allow_private, issuer.jwks_url)
        fetched = self._sets.get(url)
        now = time.monotonic()
        stale = fetched is None or now - fetched[0] > self._jwks_seconds
        missing = fetched is not None and kid not in fetched[1] and now - fetched[0] > self._refetch_seconds
        failed_at = self._failed.get(url)
        resting = failed_at is not None and now - failed_at < self._refetch_seconds  # the issuer just failed
        if resting and fetched is None:
            raise InvalidToken("the issuer's keys cannot be fetched right now")
        if (stale or missing) and not resting:
            keys = await self._flights.run(f"{url[0]:d}{url[1]}", lambda: self._fetch(url))
        else:
            keys = fetched[1] if fetched is not None else {}
        key = keys.get(kid)
        if key is None:
            raise InvalidToken(f"the token's key id {kid!r} is not in the issuer's key set")
        return key

    async def _fetch(self, url: tuple[bool, str]) -> dict[str, Any]:
        private, address = url
        http = self._http.get(private)
        if http is None:
            http = self._http[private] = guarded_async_client(allow_private=private, timeout=self._timeout)
        try:
            response = await http.get(address)
            response.raise_for_status()
            keys = {k.key_id: k.key for k in jwt.PyJWKSet.from_dict(response.json()).keys if k.key_id}
        except (httpx.HTTPError, ValueError, jwt.PyJWTError) as exc:
            # Not asked again for `refetch_seconds`: a stream of unknown key ids must not hammer it.
            self._failed[url] = time.monotonic()
            previous = self._sets.get(url)
            if previous is not None:
                return previous[1]  # keep trusting the last good set while the issuer is unreachable
            refusal = address_refusal(exc)
            if refusal is not None:
                raise InvalidToken(f"the issuer's keys cannot be fetched: its address is not allowed "
                                   f"({refusal.reason})") from None
            raise InvalidToken(f"the issuer's keys cannot be fetched ({type(exc).__name__})") from None
        self._sets[url] = (time.monotonic(), keys)
        return keys
