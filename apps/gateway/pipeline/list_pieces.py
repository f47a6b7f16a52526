"""Lists on a host that passes them through (docs/virtual-hosts.md, "Lists"): a backend's page is
relayed as it is, unless it is bigger than a page may be (`listing.PageLimits`) — many servers
never page, and a client's SSE reader refuses an event over 1 MiB. Such a page is cut in pieces:
the client gets the first, with a *piece cursor* (`cursors.py`) for the rest; the last piece
carries the backend's own `nextCursor`, which the client hands back and the backend gets as it is.

Following a piece cursor asks the backend for the same page again (with the backend's cursor the
piece cursor carries), in the client's session if it has one, and hands out the next piece. The page
must still have the same entries (by identity, like a merged list's version): else the cursor is
stale (-32602), and the client lists again from the start. Nothing is stored.

Pure: no I/O. The forwarder calls `prepare` before sending a list request and the answer's payload
goes through the `Reshape` it gives."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from apps.gateway.pipeline.cursors import CursorCodec, ListScope, stale_cursor
from apps.gateway.pipeline.listing import IDENTITY, LIST_METHODS, PageLimits, encode_page, list_version
from apps.gateway.pipeline.values import VirtualHostView
from apps.gateway.protocol import jsonrpc
from apps.gateway.protocol.errors import InvalidParams
from apps.gateway.protocol.jsonrpc import Kind, Message

log = logging.getLogger(__name__)

#: A backend's answer payload as the client gets it.
Reshape = Callable[[bytes], bytes]
#: The lists cut when a page is too big: a host's lists, and a backend's tasks (2025-11-25 `tasks/list`).
_PIECED = {**LIST_METHODS, "tasks/list": "tasks"}


@dataclass(frozen=True, slots=True)
class Prepared:
    """A list request as it goes to the backend: the message, its body when it differs from the
    client's (None: the client's own), and what its answer goes through; or why it cannot go
    (`refused`: a piece cursor that does not fit)."""

    message: Message
    body: bytes | None
    reshape: Reshape | None
    refused: InvalidParams | None = None


class ListPieces:
    def __init__(self, codec: CursorCodec, limits: PageLimits) -> None:
        self._codec = codec
        self._limits = limits

    def prepare(self, vhost: VirtualHostView, message: Message) -> Prepared:
        """`message` as the backend must get it, when it is a list request: a piece cursor is
        swapped for the backend's cursor it carries; one that does not fit (another list or host,
        expired) refuses the request."""
        kind = _PIECED.get(message.method or "")
        if kind is None or message.kind is not Kind.REQUEST:
            return Prepared(message, None, None)
        cursor = message.params.get("cursor")
        if cursor is not None and not isinstance(cursor, str):
            return Prepared(message, None, None)  # nothing of ours: the backend says what it makes of it
        try:
            piece = None if cursor is None else self._codec.open_piece(cursor, kind, vhost.tenant_id, vhost.slug)
        except InvalidParams as error:
            return Prepared(message, None, None, error)
        if piece is None:
            return Prepared(message, None, _Cut(self, kind, vhost, cursor, 0, None))
        params = {name: value for name, value in message.params.items() if name != "cursor"}
        if piece.upstream is not None:
            params["cursor"] = piece.upstream
        raw = {**message.raw, "params": params}
        sent = Message(message.kind, raw, method=message.method, id=message.id)
        return Prepared(sent, jsonrpc.dumps(raw), _Cut(self, kind, vhost, piece.upstream, piece.offset, piece.version))


@dataclass(frozen=True, slots=True)
class _Cut:
    """The piece from `offset` on of the page the backend answers to its cursor `upstream`;
    `version`: what the page's version must be (None: the first piece, any page will do)."""

    pieces: ListPieces
    kind: str
    vhost: VirtualHostView
    upstream: str | None
    offset: int
    version: bytes | None

    def __call__(self, payload: bytes) -> bytes:
        limits = self.pieces._limits
        if self.version is None and len(payload) <= limits.bytes:
            return payload  # the common case: the backend's page goes as it is, unread
        try:
            message = jsonrpc.loads(payload)
        except ValueError:
            return payload
        result = message.get("result") if isinstance(message, dict) else None
        entries = result.get(self.kind) if isinstance(result, dict) else None
        if not isinstance(entries, list):
            return payload  # an error, or no list: the backend's answer, as it is
        field = IDENTITY[self.kind]
        version = list_version([_identity(entry, field) for entry in entries])
        if self.version is not None and (version != self.version or self.offset > len(entries)):
            error = stale_cursor(self.kind)
            return jsonrpc.dumps(jsonrpc.error_message(message.get("id"), error.to_error()))
        rest = {name: value for name, value in result.items() if name not in (self.kind, "nextCursor")}
        reserved = len(jsonrpc.dumps(rest)) + len(jsonrpc.dumps(message.get("id")))
        encoded, end = encode_page(entries, self.offset, limits, reserved=reserved)
        shown: dict[str, Any] = {**rest, self.kind: jsonrpc.encoded(encoded)}
        if end < len(entries):
            scope = ListScope(self.kind, self.vhost.tenant_id, self.vhost.slug, version)
            cursor = self.pieces._codec.encode_piece(scope, end, self.upstream)
            if cursor is None:
                log.warning("%s of %s/%s: a page of %d bytes is relayed whole: the backend's cursor is too long "
                            "to carry in the gateway's", self.kind, self.vhost.tenant_slug, self.vhost.slug, len(payload))
                return payload
            shown["nextCursor"] = cursor
        elif (upstream_next := result.get("nextCursor")) is not None:
            shown["nextCursor"] = upstream_next
        return jsonrpc.dumps({**message, "result": shown})


def _identity(entry: object, field: str) -> str:
    value = entry.get(field) if isinstance(entry, dict) else None
    return value if isinstance(value, str) else ""
