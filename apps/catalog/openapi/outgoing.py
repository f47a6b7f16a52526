"""Values and errors of an OpenAPI tool call: the credential applied, the request built."""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from typing import Literal

CredentialKind = Literal["api_key_header", "api_key_query", "api_key_cookie", "bearer", "basic"]
_CREDENTIAL_KINDS = frozenset({"api_key_header", "api_key_query", "api_key_cookie", "bearer", "basic"})


class InvokeError(ValueError):
    """The request cannot be built; the message is meant for the tool's caller (a tool error result)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ArgumentError(InvokeError):
    """The arguments are wrong: missing, unknown, or not serialisable as the operation requires."""


@dataclass(frozen=True, slots=True)
class Credential:
    """An upstream credential applied to every request. ``name`` is the header, query parameter or
    cookie name for the ``api_key_*`` kinds; ``value`` is the key, the bearer token or the password;
    ``username`` is used by ``basic`` only. A credential replaces any argument of the same name."""

    kind: CredentialKind
    value: str = field(repr=False)
    name: str = ""
    username: str = ""

    def __post_init__(self) -> None:
        if self.kind not in _CREDENTIAL_KINDS:
            raise ValueError(f"unknown credential kind {self.kind!r}")
        if self.kind.startswith("api_key_") and not self.name:
            raise ValueError(f"credential kind {self.kind!r} needs a name")
        if self.kind == "basic" and ":" in self.username:
            raise ValueError("a basic-auth username cannot contain ':'")
        for text in (self.value, self.name, self.username):
            if not isinstance(text, str) or BAD_HEADER(text):
                raise ValueError("credential fields must be strings without CR, LF or NUL")

    def header(self) -> tuple[str, str] | None:
        """The header that carries the credential (None for the query and cookie kinds)."""
        if self.kind == "bearer":
            return "Authorization", f"Bearer {self.value}"
        if self.kind == "basic":
            token = base64.b64encode(f"{self.username}:{self.value}".encode()).decode("ascii")
            return "Authorization", f"Basic {token}"
        if self.kind == "api_key_header":
            return self.name, self.value
        return None


@dataclass(frozen=True, slots=True)
class OutgoingRequest:
    method: str
    url: str
    headers: tuple[tuple[str, str], ...]
    body: bytes = b""
    content_type: str | None = None


#: Header values must not carry line breaks or NUL: they would add or cut header lines.
BAD_HEADER = re.compile(r"[\r\n\x00]").search
#: An argument that was not given (None is a given value).
MISSING = object()
