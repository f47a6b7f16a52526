from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from apps.catalog.validators import replica_url_validate


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:9001/mcp", "https://mcp.example.com/mcp", "http://mcp-server:8000/mcp", "http://[::1]:80/"],
)
def test_accepts_http_urls_with_any_host(url: str) -> None:
    replica_url_validate(url)


@pytest.mark.parametrize(
    "url", ["ftp://x/", "http://", "notaurl", "http://a b/", "http://x:99999/", "http://-bad-/", "http://x/" + "a" * 500]
)
def test_rejects_everything_else(url: str) -> None:
    with pytest.raises(ValidationError):
        replica_url_validate(url)
