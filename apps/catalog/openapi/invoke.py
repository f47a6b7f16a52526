"""Invoker core: a ``tools/call`` of a compiled OpenAPI tool → an HTTP request, and the HTTP response →
an MCP ``CallToolResult``. Pure (stdlib + orjson): the transport lives elsewhere.

**Serialisation** follows the OpenAPI 3.1.1 style table (RFC 6570 based):

* path — ``simple`` / ``label`` / ``matrix``, explode on or off; every character outside RFC 3986
  *unreserved* is percent-encoded inside a value (so ``/``, ``?``, ``#``, ``,`` … cannot escape the
  segment); a value that would form the dot segment ``.`` or ``..`` is sent as ``%2E``/``%2E%2E`` and an
  empty path value is refused (it would change which resource the URL names);
* query — ``form`` (explode on/off), ``spaceDelimited`` (``%20``), ``pipeDelimited`` (``%7C``),
  ``tabDelimited`` (``%09``, what the compiler maps Swagger ``tsv`` to) and ``deepObject``
  (``color%5BR%5D=100``; nested objects recurse, ``a[b][c]``). The delimited styles with ``explode: true``
  (undefined by the spec) behave like exploded ``form``. ``allowReserved`` leaves ``:/?[]@!$'()*,;``
  unencoded but still encodes ``&``, ``=``, ``#`` and ``+``, which would change the query's structure;
* header — ``simple``, no percent-encoding; a value containing CR, LF or NUL is refused;
* cookie — ``form``; pairs joined with ``"; "`` into one ``Cookie`` header; characters that are not
  RFC 6265 cookie-octets (and ``%``) are percent-encoded.

Scalars are rendered as ``true``/``false`` for booleans and ``str()`` for numbers; arrays/objects nested
inside an array or object value are rendered as JSON text. Parameters defined with ``content`` instead of
``schema`` are serialised as JSON text (JSON media types) or ``str()``, then encoded for their location.

**None** — an argument whose value is ``None`` (JSON ``null``) is treated as absent for path, query,
header and cookie parameters (and so is *missing* when required); body arguments send ``null``.

**Bodies** — JSON media types: ``orjson`` of the body object (``body_mode="properties"``) or of the value
(``"whole"``); ``application/x-www-form-urlencoded``: ``key=value`` with ``+`` for spaces, arrays repeat
the key, objects are sent as JSON text; ``multipart/form-data``: one part per property, arrays of scalars
as repeated parts, objects/arrays of non-scalars as a JSON part (``Content-Type: application/json``).
Any other media type: a string is sent as UTF-8, anything else as JSON. An optional body with no body
argument given is not sent; a required one with all properties omitted is sent as ``{}`` (empty form).
``headers`` contains ``Content-Type`` (and ``Cookie``) itself; ``content_type`` repeats it for convenience.

**Base URL rule** — the spec's first server URL is used, with its path prefix (``https://h/v1`` + ``/pets``
→ ``https://h/v1/pets``). ``base_url`` overrides it: if the spec's server URL is *absolute* it is replaced
entirely, prefix included (``base_url`` is the new server URL); if it is *relative* (``/api/v3``, as
uploaded specs often have, or ``""``) it is resolved against ``base_url`` (``base_url + "/api/v3" + path``),
as OpenAPI resolves relative servers against the document's location. Without an absolute result,
:class:`InvokeError` is raised.

Plans (per-tool precomputation) are cached by the identity of the :class:`CompiledTool`.
"""

from __future__ import annotations

import base64
import http
import itertools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote_plus

import orjson

from .model import ArgumentBinding, CompiledTool

CredentialKind = Literal["api_key_header", "api_key_query", "api_key_cookie", "bearer", "basic"]
_CREDENTIAL_KINDS = frozenset({"api_key_header", "api_key_query", "api_key_cookie", "bearer", "basic"})


