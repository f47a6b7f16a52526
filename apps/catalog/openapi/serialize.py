"""Parameter serialisation per OpenAPI style and location (the table in `invoke`'s docstring)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from .calls import _BAD_HEADER, ArgumentError
from .model import ArgumentBinding

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
_enc, _enc_memo = _quoter("")
_enc_reserved, _enc_reserved_memo = _quoter(_ALLOW_RESERVED_SAFE)
_enc_cookie, _enc_cookie_memo = _quoter(_COOKIE_SAFE)


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


