"""Values and errors of an OpenAPI tool call: the credential applied, the request built; and the
hook through which the console's tool tester sees the requests a call sent (`exchanges`)."""

from __future__ import annotations

import base64
import re
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Literal
from urllib.parse import quote, unquote

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


# --- what the console's tool tester shows of a call's requests --------------------------------------

#: Stands for a credential in a request shown to a person.
REDACTED = "[redacted]"
#: Headers never shown, whoever set them.
_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization"})
_SCRUBBED_LENGTH = 6


@dataclass(slots=True)
class Exchange:
    """One request a tool server sent for a call, credentials redacted (`redacted`), and the HTTP
    status of the answer (None until one came, and when none did)."""

    request: OutgoingRequest
    status: int | None = None


#: The requests of the call being served, collected only where the console's tool tester put a
#: list here (it runs the call in a context of its own). Everywhere else it is None: an MCP client's
#: call costs the tool server this one lookup.
exchanges: ContextVar[list[Exchange] | None] = ContextVar("openapi_exchanges", default=None)


def redacted(request: OutgoingRequest, credential: Credential | None) -> OutgoingRequest:
    """`request` as a person may see it: `Authorization` and `Proxy-Authorization` headers, the
    credential's header, query parameter or cookie, and any other occurrence of its value in the URL
    or a header replaced by REDACTED."""
    secrets: tuple[str, ...] = ()
    name = ""
    if credential is not None:
        name = credential.name
        # Elsewhere than its own place only a value long enough not to stand for common text.
        secrets = tuple(s for s in {credential.value, quote(credential.value, safe="")} if len(s) >= _SCRUBBED_LENGTH)
    headers = []
    for header, value in request.headers:
        low = header.lower()
        if low in _SECRET_HEADERS or (credential is not None and credential.kind == "api_key_header"
                                      and low == name.lower()):
            value = REDACTED
        elif low == "cookie" and credential is not None and credential.kind == "api_key_cookie":
            value = "; ".join(_pair_redacted(pair, name) for pair in value.split("; "))
        headers.append((header, _scrubbed(value, secrets)))
    url = request.url
    if credential is not None and credential.kind == "api_key_query" and "?" in url:
        base, _, query = url.partition("?")
        url = base + "?" + "&".join(_pair_redacted(pair, name) for pair in query.split("&"))
    return replace(request, url=_scrubbed(url, secrets), headers=tuple(headers))


def _pair_redacted(pair: str, name: str) -> str:
    key, equals, _ = pair.partition("=")
    return f"{key}={REDACTED}" if equals and unquote(key) == name else pair


def _scrubbed(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text
