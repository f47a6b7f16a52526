"""Tool and argument names.

**Tool naming rule** (deterministic, depends only on the document):

1. The base is the ``operationId``; without one (or when it sanitises to nothing) it is
   ``<method>_<path>``, e.g. ``get /pets/{petId}`` → ``get_pets_petId``.
2. Sanitising replaces every run of characters outside ``[A-Za-z0-9_.-]`` by one ``_`` and strips
   ``_`` from both ends.
3. Names longer than the cap (default 64) keep their first ``cap - 9`` characters followed by ``_``
   and the first 8 hex digits of the SHA-1 of the full sanitised name, so distinct long names stay
   distinct and stable.
4. Collisions are resolved in document order (paths in document order, operations in the order
   written in the path item): the first operation keeps the name, later ones get ``_2``, ``_3``, …
   (the base is shortened so the suffixed name still fits the cap).

Argument (``inputSchema`` property) names use the same sanitising when the original name is not
already ``[A-Za-z0-9_.-]{1,64}`` (some LLM APIs reject other property keys); the binding keeps the
original name.
"""

from __future__ import annotations

import hashlib
import re

_INVALID_RUN = re.compile(r"[^A-Za-z0-9_.-]+")
_VALID_ARGUMENT = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_HASH_LENGTH = 8


def sanitize(raw: str) -> str:
    """``raw`` with each run of invalid characters replaced by ``_``, outer ``_`` stripped (may be "")."""
    return _INVALID_RUN.sub("_", raw).strip("_")


def cap(name: str, limit: int) -> str:
    """``name`` shortened to ``limit`` characters with a stable hash suffix when it is too long."""
    if len(name) <= limit:
        return name
    digest = hashlib.sha1(name.encode("utf-8"), usedforsecurity=False).hexdigest()[:_HASH_LENGTH]
    if limit <= _HASH_LENGTH + 1:
        return digest[:limit]
    return f"{name[: limit - _HASH_LENGTH - 1]}_{digest}"


def fallback_base(method: str, path: str) -> str:
    """Base name for an operation without a usable ``operationId``."""
    return sanitize(f"{method.lower()}{path}") or method.lower()


class NameAllocator:
    """Hands out unique, capped tool names in call order (callers iterate in document order)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._used: set[str] = set()

    def allocate(self, base: str) -> str:
        name = cap(base, self._limit)
        counter = 2
        while name in self._used:
            suffix = f"_{counter}"
            name = cap(base, self._limit - len(suffix)) + suffix
            counter += 1
        self._used.add(name)
        return name


def argument_name(original: str) -> str:
    """Property key for a parameter/body property named ``original``."""
    if _VALID_ARGUMENT.match(original):
        return original
    return cap(sanitize(original) or "arg", 64)
