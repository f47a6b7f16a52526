"""What an interceptor sees of a call and what it decides (docs/interceptors.md). Pure: the built-ins
inspect a `Subject` and return a `Decision`; the pipeline runs a host's chain of them, in order, on a
call's request and on its result."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from apps.kernel.problems import FieldProblem

#: Where a call is inspected: its request (before it is forwarded) and its result (before the client sees it).
PHASES = ("request", "result")
#: The methods whose calls are inspected.
METHODS = ("tools/call", "resources/read", "prompts/get")

_MISSING: Any = object()


class Payload:
    """One JSON value under inspection, held as JSON text, as a value, or both; the other is made
    once, when first asked for. Scanners read `text` (one pass over the whole value, keys and all:
    `"aws_secret_access_key": "…"` is seen with its context); structure walkers read `value`.

    On a call's request the value is the request's `params`; on its result, the JSON-RPC response
    (`{"jsonrpc", "id", "result"}` or `{… "error"}`), so a backend's error is inspected too."""

    __slots__ = ("_scan", "_text", "_value")

    def __init__(self, *, text: str | None = None, value: Any = _MISSING) -> None:
        if text is None and value is _MISSING:
            raise TypeError("a payload needs its text or its value")
        self._text = text
        self._value = value
        #: What `scannable` made of it: each scanner of a chain reads the same view.
        self._scan: tuple[Payload, str] | None = None

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = orjson.dumps(self._value).decode()
        return self._text

    @property
    def value(self) -> Any:
        if self._value is _MISSING:
            self._value = orjson.loads(self._text)  # type: ignore[arg-type]
        return self._value

    @property
    def parsed(self) -> bool:
        """Whether the value is at hand (no parse needed to read it)."""
        return self._value is not _MISSING


@dataclass(frozen=True, slots=True)
class Subject:
    """What one interceptor inspects."""

    phase: str  # request | result
    method: str  # tools/call | resources/read | prompts/get
    #: The tool or prompt name as the client called it, or the resource URI.
    target: str
    payload: Payload


@dataclass(frozen=True, slots=True)
class Decision:
    """What an interceptor decided. `findings` name what was found by type (`aws-access-key`,
    `email`…), never the values: they go to the audit row and the client's error."""

    action: str  # pass | rewrite | refuse | flag
    #: rewrite: the payload as it goes on.
    payload: Payload | None = None
    #: refuse: why, in the words of the client's error; otherwise a short note (may be "").
    reason: str = ""
    findings: tuple[str, ...] = ()
    #: flag: what the result's `_meta` carries for the client (under the gateway's key).
    meta: Mapping[str, Any] | None = None


PASS = Decision("pass")


class Inspector(Protocol):
    """A built-in, compiled once per configuration snapshot from its settings."""

    def inspect(self, subject: Subject) -> Decision: ...


@dataclass(frozen=True, slots=True)
class Span:
    """A stretch of a payload's text to replace with `[REDACTED:<kind>]`."""

    start: int
    end: int
    kind: str


def masked(payload: Payload, spans: Sequence[Span]) -> Payload | None:
    """`payload` with each span's text replaced by `[REDACTED:<kind>]` (overlapping spans merged:
    the first one's kind names the merge); None when the result is no longer JSON (a span cut
    through the value's syntax): the caller refuses rather than send what it could not mask."""
    if not spans:
        return payload
    text = payload.text
    pieces: list[str] = []
    at = 0
    for span in sorted(spans, key=lambda s: (s.start, -s.end)):
        if span.end <= at:
            continue
        start = max(span.start, at)
        if start > at or not pieces:
            pieces.append(text[at:start])
        pieces.append(f"[REDACTED:{span.kind}]")
        at = span.end
    pieces.append(text[at:])
    out = "".join(pieces)
    try:
        value = orjson.loads(out)
    except orjson.JSONDecodeError:
        return None
    return Payload(text=out, value=value)


def settings_problems(settings: object, known: Mapping[str, str]) -> list[FieldProblem]:
    """The problems of a built-in's settings that are not an object or name a setting it does
    not have; `known` maps each setting to what it is (for the words of the problem)."""
    if not isinstance(settings, Mapping):
        return [FieldProblem("settings", "settings must be an object")]
    unknown = sorted(set(settings) - set(known))
    if unknown:
        return [FieldProblem(f"settings.{unknown[0]}",
                             f"unknown setting {unknown[0]!r}; the settings are: {', '.join(sorted(known))}")]
    return []


def outermost(spans: Sequence[Span]) -> list[Span]:
    """`spans` without those inside another (a finding within a larger one is that one's part: a
    card's digits within an IBAN are the IBAN's)."""
    kept: list[Span] = []
    for span in sorted(spans, key=lambda s: (s.start, -s.end)):
        if kept and span.end <= kept[-1].end:
            continue
        kept.append(span)
    return kept


# What scanners read of a payload's JSON text.

#: The escapes that remain after the common ones are blanked, and what each is in the scan view.
_RARE_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|.)", re.DOTALL)
_RARE_SEEN = {"\\r": " \r", "\\/": " /"}


def scannable(payload: Payload) -> tuple[Payload, str]:
    """The payload to scan and mask, and its text's scan view.

    The view is the JSON text as the expressions should read it, character for character at the
    same positions: each escape's backslash is a space and what it stands for follows (`\\n` a line
    break, `\\t` a space, `\\"` a quote of the view's own, `''`). So `.` stops at a line's end, a
    word's edge is where the string's words end, and a `"` in the view is always the edge of a JSON
    string. A payload whose text writes characters as `\\uXXXX` or `\\/` is re-serialized first:
    escapes must not hide what they spell (`\\u0041KIA…`, `bob\\u0040example.com`); one that is not
    JSON is scanned as it is (masking it then fails, and the call is refused). Made once per
    payload: the built-ins of a chain that pass it on read the same."""
    if payload._scan is None:
        payload._scan = _scannable(payload)
    return payload._scan


def _scannable(payload: Payload) -> tuple[Payload, str]:
    text = payload.text
    if "\\" not in text:  # most results: no escapes at all (a one-character search is the fast one)
        return payload, text
    view = _common_escapes_blanked(text)
    if "\\" not in view:
        return payload, view
    if "\\u" in view or "\\/" in view:
        try:
            payload = Payload(value=payload.value)
        except orjson.JSONDecodeError:
            pass
        else:  # re-serialized: what is still a \\u escape is a control character
            view = _common_escapes_blanked(payload.text)
    if "\\" in view:
        view = _RARE_ESCAPE.sub(lambda escape: _RARE_SEEN.get(escape.group(), " " * len(escape.group())), view)
    return payload, view


def _common_escapes_blanked(text: str) -> str:
    # One pass each (a few microseconds for 2 KiB, however many escapes; a callback per escape costs
    # far more in text content that is itself JSON). Escaped backslashes first: `\\n` is a backslash
    # and an `n`, not a line break; left to right, as `replace` goes, is how JSON pairs them.
    return text.replace("\\\\", "  ").replace('\\"', "''").replace("\\n", " \n").replace("\\t", "  ")
