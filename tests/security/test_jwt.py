"""JWT access tokens must name their caller and carry numeric dates: a token without a subject would
share one principal (budget, audit, per-identity credential) with every other such token, and a
string `exp` was converted by PyJWT and trusted."""

from __future__ import annotations

import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from apps.kernel.identity import InvalidToken, TokenIssuerView
from apps.tenants.services import token_issuer_set
from apps.tenants.token_verifier import JwtVerifier
from tests import factories
from tests.gateway.helpers import message_of, modern

KEY = ec.generate_private_key(ec.SECP256R1())
PEM = KEY.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
ISSUER = "https://login.example.test/"
AUDIENCE = "https://gateway.example.test/mcp"
VIEW = TokenIssuerView(ISSUER, AUDIENCE, "", PEM, ("ES256",), "team", "sub")


def token(**claims: Any) -> str:
    payload = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": int(time.time()) + 300, **claims}
    return jwt.encode({k: v for k, v in payload.items() if v is not None}, KEY, algorithm="ES256")


async def test_a_well_formed_token_passes() -> None:
    _, claims = await JwtVerifier().verify(token(), [VIEW])
    assert claims["sub"] == "alice"


@pytest.mark.parametrize("subject", [None, ""])
async def test_a_token_without_a_subject_is_refused(subject: object) -> None:
    with pytest.raises(InvalidToken, match="the token has no subject: its 'sub' claim must be a non-empty string"):
        await JwtVerifier().verify(token(sub=subject), [VIEW])


@pytest.mark.parametrize("subject", [42, ["alice"]])
async def test_a_subject_that_is_no_string_is_refused(subject: object) -> None:
    with pytest.raises(InvalidToken, match="[Ss]ubject must be a string|the token has no subject"):
        await JwtVerifier().verify(token(sub=subject), [VIEW])


async def test_the_configured_subject_claim_is_the_one_required() -> None:
    by_email = TokenIssuerView(ISSUER, AUDIENCE, "", PEM, ("ES256",), "team", "email")
    with pytest.raises(InvalidToken, match="'email' claim must be a non-empty string"):
        await JwtVerifier().verify(token(), [by_email])
    _, claims = await JwtVerifier().verify(token(email="a@example.test"), [by_email])
    assert claims["email"] == "a@example.test"


@pytest.mark.parametrize("claim", ["exp", "nbf", "iat"])
async def test_dates_given_as_strings_are_refused(claim: str) -> None:
    value = str(int(time.time()) + (300 if claim == "exp" else -10))
    with pytest.raises(InvalidToken, match=f"the token's '{claim}' claim must be a number"):
        await JwtVerifier().verify(token(**{claim: value}), [VIEW])


async def test_a_refused_token_is_not_remembered_as_verified() -> None:
    verifier = JwtVerifier()
    bad = token(exp=str(int(time.time()) + 300))
    for _ in range(2):
        with pytest.raises(InvalidToken, match="'exp' claim must be a number"):
            await verifier.verify(bad, [VIEW])


@pytest.mark.slow
def test_the_gateway_answers_401_naming_the_reason(transactional_db: None, gateway_url: str, demo_backend_url: str) -> None:
    tenant = factories.tenant_factory()
    backend = factories.backend_factory(tenant=tenant, urls=[demo_backend_url])
    host = factories.virtual_host_factory(tenant=tenant, mounts={"demo": backend})
    token_issuer_set(tenant=tenant, issuer=ISSUER, audience=AUDIENCE, public_key=PEM, algorithms=["ES256"])
    url = f"{gateway_url}/mcp/{tenant.slug}/{host.slug}"
    params = {"name": "add", "arguments": {"a": 1, "b": 2}}
    assert "result" in message_of(modern(url, "tools/call", params, key=token()))
    for bad, reason in ((token(sub=None), "the token has no subject"),
                        (token(exp=str(int(time.time()) + 300)), "'exp' claim must be a number")):
        response = modern(url, "tools/call", params, key=bad)
        assert response.status_code == 401
        assert reason in response.text
        assert 'error="invalid_token"' in response.headers["www-authenticate"]
