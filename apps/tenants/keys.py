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


def key_secret_problem(secret: str) -> str | None:
    """Why a caller-chosen secret cannot be a key, or None when it can. Both the config validator
    and `api_key_issue` use this, so a file that validates never fails later on its secrets."""
    if len(secret) < MIN_SECRET_LENGTH:
        return f"must be at least {MIN_SECRET_LENGTH} characters"
    # The secret travels in an Authorization / X-API-Key header, where whitespace cannot survive.
    if any(ch.isspace() for ch in secret) or not secret.isprintable():
        return "must not contain whitespace or control characters"
    return None


ADMIN_TOKEN_PREFIX = "gwa_"


def admin_token_generate() -> str:
    return ADMIN_TOKEN_PREFIX + secrets.token_urlsafe(32)
