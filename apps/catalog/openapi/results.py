"""An HTTP response as an MCP CallToolResult."""

from __future__ import annotations

import base64
import http
import re
from typing import Any

import orjson

from .outgoing import MISSING

# --------------------------------------------------------------------------- shape_result

_TEXTUAL = ("xml", "javascript", "yaml", "csv", "x-www-form-urlencoded", "graphql", "html", "sql")
_CHARSET = re.compile(r"charset\s*=\s*\"?([A-Za-z0-9._:-]+)", re.IGNORECASE)
#: ``uri`` of the embedded resource carrying a binary response body.
RESPONSE_RESOURCE_URI = "openapi:response-body"


def _decode(body: bytes, content_type: str) -> str:
    match = _CHARSET.search(content_type)
    if match:
        try:
            return body.decode(match.group(1), errors="replace")
        except LookupError:
            pass
    return body.decode("utf-8", errors="replace")


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… [truncated: showing {limit:,} of {len(text):,} characters]"


def _text_result(text: str, is_error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


def shape_result(status: int, content_type: str, body: bytes, *, max_text: int = 100_000,
                 max_error_text: int = 2_000) -> dict[str, Any]:
    """An MCP ``CallToolResult`` dict for an upstream HTTP response.

    * non-2xx → ``isError: true`` and one text block ``HTTP <status> <phrase>`` + a body excerpt of at
      most ``max_error_text`` characters (a note marks the cut);
    * 2xx with an empty body → a text block saying so;
    * 2xx JSON (``*json*`` media types, parseable) → ``structuredContent`` with the parsed value — an
      object as is, anything else wrapped as ``{"result": value}`` because MCP requires an object — plus
      one text block with the JSON text (cut at ``max_text``; ``structuredContent`` is never cut);
    * 2xx text (``text/*``, XML, YAML, JS, CSV…, or undeclared but valid UTF-8) → a text block (cut at
      ``max_text``, charset parameter honoured);
    * 2xx anything else → an embedded resource (``uri`` :data:`RESPONSE_RESOURCE_URI`) with the
      ``mimeType`` and the body as base64 ``blob``.
    """
    mime = content_type.split(";", 1)[0].strip().lower()
    if not 200 <= status < 300:
        try:
            phrase = http.HTTPStatus(status).phrase
        except ValueError:
            phrase = ""
        head = f"HTTP {status} {phrase}".rstrip()
        if not body:
            return _text_result(f"{head} (empty response body)", True)
        excerpt = _decode(body[: max_error_text * 4], content_type)
        if len(excerpt) > max_error_text or len(body) > max_error_text * 4:
            excerpt = f"{excerpt[:max_error_text]}\n… [truncated: the body has {len(body):,} bytes]"
        return _text_result(f"{head}\n{excerpt}", True)
    if not body:
        return _text_result(f"HTTP {status}: the response has no body")
    if "json" in mime:
        try:
            value = orjson.loads(body)
        except orjson.JSONDecodeError:
            value = MISSING
        if value is not MISSING:
            structured = value if isinstance(value, dict) else {"result": value}
            result = _text_result(_clip(_decode(body, content_type), max_text))
            result["structuredContent"] = structured
            return result
        return _text_result(_clip(_decode(body, content_type), max_text))
    if mime.startswith("text/") or any(word in mime for word in _TEXTUAL):
        return _text_result(_clip(_decode(body, content_type), max_text))
    if not mime:
        try:
            return _text_result(_clip(body.decode("utf-8"), max_text))
        except UnicodeDecodeError:
            mime = "application/octet-stream"
    return {"content": [{"type": "resource", "resource": {
        "uri": RESPONSE_RESOURCE_URI, "mimeType": mime, "blob": base64.b64encode(body).decode("ascii")}}],
        "isError": False}

