"""Opaque, signed downstream cursors for the lists of a virtual host (docs/virtual-hosts.md).

A cursor says where the next page of one list the gateway pages starts: a merged list (or a tool
server's list), or — a *piece* cursor — the rest of one page of a backend's own that was too big to
send whole (`list_pieces.py`). Any gateway instance can check and
follow a cursor another instance made: everything needed is inside it, under an HMAC tag keyed by a
secret all instances share. Nothing is stored.

Wire format (version 1) — URL-safe base64 without padding of::

    offset  size  field
    0       1     format            1; a new layout gets a new number
    1       1     list kind         1 tools, 2 prompts, 3 resources, 4 resourceTemplates, 5 tasks
    2       1     flags             bit 0: the last key is present; bit 1: a piece cursor, whose
                                    "last key" is the backend's cursor of the page it is cut from
    3       8     virtual host tag  BLAKE2b-64 of tenant id and vhost slug
    11      8     list version      fingerprint of the merged list's identities (`listing.MergedList.version`)
    19      4     issued at         unix seconds, big-endian
    23      4     offset            index of the first item of the next page, big-endian
    27      n     last key          UTF-8 identity (name or URI) of the last item already served
                                    (a piece cursor: the backend's cursor)
    27+n    16    tag               HMAC-SHA256 over all of the above, truncated to 16 bytes

Decisions:
- *Stale cursors fail.* The cursor is bound to the list version; when the merged list gained, lost
  or renamed items since the cursor was made, decoding raises -32602 ("stale", the client lists
  again from the start), as docs/virtual-hosts.md ("Lists") promises. Changed descriptions or schemas do not change the version:
  positions stay valid. Callers may opt into `allow_stale`, in which case the position is the last
  key, which survives insertions and removals before it (no item is skipped or served twice, except
  ones added or removed meanwhile). Keys longer than `KEY_BUDGET` bytes (long resource URIs) are
  left out so the cursor stays under `MAX_TOKEN`; such cursors cannot resume across versions.
- *Offset and last key.* For a current list the offset is exact and O(1); the last key is checked
  against it as a second guard against a version collision.
- *Expiry.* `ttl` seconds (default one hour) after issue; a little clock skew between instances is
  tolerated. Expired → -32602.
- *Binding.* Kind and virtual host are inside the signed payload, so a cursor from `prompts/list` or
  from another virtual host is refused with a message saying so.
- *Pieces.* A piece cursor is bound to the version of the backend page it is cut from, which only
  the backend's answer can tell: `open_piece` checks all but that, the caller checks the version.
  A token that is not a piece cursor of this list and host is the backend's own cursor (`open_piece`
  answers None), even one this gateway signed: the backend may be another host of this deployment.
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from apps.gateway.protocol.errors import InvalidParams

FORMAT = 1
KINDS: Mapping[str, int] = {"tools": 1, "prompts": 2, "resources": 3, "resourceTemplates": 4, "tasks": 5}
_KIND_NAMES = {code: name for name, code in KINDS.items()}

MAX_TOKEN = 1024  # characters; refused before any decoding work
TAG_SIZE = 16
VERSION_SIZE = 8
_HEADER = struct.Struct(">BBB8s8sII")
_MAX_RAW = MAX_TOKEN * 3 // 4
KEY_BUDGET = _MAX_RAW - _HEADER.size - TAG_SIZE  # 725 bytes
_HAS_LAST = 0x01
_PIECE = 0x02
_CLOCK_SKEW = 60.0  # seconds an instance's clock may run behind the one that issued the cursor
_DOMAIN = b"mcp-gateway/list-cursor/v1"  # so the shared secret's other uses never yield a valid cursor tag
_RESTART = "list again without a cursor"
_TO_STANDARD = bytes.maketrans(b"-_", b"+/")
_TO_URLSAFE = bytes.maketrans(b"+/", b"-_")


@lru_cache(maxsize=4096)
def vhost_tag(tenant_id: int, vhost: str) -> bytes:
    """8 bytes naming one tenant's virtual host inside a cursor."""
    return hashlib.blake2b(f"{tenant_id}\x00{vhost}".encode(), digest_size=8).digest()


