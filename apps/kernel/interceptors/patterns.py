"""Many regular expressions over one text, fast: Hyperscan, compiled once in prefilter mode, finds in
one pass which expressions may match (a superset: prefilter mode approximates what it cannot run,
look-behinds and all); Python's `re` then finds the matches of only those, in the text itself. A
2 KiB result is scanned by every detector in microseconds, where running each expression in turn
takes one or two milliseconds. Without Hyperscan (another platform), every expression is run: the
same matches, slower.

Hyperscan runs on bytes, one per character: its Unicode mode makes compiling some of the built-ins'
expressions take minutes. So it scans a stand-in of the text with one ASCII byte per character,
which keeps what the expressions can tell apart: ASCII as is; another character by what Python's
`re` sees in it — its one-letter ASCII case fold (the Kelvin sign is `k`: IGNORECASE matches it
so), else a space for whitespace, `0` for a digit, `a` for another word character, `~` for the rest.
`\\s`, `\\d`, `\\w`, `.` and lengths then mean for Hyperscan what they mean for `re` on the text. An
expression that names a non-ASCII character itself is always run by `re` (such expressions are
plain character classes, quick to run)."""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy

log = logging.getLogger(__name__)

try:
    import hyperscan
except ImportError:  # pragma: no cover - the wheel exists for x86-64 and arm64 Linux
    hyperscan = None

#: An expression that names a character outside ASCII (itself, or by an escape), or a negated class
#: that names ASCII letters or digits (`[^a-z]`): a character outside ASCII is in it for `re`, but its
#: stand-in may not be (é stands as `a`). Such expressions are always run by `re`.
_NAMES_NON_ASCII = re.compile(r"[^\x00-\x7f]|\\(?:u|U|N\{|x[89a-fA-F]|[0-3][0-7]{2})"
                              r"|\[\^(?:[^\]\\]|\\.)*?[A-Za-z0-9](?<!\\[A-Za-z0-9])")
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


class PatternSet:
    """Named expressions, matched together: `matches(text)` yields (name, match) for each match
    of each expression, expression by expression in the order given. Build one with
    `pattern_set`, which keeps it for the process: compiling takes up to seconds."""

    def __init__(self, patterns: Sequence[tuple[str, re.Pattern[str]]]) -> None:
        self._patterns = tuple(patterns)
        #: Expressions Hyperscan does not prefilter: always run.
        self._always: tuple[int, ...] = ()
        self._database: Any = None
        self._local = threading.local()  # a Hyperscan scratch space serves one scan at a time
        if hyperscan is not None and self._patterns:
            self._database = self._prefilter()

    def _prefilter(self) -> Any:
        entries: list[tuple[int, bytes, int]] = []
        always: list[int] = []
        for index, (_, pattern) in enumerate(self._patterns):
            if _NAMES_NON_ASCII.search(pattern.pattern):
                always.append(index)
                continue
            flag = hyperscan.HS_FLAG_PREFILTER | hyperscan.HS_FLAG_SINGLEMATCH | hyperscan.HS_FLAG_ALLOWEMPTY
            if pattern.flags & re.IGNORECASE:
                flag |= hyperscan.HS_FLAG_CASELESS
            if pattern.flags & re.DOTALL:
                flag |= hyperscan.HS_FLAG_DOTALL
            if pattern.flags & re.MULTILINE:
                flag |= hyperscan.HS_FLAG_MULTILINE
            entries.append((index, _without_verbose(pattern).encode(), flag))
        database = _compiled(entries)
        if database is None and entries:
            # One of them cannot be taken even approximately: find which, and run those in `re`.
            kept = []
            for entry in entries:
                if _compiled([entry]) is None:
                    always.append(entry[0])
                else:
                    kept.append(entry)
            database = _compiled(kept)
        self._always = tuple(sorted(always))
        return database

    def candidates(self, text: str) -> list[int]:
        """The indexes of the expressions that may match `text`, in order."""
        if self._database is None:
            return list(range(len(self._patterns)))
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = hyperscan.Scratch(self._database)
        hits: set[int] = set(self._always)

        def hit(index: int, start: int, end: int, flags: int, context: object) -> None:
            hits.add(index)

        self._database.scan(stand_in(text), match_event_handler=hit, scratch=scratch)
        return sorted(hits)

    def matches(self, text: str) -> Iterator[tuple[str, re.Match[str]]]:
        for index in self.candidates(text):
            name, pattern = self._patterns[index]
            for match in pattern.finditer(text):
                yield name, match


@functools.lru_cache(maxsize=64)
def _cached(patterns: tuple[tuple[str, re.Pattern[str]], ...]) -> PatternSet:
    return PatternSet(patterns)


def pattern_set(patterns: Sequence[tuple[str, re.Pattern[str]]]) -> PatternSet:
    """The `PatternSet` of `patterns`, compiled once per process (a configuration snapshot is
    rebuilt on every change; its interceptors' expressions rarely are)."""
    return _cached(tuple(patterns))


def _compiled(entries: Sequence[tuple[int, bytes, int]]) -> Any:
    if not entries:
        return None
    database = hyperscan.Database()
    try:
        database.compile(expressions=[e[1] for e in entries], ids=[e[0] for e in entries],
                         flags=[e[2] for e in entries])
    except hyperscan.error:
        return None
    return database


def stand_in(text: str) -> bytes:
    """`text` as Hyperscan scans it: one ASCII byte per character (see the module's docstring).
    Text with characters outside ASCII goes through a table of every code point's stand-in, filled
    as characters are met: microseconds for 2 KiB, where `str.translate` takes a hundred or more."""
    if text.isascii():
        return text.encode()
    codes = numpy.frombuffer(text.encode("utf-32-le"), dtype=numpy.uint32)
    found = _STAND_INS[codes]
    if not found.all():  # characters met for the first time (0 stands for "not known yet", and for NUL)
        unknown = codes[found == 0]
        for code in numpy.unique(unknown[unknown >= 128]).tolist():
            _STAND_INS[code] = ord(_stand_in(code))
        found = _STAND_INS[codes]
    return found.tobytes()


#: Each code point's stand-in byte (0: not known yet); ASCII stands for itself.
_STAND_INS = numpy.zeros(0x110000, dtype=numpy.uint8)
_STAND_INS[:128] = numpy.arange(128, dtype=numpy.uint8)


def _stand_in(code: int) -> str:
    if code < 128:
        return chr(code)
    char = chr(code)
    folded = char.casefold()
    if len(folded) == 1 and folded.isascii() and folded.isalpha():
        return folded
    # What IGNORECASE matches to an ASCII letter beyond the case folds (the dotless ı and dotted İ are
    # `i` to `re`): asked of `re` itself, once per character.
    if char.isalpha() and (letter := next((x for x in _LETTERS if re.fullmatch(re.escape(char), x, re.IGNORECASE)), None)):
        return letter
    if char.isspace():
        return " "
    if char.isdecimal():
        return "0"
    if char.isalnum():
        return "a"
    return "~"


def _without_verbose(pattern: re.Pattern[str]) -> str:
    """The expression's source as Hyperscan reads it: a verbose one's whitespace and comments
    dropped (Hyperscan has no verbose mode)."""
    source = pattern.pattern
    if not pattern.flags & re.VERBOSE:
        return source
    lines = [re.sub(r"(?<!\\)#.*$", "", line) for line in source.splitlines()]
    return re.sub(r"(?<!\\)\s+", "", "".join(lines))
