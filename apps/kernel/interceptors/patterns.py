"""Many regular expressions over one text, fast: Hyperscan, compiled once in prefilter mode, finds in
one pass which expressions may match (a superset: prefilter mode approximates what it cannot run,
look-behinds and all); Python's `re` then finds the matches of only those. A 2 KiB result is
scanned by every detector in microseconds, where running each expression in turn takes most of a
millisecond. Without Hyperscan (another platform), every expression is run: the same matches, slower."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator, Sequence
from typing import Any

log = logging.getLogger(__name__)

try:
    import hyperscan
except ImportError:  # pragma: no cover - the wheel exists for x86-64 and arm64 Linux
    hyperscan = None


class PatternSet:
    """Named expressions, matched together: `matches(text)` yields (name, match) for each match
    of each expression, expression by expression in the order given."""

    def __init__(self, patterns: Sequence[tuple[str, re.Pattern[str]]]) -> None:
        self._patterns = tuple(patterns)
        #: Expressions Hyperscan could not take even approximately: always run.
        self._always: tuple[int, ...] = ()
        self._database: Any = None
        self._local = threading.local()  # a Hyperscan scratch space is one scan's at a time
        if hyperscan is not None and self._patterns:
            self._database = self._prefilter()

    def _prefilter(self) -> Any:
        expressions: list[bytes] = []
        ids: list[int] = []
        flags: list[int] = []
        always: list[int] = []
        for index, (_, pattern) in enumerate(self._patterns):
            flag = hyperscan.HS_FLAG_PREFILTER | hyperscan.HS_FLAG_SINGLEMATCH | hyperscan.HS_FLAG_ALLOWEMPTY
            flag |= hyperscan.HS_FLAG_UTF8 | hyperscan.HS_FLAG_UCP
            if pattern.flags & re.IGNORECASE:
                flag |= hyperscan.HS_FLAG_CASELESS
            if pattern.flags & re.DOTALL:
                flag |= hyperscan.HS_FLAG_DOTALL
            if pattern.flags & re.MULTILINE:
                flag |= hyperscan.HS_FLAG_MULTILINE
            source = _without_verbose(pattern)
            try:  # one at a time first: a bad one must not take the others' prefilter away
                hyperscan.Database().compile(expressions=[source.encode()], ids=[index], flags=[flag])
            except hyperscan.error:
                always.append(index)
                continue
            expressions.append(source.encode())
            ids.append(index)
            flags.append(flag)
        self._always = tuple(always)
        if not expressions:
            return None
        database = hyperscan.Database()
        database.compile(expressions=expressions, ids=ids, flags=flags)
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

        self._database.scan(text.encode(), match_event_handler=hit, scratch=scratch)
        return sorted(hits)

    def matches(self, text: str) -> Iterator[tuple[str, re.Match[str]]]:
        for index in self.candidates(text):
            name, pattern = self._patterns[index]
            for match in pattern.finditer(text):
                yield name, match


def _without_verbose(pattern: re.Pattern[str]) -> str:
    """The expression's source as Hyperscan reads it: a verbose one's whitespace and comments dropped
    (Hyperscan has no verbose mode; `(?x)` is read by PCRE, which Hyperscan follows, but not in
    every construct, so the source is flattened)."""
    source = pattern.pattern
    if not pattern.flags & re.VERBOSE:
        return source
    lines = [re.sub(r"(?<!\\)#.*$", "", line) for line in source.splitlines()]
    return re.sub(r"(?<!\\)\s+", "", "".join(lines))
