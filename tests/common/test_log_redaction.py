"""Credential-like query parameters are redacted from log text; everything else is left as it was."""

from __future__ import annotations

import pytest

from apps.common.log_redaction import redact_text


@pytest.mark.parametrize(("text", "expected"), [
    ("GET /mcp/a/b?api_key=mgw_x&page=2", "GET /mcp/a/b?api_key=[redacted]&page=2"),
    ("/x?page=1&access_token=abc", "/x?page=1&access_token=[redacted]"),
    ("<ASGIRequest: GET '/c?token=abc'>", "<ASGIRequest: GET '/c?token=[redacted]'>"),
    ("/x?apiKey=1&client_secret=2&password=3&sig=4&code=5&jwt=6",
     "/x?apiKey=[redacted]&client_secret=[redacted]&password=[redacted]&sig=[redacted]&code=[redacted]&jwt=[redacted]"),
    ("/x?api%5Fkey=abc", "/x?api%5Fkey=[redacted]"),
])
def test_credentials_are_redacted(text: str, expected: str) -> None:
    assert redact_text(text) == expected


@pytest.mark.parametrize("text", [
    "/mcp/a/b/messages?session_id=gw-1.abc", "/x?page=2&cursor=abc", "/x?api_key=", "a=b c=d", "no query here",
    "/x?barcode=1",
])
def test_everything_else_is_kept(text: str) -> None:
    assert redact_text(text) == text
