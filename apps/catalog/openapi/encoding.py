"""How a tool's arguments become the parts of an HTTP request: parameters serialised per OpenAPI style and
location (the table in `invoke`'s docstring), request bodies (JSON, form-urlencoded, multipart), and the
steps after them — the unknown and missing argument errors, the server URL and the credential.

Shared by the generic builder (``invoke``) and the generated ones (``codegen``), so that both follow the
rules in ``invoke``'s docstring word for word."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any
from urllib.parse import quote_plus

import orjson

from .model import ArgumentBinding
from .outgoing import BAD_HEADER, ArgumentError, Credential, InvokeError

# --------------------------------------------------------------------------- encoding helpers

_ALLOW_RESERVED_SAFE = ":/?[]@!$'()*,;"
_COOKIE_SAFE = "!#$&'()*+-./:<=>?@[]^_`{|}~"


def _quoter(safe: str) -> tuple[Callable[[str], str], Callable[[str], str | None]]:
    """A percent-encoder keeping RFC 3986 *unreserved* characters and ``safe``, and its memo's ``get``.

    Short strings are memoised in a bounded dict (values such as enums and ids repeat across calls);
    ASCII alphanumerics need no encoding; the rest goes byte by byte through a 256-entry table (several
    times faster than ``urllib.parse.quote`` on this interpreter). The generated builders (``codegen``)
    look values up in the memo themselves, which saves a call per value, and call the encoder on a miss
    (``None``, or ``""`` for the empty string) — so alphanumerics are memoised too."""
    keep = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~" + safe.encode())
    table = tuple(chr(b) if b in keep else f"%{b:02X}" for b in range(256)).__getitem__
    memo: dict[str, str] = {}

    def encode(text: str) -> str:
        hit = memo.get(text)
        if hit is not None:
            return hit
        if text.isalnum() and text.isascii():
            encoded = text
        else:
            try:
                encoded = "".join(map(table, text.encode()))
            except UnicodeEncodeError:
                raise ArgumentError("text is not valid Unicode (lone surrogate)") from None
        if len(text) <= _MEMO_MAX_LENGTH:
            if len(memo) >= _MEMO_MAX_ENTRIES:
                memo.clear()
            memo[text] = encoded
        return encoded
    return encode, memo.get


_MEMO_MAX_LENGTH = 128
_MEMO_MAX_ENTRIES = 8_192
encode, encode_memo = _quoter("")
encode_reserved, encode_reserved_memo = _quoter(_ALLOW_RESERVED_SAFE)
encode_cookie, encode_cookie_memo = _quoter(_COOKIE_SAFE)


def _raw(text: str) -> str:
    return text


def value_text(value: Any) -> str:
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
    return [f"{enc(str(k))}{inner}{enc(value_text(v))}" for k, v in value.items()]


def query_appender(b: ArgumentBinding, enc: Callable[[str], str], joiner: str = "&") -> Appender:
    name = b.name or b.argument
    key = enc(name)
    prefix = key + "="
    if b.content_type is not None:
        as_json = _is_json(b.content_type)

        def content(value: Any, out: list[str]) -> None:
            text = json_text(value) if as_json else value_text(value)
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
                    out.append(f"{enc(base)}={enc(value_text(item))}")
            else:
                out.append(f"{enc(base)}={enc(value_text(value))}")
        return deep
    if explode:
        def exploded(value: Any, out: list[str]) -> None:
            if isinstance(value, str):
                out.append(prefix + enc(value))
            elif isinstance(value, list | tuple):
                out.extend([prefix + enc(value_text(item)) for item in value])
            elif isinstance(value, dict):
                out.extend(_pairs(value, enc, "="))
            else:
                out.append(prefix + enc(value_text(value)))
        return exploded

    def flat(value: Any, out: list[str]) -> None:
        if isinstance(value, str):
            out.append(prefix + enc(value))
        elif isinstance(value, list | tuple):
            out.append(prefix + delimiter.join([enc(value_text(item)) for item in value]))
        elif isinstance(value, dict):
            out.append(prefix + delimiter.join(_pairs(value, enc, delimiter)))
        else:
            out.append(prefix + enc(value_text(value)))
    return flat


def json_text(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise ArgumentError(f"value cannot be serialised as JSON: {exc}") from None


def _simple(value: Any, enc: Callable[[str], str], explode: bool, sep: str = ",") -> str:
    if isinstance(value, str):
        return enc(value)
    if isinstance(value, list | tuple):
        return sep.join([enc(value_text(item)) for item in value])
    if isinstance(value, dict):
        return sep.join(_pairs(value, enc, "=" if explode else ","))
    return enc(value_text(value))


def path_renderer(b: ArgumentBinding) -> Renderer:
    name = b.name or b.argument
    if b.content_type is not None:
        as_json = _is_json(b.content_type)

        def content(value: Any) -> str:
            return segment_guard(encode(json_text(value) if as_json else value_text(value)), name)
        return content
    style, explode = b.style or "simple", bool(b.explode)
    if style == "label":
        sep = "." if explode else ","

        def label(value: Any) -> str:
            return "." + _simple(value, encode, explode, sep)
        return label
    if style == "matrix":
        key = encode(name)

        def matrix(value: Any) -> str:
            if isinstance(value, list | tuple):
                if explode:
                    return "".join([f";{key}={encode(value_text(item))}" for item in value])
                return f";{key}=" + ",".join([encode(value_text(item)) for item in value])
            if isinstance(value, dict):
                if explode:
                    return "".join([";" + pair for pair in _pairs(value, encode, "=")])
                return f";{key}=" + ",".join(_pairs(value, encode, ","))
            text = encode(value_text(value))
            return f";{key}={text}" if text else f";{key}"
        return matrix

    def simple(value: Any) -> str:
        return segment_guard(_simple(value, encode, explode), name)
    return simple


def segment_guard(text: str, name: str) -> str:
    if not text:
        raise ArgumentError(f"path parameter {name!r} must not be empty")
    if text == "." or text == "..":
        return "%2E" * len(text)
    return text


def header_renderer(b: ArgumentBinding) -> Renderer:
    name = b.name or b.argument
    as_json = _is_json(b.content_type)
    explode = bool(b.explode)

    def header(value: Any) -> str:
        text = json_text(value) if as_json else _simple(value, _raw, explode)
        if BAD_HEADER(text):
            raise ArgumentError(f"header {name!r} must not contain CR, LF or NUL characters")
        return text
    return header


_BOUNDARIES = itertools.count(1)

# --------------------------------------------------------------------------- bodies


def json_bytes(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise ArgumentError(f"body cannot be serialised as JSON: {exc}") from None


def object_body(kind: str, content_type: str | None, values: dict[str, Any],
                   boundary: str | None) -> tuple[bytes, str]:
    """``body_mode="properties"``: ``kind`` and ``content_type`` are the plan's ``body_kind`` and
    ``body_content_type``."""
    if kind == "form":
        return _urlencoded(values), content_type or "application/x-www-form-urlencoded"
    if kind == "multipart":
        return _multipart(values, boundary)
    return json_bytes(values), content_type or "application/json"


def whole_body(kind: str, content_type: str | None, value: Any, boundary: str | None) -> tuple[bytes, str]:
    """``body_mode="whole"``: ``value`` is the body."""
    declared = content_type or "application/octet-stream"
    if kind == "form" and isinstance(value, dict):
        return _urlencoded(value), declared
    if kind == "multipart" and isinstance(value, dict):
        return _multipart(value, boundary)
    if kind == "json" or not isinstance(value, str):
        if "*" in declared:
            declared = "application/json"
        return json_bytes(value), declared
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
            text = json_text(item) if isinstance(item, dict | list | tuple) else value_text(item)
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
                parts.append((str(key), json_bytes(item), True))
            else:
                parts.append((str(key), value_text(item).encode(), False))
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


# --------------------------------------------------------------------------- after the arguments


def unknown_arguments_error(arguments: Mapping[str, Any], known: Collection[str]) -> ArgumentError:
    unknown = sorted(str(k) for k in arguments if k not in known)
    return ArgumentError(f"unknown argument{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}")


def missing_arguments_error(missing: list[str]) -> ArgumentError:
    return ArgumentError(f"missing required argument{'s' if len(missing) > 1 else ''}: {', '.join(missing)}")


def server_url(server: str, base_url: str | None) -> str:
    if base_url is not None:
        base = base_url.rstrip("/")
        server = base if "://" in server else base + server
    if "://" not in server:
        raise InvokeError("the API has no absolute server URL; configure a base URL for this backend")
    return server


def credential_apply(credential: Credential, headers: list[tuple[str, str]], query: list[str], cookies: list[str],
           header_names: Iterable[str]) -> None:
    """Add ``credential``, replacing any argument of the same name. ``header_names`` are the lower-cased
    names of the tool's header parameters (the only headers in the list yet): when the credential's
    header is not among them, nothing needs removing."""
    kind = credential.kind
    if (header := credential.header()) is not None:
        low = header[0].lower()
        if low in header_names:
            headers[:] = [h for h in headers if h[0].lower() != low]
        headers.append(header)
    elif kind == "api_key_query":
        # Exploded object values add pairs named by their keys, so any entry may carry the name.
        prefix = encode(credential.name) + "="
        query[:] = [q for q in query if not q.startswith(prefix)]
        query.append(prefix + encode(credential.value))
    else:
        prefix = encode_cookie(credential.name) + "="
        cookies[:] = [c for c in cookies if not c.startswith(prefix)]
        cookies.append(prefix + encode_cookie(credential.value))