class InvokeError(ValueError):
    """The request cannot be built; the message is meant for the tool's caller (a tool error result)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ArgumentError(InvokeError):
    """The arguments are wrong: missing, unknown, or not serialisable as the operation requires."""


@dataclass(frozen=True, slots=True)
class Credential:
    """An upstream credential applied to every request. ``name`` is the header, query parameter or
    cookie name for the ``api_key_*`` kinds; ``value`` is the key, the bearer token or the password;
    ``username`` is used by ``basic`` only. A credential replaces any argument of the same name."""

    kind: CredentialKind
    value: str = field(repr=False)
    name: str = ""
    username: str = ""

    def __post_init__(self) -> None:
        if self.kind not in _CREDENTIAL_KINDS:
            raise ValueError(f"unknown credential kind {self.kind!r}")
        if self.kind.startswith("api_key_") and not self.name:
            raise ValueError(f"credential kind {self.kind!r} needs a name")
        if self.kind == "basic" and ":" in self.username:
            raise ValueError("a basic-auth username cannot contain ':'")
        for text in (self.value, self.name, self.username):
            if not isinstance(text, str) or _BAD_HEADER(text):
                raise ValueError("credential fields must be strings without CR, LF or NUL")


@dataclass(frozen=True, slots=True)
class OutgoingRequest:
    method: str
    url: str
    headers: tuple[tuple[str, str], ...]
    body: bytes = b""
    content_type: str | None = None


# --------------------------------------------------------------------------- encoding helpers

_BAD_HEADER = re.compile(r"[\r\n\x00]").search
_ALLOW_RESERVED_SAFE = ":/?[]@!$'()*,;"
_COOKIE_SAFE = "!#$&'()*+-./:<=>?@[]^_`{|}~"


def _quoter(safe: str) -> Callable[[str], str]:
    """A percent-encoder keeping RFC 3986 *unreserved* characters and ``safe``.

    Fast paths: ASCII alphanumerics are returned as they are; other short strings are memoised in a
    bounded dict (values such as enums and ids repeat across calls); the rest goes byte by byte through
    a 256-entry table (several times faster than ``urllib.parse.quote`` on this interpreter)."""
    keep = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~" + safe.encode())
    table = tuple(chr(b) if b in keep else f"%{b:02X}" for b in range(256)).__getitem__
    memo: dict[str, str] = {}

    def encode(text: str) -> str:
        if text.isalnum() and text.isascii():
            return text
        hit = memo.get(text)
        if hit is not None:
            return hit
        try:
            encoded = "".join(map(table, text.encode()))
        except UnicodeEncodeError:
            raise ArgumentError("text is not valid Unicode (lone surrogate)") from None
        if len(text) <= _MEMO_MAX_LENGTH:
            if len(memo) >= _MEMO_MAX_ENTRIES:
                memo.clear()
            memo[text] = encoded
        return encoded
    return encode


_MEMO_MAX_LENGTH = 128
_MEMO_MAX_ENTRIES = 8_192
_enc = _quoter("")
_enc_reserved = _quoter(_ALLOW_RESERVED_SAFE)
_enc_cookie = _quoter(_COOKIE_SAFE)


def _raw(text: str) -> str:
    return text


def _text(value: Any) -> str:
    """A scalar as text; arrays/objects (only reached when nested) as JSON."""
    if isinstance(value, str):
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return ""
    if isinstance(value, int | float):
        return str(value)
    try:
        return orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise ArgumentError(f"value cannot be serialised: {exc}") from None


def _is_json(media_type: str | None) -> bool:
    return media_type is not None and "json" in media_type.lower()


# --------------------------------------------------------------------------- per-style serialisers
# Query and cookie serialisers append encoded ``name=value`` pairs to a list; path and header ones
# return the text to put in place.

Appender = Callable[[Any, list[str]], None]
Renderer = Callable[[Any], str]


def _pairs(value: dict, enc: Callable[[str], str], inner: str) -> list[str]:
    return [f"{enc(str(k))}{inner}{enc(_text(v))}" for k, v in value.items()]


def _query_appender(b: ArgumentBinding, enc: Callable[[str], str], joiner: str = "&") -> Appender:
    name = b.name or b.argument
    key = enc(name)
    prefix = key + "="
    if b.content_type is not None:
        as_json = _is_json(b.content_type)

        def content(value: Any, out: list[str]) -> None:
            text = _json_text(value) if as_json else _text(value)
            out.append(prefix + enc(text))
        return content
    style = b.style or "form"
    delimiter = {"spaceDelimited": "%20", "pipeDelimited": "%7C", "tabDelimited": "%09"}.get(style, ",")
    explode = bool(b.explode)
    if style == "deepObject":
        def deep(value: Any, out: list[str], base: str = name) -> None:
            if isinstance(value, dict):
                for k, v in value.items():
                    deep(v, out, f"{base}[{k}]")
            elif isinstance(value, list | tuple):
                for item in value:
                    out.append(f"{enc(base)}={enc(_text(item))}")
            else:
                out.append(f"{enc(base)}={enc(_text(value))}")
        return deep
    if explode:
        def exploded(value: Any, out: list[str]) -> None:
            if isinstance(value, str):
                out.append(prefix + enc(value))
            elif isinstance(value, list | tuple):
                out.extend([prefix + enc(_text(item)) for item in value])
            elif isinstance(value, dict):
                out.extend(_pairs(value, enc, "="))
            else:
                out.append(prefix + enc(_text(value)))
        return exploded

    def flat(value: Any, out: list[str]) -> None:
        if isinstance(value, str):
            out.append(prefix + enc(value))
        elif isinstance(value, list | tuple):
            out.append(prefix + delimiter.join([enc(_text(item)) for item in value]))
        elif isinstance(value, dict):
            out.append(prefix + delimiter.join(_pairs(value, enc, delimiter)))
        else:
            out.append(prefix + enc(_text(value)))
    return flat


def _json_text(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise ArgumentError(f"value cannot be serialised as JSON: {exc}") from None


def _simple(value: Any, enc: Callable[[str], str], explode: bool, sep: str = ",") -> str:
    if isinstance(value, str):
        return enc(value)
    if isinstance(value, list | tuple):
        return sep.join([enc(_text(item)) for item in value])
    if isinstance(value, dict):
        return sep.join(_pairs(value, enc, "=" if explode else ","))
    return enc(_text(value))


def _path_renderer(b: ArgumentBinding) -> Renderer:
    name = b.name or b.argument
    if b.content_type is not None:
        as_json = _is_json(b.content_type)

        def content(value: Any) -> str:
            return _guard_segment(_enc(_json_text(value) if as_json else _text(value)), name)
        return content
    style, explode = b.style or "simple", bool(b.explode)
    if style == "label":
        sep = "." if explode else ","

        def label(value: Any) -> str:
            return "." + _simple(value, _enc, explode, sep)
        return label
    if style == "matrix":
        key = _enc(name)

        def matrix(value: Any) -> str:
            if isinstance(value, list | tuple):
                if explode:
                    return "".join([f";{key}={_enc(_text(item))}" for item in value])
                return f";{key}=" + ",".join([_enc(_text(item)) for item in value])
            if isinstance(value, dict):
                if explode:
                    return "".join([";" + pair for pair in _pairs(value, _enc, "=")])
                return f";{key}=" + ",".join(_pairs(value, _enc, ","))
            text = _enc(_text(value))
            return f";{key}={text}" if text else f";{key}"
        return matrix

    def simple(value: Any) -> str:
        return _guard_segment(_simple(value, _enc, explode), name)
    return simple


def _guard_segment(text: str, name: str) -> str:
    if not text:
        raise ArgumentError(f"path parameter {name!r} must not be empty")
    if text == "." or text == "..":
        return "%2E" * len(text)
    return text


def _header_renderer(b: ArgumentBinding) -> Renderer:
    name = b.name or b.argument
    as_json = _is_json(b.content_type)
    explode = bool(b.explode)

    def header(value: Any) -> str:
        text = _json_text(value) if as_json else _simple(value, _raw, explode)
        if _BAD_HEADER(text):
            raise ArgumentError(f"header {name!r} must not contain CR, LF or NUL characters")
        return text
    return header


# --------------------------------------------------------------------------- plans

_PATH, _QUERY, _HEADER, _COOKIE, _BODY = range(5)
_LOCATION_CODE = {"path": _PATH, "query": _QUERY, "header": _HEADER, "cookie": _COOKIE, "body": _BODY}
_TEMPLATE = re.compile(r"{([^{}]+)}")


@dataclass(frozen=True, slots=True)
class _Entry:
    argument: str
    code: int
    name: str | None
    fn: Any  # Appender (query/cookie), Renderer (path/header) or None (body)
    slot: int = -1  # index into the path pieces, for path arguments
    #: Fast path for ``str``/``int`` values of query/cookie/header parameters (not ``content``-typed):
    #: query/cookie append ``prefix + enc(text)``; headers use the text as is.
    fast: bool = False
    prefix: str = ""
    enc: Any = None


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything about a tool's request that does not depend on the arguments."""

    method: str
    server: str
    pieces: tuple[str, ...]  # path template split on placeholders; odd indexes are filled
    entries: tuple[_Entry, ...]
    arguments: frozenset[str]
    required: tuple[str, ...]
    body_mode: str
    body_kind: str  # "json", "form", "multipart", "other" or "none"
    body_content_type: str | None
    body_required: bool
    query_joiner: str  # "?" or "&" (when the path template already has a query)


