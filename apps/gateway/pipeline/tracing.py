"""W3C trace context: continued from the request and passed on to backends."""

from __future__ import annotations

import re
from collections.abc import Mapping

from apps.gateway.protocol.jsonrpc import Message

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")


def trace_id_of(headers: Mapping[str, str], message: Message) -> str:
    """The trace id from the `traceparent` header, else from `_meta.traceparent`; '' when absent."""
    candidates = [headers.get("traceparent")]
    meta = message.params.get("_meta")
    if isinstance(meta, dict):
        candidates.append(meta.get("traceparent"))
    for value in candidates:
        if isinstance(value, str) and (match := _TRACEPARENT.match(value.strip())):
            return match.group(1)
    return ""


def trace_headers(headers: Mapping[str, str]) -> list[tuple[str, str]]:
    return [(name, headers[name]) for name in ("traceparent", "tracestate", "baggage") if name in headers]
