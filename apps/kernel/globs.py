"""Shell-style tool-name globs (`*`, `?`, `[...]`; case-sensitive, whole name), as access rules, tool
costs and a host's tool curation write them."""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Sequence


def glob_problem(pattern: str) -> str | None:
    """Why a glob would not match what its author meant, or None. `fnmatch` reads a `[` that is
    never closed as a literal bracket, so `Describe[` would silently match only a tool of that name."""
    start = pattern.find("[")
    while start != -1:
        inner = start + 1
        if pattern[inner : inner + 1] == "!":
            inner += 1
        if pattern[inner : inner + 1] == "]":  # a `]` right after `[` or `[!` is a member, not the end
            inner += 1
        close = pattern.find("]", inner)
        if close == -1:
            return f"the glob {pattern[:60]!r} opens a character class with '[' that is never closed with ']'"
        start = pattern.find("[", close + 1)
    return None


def globs_compile(patterns: Sequence[str]) -> re.Pattern[str]:
    """One regular expression matching a whole name that any of `patterns` matches."""
    return _compiled(tuple(patterns))


@functools.lru_cache(maxsize=256)  # a host's rules are compiled for each of its map keys alike
def _compiled(patterns: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))
