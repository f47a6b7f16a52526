"""The ID token checks of signing in through a tenant's identity provider (apps/oauth/idp.py), pinned
with a key made here: only asymmetric signatures by the provider's published keys, and the claims
OpenID Connect Core §3.1.3.7 asks for (iss, aud, azp, exp, iat, nonce, sub)."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, OctKey, RSAKey

from apps.oauth.idp import SignInFailed, _id_token_claims
from apps.oauth.models import IdentityProvider

ISSUER, CLIENT = "https://idp.example.test", "gateway"
KEY = RSAKey.generate_key(2048, parameters={"kid": "k1"})
OTHER = RSAKey.generate_key(2048, parameters={"kid": "k1"})
KEYS = KeySet([KEY]).as_dict(private=False)
PROVIDER = IdentityProvider(issuer=ISSUER, client_id=CLIENT)


def _claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": CLIENT, "sub": "ada", "iat": now, "exp": now + 300, "nonce": "n-1", **changes}
    return {k: v for k, v in claims.items() if v is not None}


def _signed(key: Any = KEY, alg: str = "RS256", **changes: Any) -> str:
    return jwt.encode({"alg": alg, "kid": "k1"}, _claims(**changes), key)


def test_a_token_signed_by_the_provider_for_the_gateway_is_taken() -> None:
    assert _id_token_claims(PROVIDER, _signed(), KEYS, "n-1")["sub"] == "ada"
    assert _id_token_claims(PROVIDER, _signed(aud=[CLIENT, "other"], azp=CLIENT), KEYS, "n-1")["sub"] == "ada"


def _unsigned() -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part(_claims())}."


@pytest.mark.parametrize("token", [
    pytest.param(lambda: _signed(OTHER), id="another-key"),
    pytest.param(lambda: _signed(OctKey.import_key(json.dumps(KEYS["keys"][0]).encode()), alg="HS256"),
                 id="hs256-with-the-public-key"),
    pytest.param(_unsigned, id="alg-none"),
    pytest.param(lambda: _signed(iss="https://evil.example.test"), id="other-issuer"),
    pytest.param(lambda: _signed(aud="someone-else"), id="other-audience"),
    pytest.param(lambda: _signed(aud=[CLIENT, "other"]), id="several-audiences-without-azp"),
    pytest.param(lambda: _signed(nonce="n-2"), id="other-nonce"),
    pytest.param(lambda: _signed(nonce=None), id="no-nonce"),
    pytest.param(lambda: _signed(exp=int(time.time()) - 120), id="expired"),
    pytest.param(lambda: _signed(sub="x" * 256), id="subject-too-long"),
    pytest.param(lambda: "not-a-token", id="garbage"),
])
def test_anything_else_is_refused(token: Any) -> None:
    with pytest.raises(SignInFailed):
        _id_token_claims(PROVIDER, token(), KEYS, "n-1")


def test_keys_without_a_key_list_refuse_rather_than_fail() -> None:
    with pytest.raises(SignInFailed):
        _id_token_claims(PROVIDER, _signed(), {}, "n-1")
