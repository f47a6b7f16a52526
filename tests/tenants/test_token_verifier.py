"""`JwtVerifier` in process: a verified token is remembered until it expires, and only for the
issuer configuration that verified it."""

from __future__ import annotations

import time
from dataclasses import replace

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from apps.kernel.identity import InvalidToken, TokenIssuerView
from apps.tenants.token_verifier import JwtVerifier

KEY = ec.generate_private_key(ec.SECP256R1())
PEM = KEY.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
ISSUER = TokenIssuerView("https://i.test/", "aud", "", PEM, ("ES256",), "team", "sub")


def token(exp: float) -> str:
    return jwt.encode({"iss": ISSUER.issuer, "aud": "aud", "sub": "s", "exp": int(exp)}, KEY, algorithm="ES256")


async def test_a_verified_token_is_remembered_until_it_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    verifier = JwtVerifier()
    good = token(time.time() + 60)
    assert (await verifier.verify(good, [ISSUER]))[1]["sub"] == "s"
    calls: list[str] = []
    original = verifier._verify

    async def counting(raw: str, issuers: object) -> object:
        calls.append(raw)
        return await original(raw, issuers)  # type: ignore[arg-type]

    monkeypatch.setattr(verifier, "_verify", counting)
    await verifier.verify(good, [ISSUER])
    assert calls == []  # served from memory
    changed = replace(ISSUER, audience="other")
    with pytest.raises(InvalidToken, match="another audience"):
        await verifier.verify(good, [changed])  # the configuration changed: verified again, and refused
    issuer, claims, _ = verifier._verified[good]
    verifier._verified[good] = (issuer, claims, time.time() - 1)  # as if its expiry had passed
    await verifier.verify(good, [ISSUER])
    assert len(calls) == 2  # no longer trusted from memory: verified again


async def test_an_expired_token_is_refused() -> None:
    with pytest.raises(InvalidToken, match="expired"):
        await JwtVerifier().verify(token(time.time() - 60), [ISSUER])
