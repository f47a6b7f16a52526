"""The recording service itself: what later OpenAPI tests rely on it to report."""

from __future__ import annotations

import base64

import httpx
import pytest

pytestmark = pytest.mark.slow


def test_it_records_requests_exactly_and_answers_by_path(recording_service_url: str) -> None:
    base = recording_service_url
    httpx.post(f"{base}/__reset")
    httpx.post(f"{base}/pets/a%2Fb?tags=x,y&deep[a]=1", content=b"\x00body", headers={"x-key": "k"})
    assert httpx.get(f"{base}/status/418").status_code == 418
    assert httpx.get(f"{base}/binary").content == bytes(range(256))
    first, second, third = httpx.get(f"{base}/__recorded").json()
    assert (first["method"], first["path"], first["query"]) == ("POST", "/pets/a%2Fb", "tags=x,y&deep[a]=1")
    assert ["x-key", "k"] in first["headers"] and base64.b64decode(first["body"]) == b"\x00body"
    assert (second["path"], third["path"]) == ("/status/418", "/binary")
    httpx.post(f"{base}/__reset")
    assert httpx.get(f"{base}/__recorded").json() == []
