"""Local ``$ref`` resolution.

Only same-document references (``#/...``) are supported: fetching remote documents from an upload
would be an SSRF vector and make compilation non-deterministic, so any other reference is an error.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from .diagnostics import Diagnostics, join, unescape

_MISSING = object()


class RefResolver:
    """Resolves ``$ref`` strings against one document, recording errors at the referencing site."""

    def __init__(self, doc: dict[str, Any], diag: Diagnostics) -> None:
        self._doc = doc
        self._diag = diag
        # ref string → (pointer, value) or an error message; refs repeat thousands of times in
        # big documents, so each distinct string is walked once.
        self._cache: dict[str, tuple[str, Any] | str] = {}

    def lookup(self, ref: Any, site: str) -> tuple[str, Any] | None:
        """Resolve one ``$ref`` (no chasing of further refs).

        ``site`` is the pointer of the object holding the ``$ref``. Returns the normalised pointer of
        the target and the target value, or ``None`` after recording an error at ``site/$ref``.
        """
        where = join(site, "$ref")
        if not isinstance(ref, str):
            self._diag.error(where, "$ref must be a string")
            return None
        cached = self._cache.get(ref)
        if cached is None:
            cached = self._cache[ref] = self._walk(ref)
        if isinstance(cached, str):
            self._diag.error(where, cached)
            return None
        return cached

    def _walk(self, ref: str) -> tuple[str, Any] | str:
        if not ref.startswith("#"):
            return f"remote $ref {ref!r} is not supported (only local '#/...' references are)"
        # The fragment is URI-encoded (e.g. %7B for "{"), then JSON-pointer-escaped.
        fragment = unquote(ref[1:])
        if fragment == "":
            return "", self._doc
        if not fragment.startswith("/"):
            return f"$ref {ref!r} is not a JSON pointer (anchors are not supported)"
        value: Any = self._doc
        pointer = ""
        for raw_token in fragment[1:].split("/"):
            token = unescape(raw_token)
            if isinstance(value, dict):
                value = value.get(token, _MISSING)
            elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
                value = value[int(token)]
            else:
                value = _MISSING
            if value is _MISSING:
                return f"$ref {ref!r} points to nothing: {join(pointer, token) or '/'} does not exist"
            pointer = join(pointer, token)
        return pointer, value

    def follow(self, value: Any, site: str) -> tuple[str, Any] | None:
        """Chase a chain of ``$ref`` objects (parameters, responses, bodies, path items).

        Returns ``(pointer, value)`` of the first non-reference object — ``(site, value)`` when
        ``value`` is not a reference — or ``None`` after recording an error (broken or circular).
        """
        pointer = site
        seen: set[str] = set()
        while isinstance(value, dict) and "$ref" in value:
            found = self.lookup(value["$ref"], pointer)
            if found is None:
                return None
            pointer, value = found
            if pointer in seen:
                self._diag.error(join(site, "$ref"), f"circular $ref through {pointer}")
                return None
            seen.add(pointer)
        return pointer, value
