"""API key and admin token format and hashing: the one definition both issuing and verifying use.

A stored hash is HMAC-SHA256, keyed by a server secret that the database does not hold, of the
SHA-256 of the secret. Keyed, a stolen database is no oracle for guessing secrets offline; layered
on SHA-256, hashes stored before keying (plain SHA-256) were converted without knowing a single
secret (migration 0008). Secrets are high-entropy (`key_secret_problem`), so one fast hash is
enough: verifying costs microseconds and needs no per-request slow hash.

The label shown for recognising a key is never part of its secret: a generated key carries a random
public id (`mgw_<id>_<secret>`), shown as `mgw_<id>`; a caller-chosen secret is shown by a few
characters of its keyed hash."""

from __future__ import annotations

import functools
import hashlib
import hmac
import math
import secrets
import string

from django.conf import settings

from apps.common.secrets import derived_key

KEY_PREFIX = "mgw_"
ADMIN_TOKEN_PREFIX = "gwa_"
#: The entropy a caller-chosen secret must carry (estimated by `secret_bits`).
MIN_SECRET_BITS = 128
#: No secret shorter than this can carry MIN_SECRET_BITS (95 printable ASCII characters).
MIN_SECRET_LENGTH = math.ceil(MIN_SECRET_BITS / math.log2(95))
_PUBLIC_ID_LENGTH = 8
_PUBLIC_ID_ALPHABET = string.ascii_letters + string.digits
_MIN_DISTINCT = 10


@functools.lru_cache(maxsize=4)
def _hash_key(material: str) -> bytes:
    return derived_key(material, b"mcp-gateway api key hashes v1")


def key_hash_server_key() -> bytes:
    """The HMAC key of stored hashes: from GATEWAY_KEY_HASH_SECRET when set, else from
    GATEWAY_SECRET_KEY. Changing the one in use makes every stored key and admin token unusable."""
    return _hash_key(settings.GATEWAY_KEY_HASH_SECRET or settings.SECRET_KEY)


def key_hash_of_digest(digest: bytes) -> str:
    """The stored hash of the secret whose SHA-256 is `digest`."""
    return hmac.new(key_hash_server_key(), digest, hashlib.sha256).hexdigest()


def key_hash(secret: str) -> str:
    """The stored hash of `secret` (64 hex digits): what keys and admin tokens are looked up by."""
    return key_hash_of_digest(hashlib.sha256(secret.encode("utf-8")).digest())


def key_label_of_hash(secret_hash: str) -> str:
    """The label of a key whose secret was chosen by its issuer (or is unknown): part of its keyed
    hash, which says nothing about the secret without the server key."""
    return "#" + secret_hash[:8]


def _generate(prefix: str) -> tuple[str, str]:
    public_id = "".join(secrets.choice(_PUBLIC_ID_ALPHABET) for _ in range(_PUBLIC_ID_LENGTH))
    return f"{prefix}{public_id}_{secrets.token_urlsafe(32)}", prefix + public_id


def key_generate() -> tuple[str, str]:
    """A new API key (256 random bits after its public id) and the label it is shown by."""
    return _generate(KEY_PREFIX)


def admin_token_generate() -> tuple[str, str]:
    """A new REST API token and the label it is shown by."""
    return _generate(ADMIN_TOKEN_PREFIX)


def secret_bits(secret: str) -> int:
    """An upper estimate of the entropy of a caller-chosen secret: its length times the bits of
    an alphabet made of the character classes it uses (a-z, A-Z, 0-9, other ASCII, anything else),
    and none at all for a secret of fewer than 10 distinct characters (`aaaa…`, `abab…`)."""
    if len(set(secret)) < _MIN_DISTINCT:
        return 0
    classes = (
        (26, lambda ch: "a" <= ch <= "z"), (26, lambda ch: "A" <= ch <= "Z"), (10, str.isdigit),
        (33, lambda ch: ch.isascii() and not ch.isalnum()), (128, lambda ch: not ch.isascii()),
    )
    pool = sum(size for size, member in classes if any(member(ch) for ch in secret))
    return int(len(secret) * math.log2(pool))


def key_secret_problem(secret: str) -> str | None:
    """Why a caller-chosen secret cannot be a key, or None when it can; read after "secret" ("secret
    must not ..."). Both the config validator and `api_key_issue` use this, so a file that validates
    never fails later on its secrets."""
    # The secret travels in an Authorization / X-API-Key header, where whitespace cannot survive.
    if any(ch.isspace() for ch in secret) or not secret.isprintable():
        return "must not contain whitespace or control characters"
    bits = secret_bits(secret)
    if bits >= MIN_SECRET_BITS:
        return None
    why = (f"it uses fewer than {_MIN_DISTINCT} different characters" if len(set(secret)) < _MIN_DISTINCT
           else f"it carries at most {bits} bits")
    return (f"is too weak: {why}, and a key needs {MIN_SECRET_BITS} (for example 32 random hex digits, or "
            "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`)")
