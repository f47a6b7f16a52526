"""Credentials in query strings kept out of logs.

Clients put API keys and tokens in URLs (`?api_key=...`, `?access_token=...`) whatever the gateway
asks for, and request targets reach logs: Daphne's access log, Django's request log records (their
`request` field in JSON logs), nginx's access log. Every such line goes through `redact_text`,
which replaces the value of each query parameter whose name looks like a credential. Pure (stdlib
only)."""

from __future__ import annotations

import re

REDACTED = "[redacted]"

#: Parameter names that carry credentials: api_key, apikey, key, access_token, id_token, token,
#: secret, client_secret, password, passwd, auth, authorization, sig, signature, credential, code, jwt.
_CREDENTIAL_NAME = re.compile(r"key|token|secret|passw|auth|sig|credential|^code$|jwt", re.IGNORECASE)
#: `name=value` after `?` or `&`, up to the next separator or the end of a quoted or logged URL.
_PARAMETER = re.compile(r"(?<=[?&])([^=&\s'\"?#]+)=([^&\s'\"#]*)")


def _redact(match: re.Match[str]) -> str:
    name, value = match.group(1), match.group(2)
    if value and _CREDENTIAL_NAME.search(name.replace("%5F", "_").replace("%5f", "_")):
        return f"{name}={REDACTED}"
    return match.group(0)


def redact_text(text: str) -> str:
    """`text` with the values of credential-like query parameters in it replaced by REDACTED
    (`GET /mcp/a/b?api_key=mgw_x&page=2` -> `GET /mcp/a/b?api_key=[redacted]&page=2`)."""
    if "=" not in text:
        return text
    return _PARAMETER.sub(_redact, text)
