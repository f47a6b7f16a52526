"""Secrets at rest: egress credentials are stored as Fernet tokens, never as plaintext.

The key is derived from `GATEWAY_SECRET_KEY` (HKDF-SHA256, its own purpose label), unless
`GATEWAY_ENCRYPTION_KEYS` lists Fernet keys: the first encrypts, all decrypt, so a key can be
rotated by prepending a new one and re-saving the credentials. Derivation happens once per process."""

from __future__ import annotations

import base64
import functools

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class SecretUnreadable(Exception):
    """A stored secret cannot be decrypted with the configured keys (they changed since)."""


def derived_key(secret_key: str, purpose: bytes) -> bytes:
    """32 bytes for one purpose (HKDF-SHA256 of the secret key): keys for different purposes are
    unrelated, so one leaking reveals nothing about the others or the secret key."""
    if not secret_key:
        raise ImproperlyConfigured("GATEWAY_SECRET_KEY must be set")
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose).derive(secret_key.encode())


@functools.cache
def _fernet() -> MultiFernet:
    configured = [key.strip() for key in settings.GATEWAY_ENCRYPTION_KEYS if key.strip()]
    if configured:
        try:
            return MultiFernet([Fernet(key) for key in configured])
        except ValueError as exc:
            raise ImproperlyConfigured(f"GATEWAY_ENCRYPTION_KEYS holds an invalid Fernet key: {exc}") from None
    if not settings.SECRET_KEY:
        raise ImproperlyConfigured("GATEWAY_SECRET_KEY must be set to store secrets")
    key = derived_key(settings.SECRET_KEY, b"mcp-gateway egress credentials v1")
    return MultiFernet([Fernet(base64.urlsafe_b64encode(key))])


def secret_encrypt(plaintext: str) -> str:
    """A token for the database: URL-safe text, authenticated, different on every call."""
    return _fernet().encrypt(plaintext.encode()).decode("ascii")


def secret_decrypt(token: str) -> str:
    try:
        return _fernet().decrypt(token.encode("ascii")).decode()
    except (InvalidToken, ValueError, UnicodeError):
        raise SecretUnreadable("the stored secret cannot be decrypted with the configured keys") from None
