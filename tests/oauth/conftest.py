from __future__ import annotations

import pytest

from apps.common.redis import redis_client


@pytest.fixture(autouse=True)
def _throttles_forgotten(django_db_setup: None) -> None:
    """Every test here starts with no registration or document-fetch attempts counted (they are
    counted per address, and the test client is always 127.0.0.1)."""
    client = redis_client()
    keys = list(client.scan_iter("gw:oauth-*"))
    if keys:
        client.delete(*keys)