def _body_kind(content_type: str | None) -> str:
    low = (content_type or "").lower()
    if not low:
        return "none"
    if "json" in low:
        return "json"
    if low.startswith("application/x-www-form-urlencoded"):
        return "form"
    if low.startswith("multipart/form-data"):
        return "multipart"
    return "other"


def make_plan(tool: CompiledTool) -> Plan:
    binding = tool.binding
    pieces = _TEMPLATE.split(binding.path)  # [lit, name, lit, name, lit ...]
    slots = {pieces[i]: i for i in range(1, len(pieces), 2)}
    entries: list[_Entry] = []
    for b in binding.arguments:
        code = _LOCATION_CODE[b.location]
        if code == _PATH:
            slot = slots.get(b.name or b.argument, -1)
            entries.append(_Entry(b.argument, code, b.name, _path_renderer(b), slot))
        elif code in (_QUERY, _COOKIE):
            enc = _enc_cookie if code == _COOKIE else _enc_reserved if b.allow_reserved else _enc
            fn = _query_appender(b, enc)
            entries.append(_Entry(b.argument, code, b.name, fn, fast=b.content_type is None,
                                  prefix=enc(b.name or b.argument) + "=", enc=enc))
        elif code == _HEADER:
            entries.append(_Entry(b.argument, code, b.name, _header_renderer(b), fast=b.content_type is None))
        else:
            entries.append(_Entry(b.argument, code, b.name, None))
    return Plan(
        method=binding.method,
        server=binding.servers[0] if binding.servers else "",
        pieces=tuple(pieces),
        entries=tuple(entries),
        arguments=frozenset(e.argument for e in entries),
        required=tuple(b.argument for b in binding.arguments if b.required),
        body_mode=binding.body_mode,
        body_kind=_body_kind(binding.body_content_type) if binding.body_mode != "none" else "none",
        body_content_type=binding.body_content_type,
        body_required=binding.body_required,
        query_joiner="&" if "?" in binding.path else "?",
    )


