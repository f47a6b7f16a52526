"""Signed downstream cursors: round trips, and every way a cursor can be wrong answering -32602."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from apps.gateway.pipeline.cursors import KEY_BUDGET, MAX_TOKEN, CursorCodec, CursorPosition, ListScope
from apps.gateway.protocol.errors import INVALID_PARAMS, InvalidParams

SECRET = b"s" * 32
VERSION = bytes(range(8))
SCOPE = ListScope("tools", 7, "main", VERSION)
NOW = 1_800_000_000.0


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def codec(secret: bytes = SECRET, clock: Clock | None = None, ttl: float = 3600.0) -> CursorCodec:
    return CursorCodec(secret, ttl=ttl, clock=clock or Clock())


def raw(token: str) -> bytes:
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))


def token_of(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def refused(token: object, scope: ListScope = SCOPE, on: CursorCodec | None = None) -> InvalidParams:
    with pytest.raises(InvalidParams) as caught:
        (on or codec()).decode(token, scope)
    error = caught.value
    assert error.code == INVALID_PARAMS and error.message.startswith("Invalid params: cursor")
    return error


def test_round_trip() -> None:
    cursors = codec()
    token = cursors.encode(SCOPE, 42, "gateway-one-increment")
    assert cursors.decode(token, SCOPE) == CursorPosition(42, "gateway-one-increment")
    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert cursors.decode(cursors.encode(SCOPE, 1, "ünïcode ✓"), SCOPE).last == "ünïcode ✓"
    assert cursors.decode(cursors.encode(SCOPE, 3, None), SCOPE) == CursorPosition(3, None)


def test_another_instance_with_the_same_secret_accepts_it() -> None:
    token = codec().encode(SCOPE, 5, "b")
    assert codec(bytes(SECRET), Clock(NOW + 30)).decode(token, SCOPE) == CursorPosition(5, "b")


def test_every_flipped_bit_is_refused() -> None:
    data = raw(codec().encode(SCOPE, 5, "add"))
    for bit in range(len(data) * 8):
        altered = bytearray(data)
        altered[bit // 8] ^= 1 << (bit % 8)
        refused(token_of(bytes(altered)))


def test_every_changed_character_is_refused() -> None:
    token = codec().encode(SCOPE, 5, "add")
    for index, char in enumerate(token):
        for replacement in ("A", "-", "_", "z"):
            if replacement != char:
                refused(token[:index] + replacement + token[index + 1 :])


@pytest.mark.parametrize("cut", [1, 2, 4, 16, 30])
def test_truncated_is_refused(cut: int) -> None:
    refused(codec().encode(SCOPE, 5, "add")[:-cut])


@pytest.mark.parametrize("extra", ["A", "AA", "AAAA", "xyz0"])
def test_extended_is_refused(extra: str) -> None:
    refused(codec().encode(SCOPE, 5, "add") + extra)


def test_another_secret_is_refused() -> None:
    error = refused(codec(b"t" * 32).encode(SCOPE, 5, "add"))
    assert error.data == {"cursor": "signature"}


@pytest.mark.parametrize(
    ("scope", "reason"),
    [
        (ListScope("tools", 7, "other", VERSION), "vhost"),
        (ListScope("tools", 8, "main", VERSION), "vhost"),
        (ListScope("prompts", 7, "main", VERSION), "kind"),
        (ListScope("resourceTemplates", 7, "main", VERSION), "kind"),
        (ListScope("tools", 7, "main", b"\xff" * 8), "stale"),
    ],
)
def test_another_list_is_refused(scope: ListScope, reason: str) -> None:
    error = refused(codec().encode(SCOPE, 5, "add"), scope)
    assert error.data == {"cursor": reason}
    if reason == "kind":
        assert "tools list" in error.message


def test_stale_cursor_may_be_allowed() -> None:
    token = codec().encode(SCOPE, 5, "add")
    newer = ListScope("tools", 7, "main", b"\x01" * 8)
    assert codec().decode(token, newer, allow_stale=True) == CursorPosition(5, "add", stale=True)
    assert codec().decode(token, SCOPE, allow_stale=True) == CursorPosition(5, "add", stale=False)


def test_expiry() -> None:
    token = codec().encode(SCOPE, 5, "add")
    assert codec(clock=Clock(NOW + 3600)).decode(token, SCOPE).offset == 5
    assert refused(token, on=codec(clock=Clock(NOW + 3601))).data == {"cursor": "expired"}
    assert refused(token, on=codec(clock=Clock(NOW + 11), ttl=10)).data == {"cursor": "expired"}
    # Issued "in the future": a clock skew of up to a minute is tolerated, not more.
    assert codec(clock=Clock(NOW - 60)).decode(token, SCOPE).offset == 5
    assert refused(token, on=codec(clock=Clock(NOW - 120))).data == {"cursor": "expired"}


@pytest.mark.parametrize(
    "token",
    [
        "",
        "garbage",
        "Zm9v",
        "not base64!",
        "AAAA+/AA",
        "AAAA====",
        "ÄÖÜ",
        " " + "A" * 60,
        "A" * (MAX_TOKEN + 1),
        "A" * 1_000_000,
        None,
        42,
        ["cursor"],
        {"offset": 1},
    ],
)
def test_garbage_is_refused(token: object) -> None:
    assert refused(token).data == {"cursor": "malformed"}


def test_non_canonical_base64_is_refused() -> None:
    token = codec().encode(SCOPE, 5, "add")
    assert len(token) % 4 != 0  # unpadded, so the last character has unused bits
    padded = token + "=" * (-len(token) % 4)
    refused(padded)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    sibling = alphabet[alphabet.index(token[-1]) ^ 1]  # same decoded bytes, other unused low bit
    refused(token[:-1] + sibling)


def test_unknown_format_byte_is_refused_even_when_signed() -> None:
    data = bytearray(raw(codec().encode(SCOPE, 5, "add")))
    data[0] = 2
    key = hmac.digest(SECRET, b"mcp-gateway/list-cursor/v1", "sha256")
    payload = bytes(data[:-16])
    resigned = payload + hmac.digest(key, payload, hashlib.sha256)[:16]
    error = refused(token_of(resigned))
    assert "format 2" in error.message


def test_long_keys_are_left_out_to_bound_the_length() -> None:
    cursors = codec()
    token = cursors.encode(SCOPE, 9, "x" * KEY_BUDGET)
    assert len(token) <= MAX_TOKEN and cursors.decode(token, SCOPE).last == "x" * KEY_BUDGET
    token = cursors.encode(SCOPE, 9, "urn:" + "x" * 10_000)
    assert len(token) < 64 and cursors.decode(token, SCOPE) == CursorPosition(9, None)


def test_construction_is_checked() -> None:
    with pytest.raises(ValueError):
        CursorCodec(b"short")
    with pytest.raises(ValueError):
        ListScope("widgets", 1, "main", VERSION)
    with pytest.raises(ValueError):
        ListScope("tools", 1, "main", b"1234")