@dataclass(frozen=True, slots=True)
class ListScope:
    """Which list a cursor belongs to: kind (`tools`, `prompts`, `resources`, `resourceTemplates`, `tasks`),
    virtual host, and the version of the merged list the position refers to."""

    kind: str
    tenant_id: int
    vhost: str
    version: bytes

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown list kind {self.kind!r}")
        if len(self.version) != VERSION_SIZE:
            raise ValueError(f"list version must be {VERSION_SIZE} bytes")


@dataclass(frozen=True, slots=True)
class CursorPosition:
    """Where the next page starts: `offset` in the list the cursor was made for, and the identity of
    the last item served before it (None when too long to carry). `stale`: the list has changed
    since (only ever returned with `allow_stale`); `offset` is then meaningless, resume after `last`."""

    offset: int
    last: str | None
    stale: bool = False


@dataclass(frozen=True, slots=True)
class Piece:
    """Where a piece cursor points: the items from `offset` on of the backend page its cursor
    `upstream` answers (None: the first page), whose version was `version` when cut."""

    version: bytes
    offset: int
    upstream: str | None


def stale_cursor(kind: str) -> InvalidParams:
    """The -32602 for a cursor made for an earlier version of the `kind` list."""
    return _invalid("stale", f"cursor is stale: the {kind} list changed since; {_RESTART}")


def _invalid(reason: str, detail: str) -> InvalidParams:
    return InvalidParams(f"Invalid params: {detail}", data={"cursor": reason})