_PLANS: dict[int, tuple[CompiledTool, Plan]] = {}
_MAX_PLANS = 16_384


def plan_for(tool: CompiledTool) -> Plan:
    """The cached :class:`Plan` of ``tool`` (keyed by identity; the tool is kept alive by the cache)."""
    hit = _PLANS.get(id(tool))
    if hit is not None and hit[0] is tool:
        return hit[1]
    plan = make_plan(tool)
    if len(_PLANS) >= _MAX_PLANS:
        _PLANS.clear()
    _PLANS[id(tool)] = (tool, plan)
    return plan


# --------------------------------------------------------------------------- build_request

_MISSING = object()
_BOUNDARIES = itertools.count(1)


def build_request(
    tool: CompiledTool,
    arguments: Mapping[str, Any],
    *,
    base_url: str | None = None,
    credential: Credential | None = None,
    boundary: str | None = None,
) -> OutgoingRequest:
    """The HTTP request for a call of ``tool`` with ``arguments`` (see the module rules).

    Raises :class:`ArgumentError` for missing/unknown/unserialisable arguments and header values with
    CR/LF, and :class:`InvokeError` when no absolute URL can be formed. ``boundary`` fixes the multipart
    boundary (default: ``mcpgw-boundary-<counter>``).
    """
    if not isinstance(arguments, Mapping):
        raise ArgumentError("arguments must be an object")
    plan = plan_for(tool)
    pieces: list[str] | None = None
    query: list[str] = []
    headers: list[tuple[str, str]] = []
    cookies: list[str] = []
    body_values: dict[str, Any] = {}
    whole: Any = _MISSING
    seen = 0
    missing: list[str] | None = None
    get = arguments.get
    for entry in plan.entries:
        value = get(entry.argument, _MISSING)
        if value is _MISSING:
            continue
        seen += 1
        code = entry.code
        if code == _BODY:
            if entry.name is None:
                whole = value
            else:
                body_values[entry.name] = value
            continue
        if value is None:
            continue
        if entry.fast:
            kind = type(value)
            if kind is str:
                if code == _HEADER:
                    if _BAD_HEADER(value):
                        raise ArgumentError(f"header {entry.name!r} must not contain CR, LF or NUL characters")
                    headers.append((entry.name, value))
                elif code == _QUERY:
                    query.append(entry.prefix + entry.enc(value))
                else:
                    cookies.append(entry.prefix + entry.enc(value))
                continue
            if kind is int:  # digits and "-" need no encoding
                if code == _HEADER:
                    headers.append((entry.name, str(value)))
                elif code == _QUERY:
                    query.append(entry.prefix + str(value))
                else:
                    cookies.append(entry.prefix + str(value))
                continue
        if code == _QUERY:
            entry.fn(value, query)
        elif code == _HEADER:
            headers.append((entry.name, entry.fn(value)))
        elif code == _PATH:
            if pieces is None:
                pieces = list(plan.pieces)
            if entry.slot >= 0:
                pieces[entry.slot] = entry.fn(value)
        else:
            entry.fn(value, cookies)
    if seen != len(arguments):
        unknown = sorted(str(k) for k in arguments if k not in plan.arguments)
        raise ArgumentError(f"unknown argument{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}")
    for name in plan.required:
        if get(name) is None:
            missing = missing or []
            missing.append(name)
    if missing:
        raise ArgumentError(f"missing required argument{'s' if len(missing) > 1 else ''}: {', '.join(missing)}")

    path = "".join(pieces) if pieces is not None else "".join(plan.pieces)
    server = _server(plan.server, base_url)

    body = b""
    content_type: str | None = None
    if plan.body_mode == "properties":
        if body_values or plan.body_required:
            body, content_type = _encode_object(plan, body_values, boundary)
    elif plan.body_mode == "whole" and whole is not _MISSING:
        body, content_type = _encode_whole(plan, whole, boundary)

    if credential is not None:
        _apply(credential, headers, query, cookies)
    if cookies:
        headers.append(("Cookie", "; ".join(cookies)))
    if content_type is not None:
        headers.append(("Content-Type", content_type))
    url = server + path
    if query:
        url = url + plan.query_joiner + "&".join(query)
    return OutgoingRequest(plan.method, url, tuple(headers), body, content_type)


