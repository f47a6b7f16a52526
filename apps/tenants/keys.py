"""API key format and hashing: the one definition both issuing and verifying use."""

from __future__ import annotations

import hashlib
import secrets

KEY_PREFIX = "mgw_"
MIN_SECRET_LENGTH = 16
DISPLAY_PREFIX_LENGTH = 12


def key_generate() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def key_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def key_display_prefix(secret: str) -> str:
    return secret[:DISPLAY_PREFIX_LENGTH]