class CursorCodec:
    """Encodes and checks cursors. Instances built with the same secret accept each other's cursors."""

    def __init__(self, secret: bytes, *, ttl: float = 3600.0, clock: Callable[[], float] = time.time) -> None:
        if len(secret) < 16:
            raise ValueError("the cursor secret must be at least 16 bytes")
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        key = hmac.digest(secret, _DOMAIN, "sha256").ljust(64, b"\0")
        # HMAC-SHA256 (RFC 2104) with its keyed inner and outer hashes computed once and copied per
        # use: the same tags as `hmac.digest(key, payload, "sha256")` at half the cost of `hmac.HMAC.copy()`.
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in key))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in key))
        self.ttl = ttl
        self._clock = clock

    def _tag(self, payload: bytes) -> bytes:
        inner = self._inner.copy()
        inner.update(payload)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()[:TAG_SIZE]

    def encode(self, scope: ListScope, offset: int, last: str | None) -> str:
        """A cursor for the page starting at `offset` of the list `scope` describes, `last` being the
        identity of the item just before it."""
        key = b"" if last is None else last.encode()
        if last is None or len(key) > KEY_BUDGET:
            return self._encode(scope, offset, b"", 0)
        return self._encode(scope, offset, key, _HAS_LAST)

    def encode_piece(self, scope: ListScope, offset: int, upstream: str | None) -> str | None:
        """A piece cursor: the items from `offset` on of the backend's page that its cursor
        `upstream` (None: its first page) answers, `scope.version` being that page's version. None
        when `upstream` is too long to carry (`KEY_BUDGET`)."""
        if upstream is None:
            return self._encode(scope, offset, b"", _PIECE)
        key = upstream.encode()
        if len(key) > KEY_BUDGET:
            return None
        return self._encode(scope, offset, key, _PIECE | _HAS_LAST)

    def _encode(self, scope: ListScope, offset: int, key: bytes, flags: int) -> str:
        if not 0 <= offset <= 0xFFFFFFFF:
            raise ValueError("offset out of range")
        vtag = vhost_tag(scope.tenant_id, scope.vhost)
        payload = _HEADER.pack(FORMAT, KINDS[scope.kind], flags, vtag, scope.version, int(self._clock()), offset) + key
        encoded = binascii.b2a_base64(payload + self._tag(payload), newline=False)
        return encoded.translate(_TO_URLSAFE).rstrip(b"=").decode()

    def decode(self, token: object, scope: ListScope, *, allow_stale: bool = False) -> CursorPosition:
        """The position `token` stands for, or InvalidParams (-32602) saying why it is refused:
        malformed, tampered or foreign (another secret), another list kind or virtual host, expired,
        or — unless `allow_stale` — made for an earlier version of the list (or a piece cursor).
        `data.cursor` names the reason (`malformed`, `signature`, `kind`, `vhost`, `expired`, `stale`)."""
        flags, version, offset, last = self._open(self._verified(token), scope.kind, scope.tenant_id, scope.vhost)
        if version != scope.version or flags & _PIECE:
            if not allow_stale or flags & _PIECE:
                raise stale_cursor(scope.kind)
            return CursorPosition(offset, last, stale=True)
        return CursorPosition(offset, last)

    def open_piece(self, token: object, kind: str, tenant_id: int, vhost: str) -> Piece | None:
        """The piece `token` stands for, checked but for the version (the caller's to check); None
        when it is not a piece cursor of this list kind and virtual host: then it is the backend's
        own — even one this gateway signed, as when the backend is another host of the same
        deployment. InvalidParams (-32602, `expired`) for a piece cursor of this list that expired."""
        try:
            payload = self._verified(token)
        except InvalidParams:
            return None
        _, kind_code, flags, vtag, _, _, _ = _HEADER.unpack_from(payload)
        if not flags & _PIECE or kind_code != KINDS[kind] or vtag != vhost_tag(tenant_id, vhost):
            return None
        _, version, offset, upstream = self._open(payload, kind, tenant_id, vhost)
        return Piece(version, offset, upstream)

    def _verified(self, token: object) -> bytes:
        """The signed payload of one of our cursors; InvalidParams (`malformed`, `signature`) else."""
        if not isinstance(token, str) or not token:
            raise _invalid("malformed", "cursor must be a non-empty string")
        if len(token) > MAX_TOKEN:
            raise _invalid("malformed", f"cursor longer than {MAX_TOKEN} characters; {_RESTART}")
        raw = _unbase64(token)
        if len(raw) < _HEADER.size + TAG_SIZE:
            raise _invalid("malformed", f"cursor is too short to be one this gateway made; {_RESTART}")
        if raw[0] != FORMAT:
            raise _invalid("malformed", f"cursor format {raw[0]} is unknown; {_RESTART}")
        payload, tag = raw[:-TAG_SIZE], raw[-TAG_SIZE:]
        if not hmac.compare_digest(tag, self._tag(payload)):
            detail = "cursor signature does not match (altered, or not from this gateway)"
            raise _invalid("signature", f"{detail}; {_RESTART}")
        return payload

    def _open(self, payload: bytes, kind_name: str, tenant_id: int, vhost: str) -> tuple[int, bytes, int, str | None]:
        """Flags, list version, offset and last key of a verified payload made for this list kind
        and virtual host, not expired; InvalidParams else."""
        _, kind, flags, vtag, version, issued, offset = _HEADER.unpack_from(payload)
        if kind != KINDS[kind_name]:
            other = _KIND_NAMES.get(kind, "unknown")
            raise _invalid("kind", f"cursor belongs to the {other} list, not the {kind_name} list")
        if vtag != vhost_tag(tenant_id, vhost):
            raise _invalid("vhost", "cursor belongs to another virtual host")
        now = self._clock()
        if now - issued > self.ttl or issued - now > _CLOCK_SKEW:
            raise _invalid("expired", f"cursor expired; {_RESTART}")
        try:
            last = payload[_HEADER.size :].decode() if flags & _HAS_LAST else None
        except UnicodeDecodeError:  # signed by us, so only a bug gets here
            raise _invalid("malformed", f"cursor is unreadable; {_RESTART}") from None
        return flags, version, offset, last


def _unbase64(token: str) -> bytes:
    """Strict URL-safe base64 without padding: other characters, padding and non-canonical
    encodings are refused, so each cursor has exactly one spelling."""
    try:
        data = token.encode("ascii")
        raw = binascii.a2b_base64(data.translate(_TO_STANDARD) + b"=" * (-len(data) % 4), strict_mode=True)
    except (UnicodeEncodeError, binascii.Error):
        raise _invalid("malformed", f"cursor is not valid base64url; {_RESTART}") from None
    # Re-encoding refuses what the decoder lets through: standard base64's '+' and '/', padding,
    # and unused trailing bits in the last character.
    if binascii.b2a_base64(raw, newline=False).translate(_TO_URLSAFE).rstrip(b"=") != data:
        raise _invalid("malformed", f"cursor is not valid base64url; {_RESTART}")
    return raw
