"""Reading a token endpoint's answer: a bearer access token fit for a header, or words that say why not."""

from __future__ import annotations

import pytest

from apps.common.token_answers import TokenAnswerRefused, token_answer_read


def test_a_bearer_token_is_read() -> None:
    assert token_answer_read(200, b'{"access_token": "abc", "token_type": "Bearer", "expires_in": 60}')["expires_in"] == 60
    assert token_answer_read(200, b'{"access_token": "abc"}')["access_token"] == "abc"  # token_type is bearer unless said


@pytest.mark.parametrize(("status", "content", "words"), [
    (400, b'{"error": "invalid_grant", "error_description": "expired"}',
     "the token endpoint answered HTTP 400: invalid_grant (expired)"),
    (503, b"<html>down</html>", "the token endpoint answered HTTP 503"),
    (200, b'{"token_type": "Bearer"}', "answered HTTP 200"),
    (200, b'{"access_token": "abc", "token_type": "DPoP"}', "issued a 'DPoP' token, not a bearer token"),
    (200, b'{"access_token": "a\\r\\nX-Injected: 1"}', "cannot be sent in a header"),
    (200, b'{"access_token": ""}', "cannot be sent in a header"),
    (200, b'{"access_token": "' + b"a" * 70_000 + b'"}', "answered HTTP 200"),  # over the size read at all
])
def test_what_gives_no_usable_token_is_said(status: int, content: bytes, words: str) -> None:
    with pytest.raises(TokenAnswerRefused, match=words.replace("(", r"\(").replace(")", r"\)")):
        token_answer_read(status, content)
