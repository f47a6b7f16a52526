"""Request bodies: JSON, form-urlencoded and multipart."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote_plus

import orjson

from .calls import ArgumentError
from .serialize import _json_text, _text

_BOUNDARIES = itertools.count(1)

# --------------------------------------------------------------------------- bodies


def _dumps(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise ArgumentError(f"body cannot be serialised as JSON: {exc}") from None


def _encode_object(kind: str, content_type: str | None, values: dict[str, Any],
                   boundary: str | None) -> tuple[bytes, str]:
    """``body_mode="properties"``: ``kind`` and ``content_type`` are the plan's ``body_kind`` and
    ``body_content_type``."""
    if kind == "form":
        return _urlencoded(values), content_type or "application/x-www-form-urlencoded"
    if kind == "multipart":
        return _multipart(values, boundary)
    return _dumps(values), content_type or "application/json"


def _encode_whole(kind: str, content_type: str | None, value: Any, boundary: str | None) -> tuple[bytes, str]:
    """``body_mode="whole"``: ``value`` is the body."""
    declared = content_type or "application/octet-stream"
    if kind == "form" and isinstance(value, dict):
        return _urlencoded(value), declared
    if kind == "multipart" and isinstance(value, dict):
        return _multipart(value, boundary)
    if kind == "json" or not isinstance(value, str):
        if "*" in declared:
            declared = "application/json"
        return _dumps(value), declared
    if "*" in declared:
        declared = "text/plain; charset=utf-8"
    return value.encode(), declared


def _urlencoded(values: Mapping[str, Any]) -> bytes:
    parts: list[str] = []
    for key, value in values.items():
        if value is None:
            continue
        name = quote_plus(str(key), safe="")
        items = value if isinstance(value, list | tuple) else (value,)
        for item in items:
            text = _json_text(item) if isinstance(item, dict | list | tuple) else _text(item)
            parts.append(f"{name}={quote_plus(text, safe='')}")
    return "&".join(parts).encode("ascii")


def _disposition_name(name: str) -> str:
    # WHATWG multipart/form-data encoding of field names.
    return name.replace("\r", "%0D").replace("\n", "%0A").replace('"', "%22")


def _multipart(values: Mapping[str, Any], boundary: str | None) -> tuple[bytes, str]:
    parts: list[tuple[str, bytes, bool]] = []
    for key, value in values.items():
        if value is None:
            continue
        items = value if isinstance(value, list | tuple) and all(
            not isinstance(i, dict | list | tuple) for i in value) else (value,)
        for item in items:
            if isinstance(item, dict | list | tuple):
                parts.append((str(key), _dumps(item), True))
            else:
                parts.append((str(key), _text(item).encode(), False))
    chosen = boundary
    while True:
        if chosen is None:
            candidate = f"mcpgw-boundary-{next(_BOUNDARIES):08d}"
        else:
            candidate = chosen
        marker = f"--{candidate}".encode()
        if not any(marker in payload for _, payload, _ in parts):
            break
        if chosen is not None:
            raise ArgumentError("the multipart boundary occurs in the body")
    out = bytearray()
    for name, payload, is_json in parts:
        out += marker + b"\r\n"
        out += f'Content-Disposition: form-data; name="{_disposition_name(name)}"\r\n'.encode()
        if is_json:
            out += b"Content-Type: application/json\r\n"
        out += b"\r\n" + payload + b"\r\n"
    out += marker + b"--\r\n"
    return bytes(out), f"multipart/form-data; boundary={candidate}"


