"""JSON pointers (RFC 6901) and the collector of errors and warnings."""

from __future__ import annotations

from .model import Problem


def escape(token: str | int) -> str:
    """Escape one reference token: ``~`` → ``~0`` then ``/`` → ``~1`` (order matters)."""
    return str(token).replace("~", "~0").replace("/", "~1")


def unescape(token: str) -> str:
    """Inverse of :func:`escape` (``~1`` first, so ``~01`` decodes to ``~1``, as RFC 6901 demands)."""
    return token.replace("~1", "/").replace("~0", "~")


def join(base: str, *tokens: str | int) -> str:
    """``base`` extended by ``tokens``, each escaped: ``join("/paths", "/pets")`` → ``/paths/~1pets``."""
    return base + "".join("/" + escape(t) for t in tokens)


class Diagnostics:
    """Accumulates problems in discovery order; identical (pointer, message) pairs are kept once,
    because shared components are reached from many operations."""

    def __init__(self) -> None:
        self.errors: list[Problem] = []
        self.warnings: list[Problem] = []
        self._seen: set[tuple[bool, str, str]] = set()

    def error(self, pointer: str, message: str) -> None:
        self._add(True, pointer, message)

    def warning(self, pointer: str, message: str) -> None:
        self._add(False, pointer, message)

    def _add(self, is_error: bool, pointer: str, message: str) -> None:
        key = (is_error, pointer, message)
        if key in self._seen:
            return
        self._seen.add(key)
        (self.errors if is_error else self.warnings).append(Problem(pointer, message))
