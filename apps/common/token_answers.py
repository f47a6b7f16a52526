"""Reading an OAuth token endpoint's answer (RFC 6749 §5.1/§5.2), the one way every client of the
gateway's does it: the egress credentials' token cache and people's connected accounts."""

from __future__ import annotations

import re
from typing import Any

import orjson

MAX_TOKEN_ANSWER = 64 * 1024
_NOT_FOR_A_HEADER = re.compile(r"[\x00-\x20\x7f]").search  # no controls or spaces: it goes into a header


class TokenAnswerRefused(Exception):
    """The answer gives no usable access token; the message says why. `error`: the server's error
    code (RFC 6749 §5.2: `invalid_grant`, `invalid_client`, …; "" when it sent none), `status`: HTTP."""

    def __init__(self, message: str, *, error: str = "", status: int = 200) -> None:
        super().__init__(message)
        self.error = error
        self.status = status


def token_answer_read(status: int, content: bytes) -> dict[str, Any]:
    """The answer's JSON object, whose `access_token` is a bearer token fit for a header; raises
    TokenAnswerRefused naming the server's `error` and `error_description` when it sent them."""
    body: Any = None
    if len(content) <= MAX_TOKEN_ANSWER:
        try:
            body = orjson.loads(content)
        except orjson.JSONDecodeError:
            pass
    return token_answer_check(status, body)


def token_answer_check(status: int, body: Any) -> dict[str, Any]:
    """`token_answer_read` for an answer already read as JSON (None: it was not JSON)."""
    token = body.get("access_token") if isinstance(body, dict) else None
    if status != 200 or not isinstance(token, str):
        reason = error = ""
        if isinstance(body, dict) and isinstance(body.get("error"), str):
            error = body["error"][:100]
            reason = f": {error}"
            if isinstance(body.get("error_description"), str):
                reason += f" ({body['error_description'][:200]})"
        raise TokenAnswerRefused(f"the token endpoint answered HTTP {status}{reason}", error=error, status=status)
    assert isinstance(body, dict)
    if str(body.get("token_type", "bearer")).lower() != "bearer":
        raise TokenAnswerRefused(f"the token endpoint issued a {str(body.get('token_type'))[:40]!r} token, not a bearer token")
    if not token or len(token) > 16 * 1024 or _NOT_FOR_A_HEADER(token):
        raise TokenAnswerRefused("the token endpoint issued an access token that cannot be sent in a header")
    return body
