"""What text may stand where in an HTTP/1.1 request head, for the strings that end up there from
tenants' specs and configuration: header names, request targets and URLs.

The compiler refuses an OpenAPI document whose strings break these rules (with the string's JSON
pointer), and the gateway's HTTP client refuses to write a request that breaks them, so a string
that slipped past the first line (a tool stored before the check existed) still cannot add a
header line or a second request. Pure (stdlib only): the OpenAPI core uses it."""

from __future__ import annotations

import re

#: RFC 9110 §5.6.2: token = 1*tchar.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+").fullmatch
#: C0 controls (CR, LF, NUL among them), DEL and C1 controls.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]").search
#: The same and the space, which ends the request target in the request line.
_CONTROL_OR_SPACE = re.compile(r"[\x00-\x20\x7f-\x9f]").search
_NAMES = {"\r": "a carriage return (CR)", "\n": "a line feed (LF)", "\x00": "a NUL character", " ": "a space",
          "\t": "a tab"}
#: RFC 9110 §5.5: a field value is visible characters, spaces and tabs; CR, LF and NUL would end or cut it.
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]").search


def _describe(character: str) -> str:
    return _NAMES.get(character) or f"the control character U+{ord(character):04X}"


def is_token(text: str) -> bool:
    """Whether ``text`` is an RFC 9110 token, as header names and methods must be."""
    return _TOKEN(text) is not None


def header_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a header name (None when it can): it must be an RFC 9110 token."""
    if is_token(name):
        return None
    if not name:
        return "a header name cannot be empty"
    found = _CONTROL_OR_SPACE(name)
    what = f"holds {_describe(found.group())}" if found else "is not an HTTP token"
    return f"the header name {name[:80]!r} {what}; header names are letters, digits and !#$%&'*+-.^_`|~ only"


def target_problem(text: str, what: str) -> str | None:
    """Why ``text`` cannot be (part of) a URL or request target (None when it can): no control
    characters and no spaces. ``what`` names it in the message (``"the path"``)."""
    found = _CONTROL_OR_SPACE(text)
    if found is None:
        return None
    return (f"{what} {text[:80]!r} holds {_describe(found.group())}; URLs and paths cannot contain spaces or "
            "control characters (they would end the request line or add header lines)")


def text_problem(text: str, what: str) -> str | None:
    """Why ``text`` cannot go into a request head even encoded for its place (None when it can):
    no control characters. For query and cookie names, which are percent-encoded but never meant to
    hold line breaks, and media types, which become a header value."""
    found = _CONTROL(text)
    if found is None:
        return None
    return f"{what} {text[:80]!r} holds {_describe(found.group())}; control characters are not allowed"


def bad_value_character(value: str) -> str | None:
    """The description of the first character that cannot be in a header value (CR, LF, NUL and the
    other controls but tab), or None when there is none."""
    found = _BAD_VALUE(value)
    return None if found is None else _describe(found.group())


def bad_target_character(target: str) -> str | None:
    """The description of the first character that cannot be in a request target (controls and
    space), or None when there is none."""
    found = _CONTROL_OR_SPACE(target)
    return None if found is None else _describe(found.group())