def _server(server: str, base_url: str | None) -> str:
    if base_url is not None:
        base = base_url.rstrip("/")
        server = base if "://" in server else base + server
    if "://" not in server:
        raise InvokeError("the API has no absolute server URL; configure a base URL for this backend")
    return server


def _apply(credential: Credential, headers: list[tuple[str, str]], query: list[str], cookies: list[str]) -> None:
    kind = credential.kind
    if kind in ("bearer", "basic", "api_key_header"):
        header = credential.name if kind == "api_key_header" else "Authorization"
        low = header.lower()
        headers[:] = [h for h in headers if h[0].lower() != low]
        if kind == "bearer":
            headers.append((header, f"Bearer {credential.value}"))
        elif kind == "basic":
            token = base64.b64encode(f"{credential.username}:{credential.value}".encode()).decode("ascii")
            headers.append((header, f"Basic {token}"))
        else:
            headers.append((header, credential.value))
    elif kind == "api_key_query":
        prefix = _enc(credential.name) + "="
        query[:] = [q for q in query if not q.startswith(prefix)]
        query.append(prefix + _enc(credential.value))
    else:
        prefix = _enc_cookie(credential.name) + "="
        cookies[:] = [c for c in cookies if not c.startswith(prefix)]
        cookies.append(prefix + _enc_cookie(credential.value))


# --------------------------------------------------------------------------- bodies


def _dumps(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise ArgumentError(f"body cannot be serialised as JSON: {exc}") from None


def _encode_object(plan: Plan, values: dict[str, Any], boundary: str | None) -> tuple[bytes, str]:
    kind = plan.body_kind
    if kind == "form":
        return _urlencoded(values), plan.body_content_type or "application/x-www-form-urlencoded"
    if kind == "multipart":
        return _multipart(values, boundary)
    return _dumps(values), plan.body_content_type or "application/json"


def _encode_whole(plan: Plan, value: Any, boundary: str | None) -> tuple[bytes, str]:
    kind, declared = plan.body_kind, plan.body_content_type or "application/octet-stream"
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
            value = _MISSING
        if value is not _MISSING:
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
