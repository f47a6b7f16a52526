from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.processes import backend_argv, free_port, running


@pytest.fixture(scope="module")
def upstream_url() -> Iterator[str]:
    """An MCP server protected by its own authorization server (tests/backends/oauth_backend.py)."""
    port = free_port()
    with running(backend_argv("tests.backends.oauth_backend", port), port, log_name="oauth-backend"):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(autouse=True)
def _registrations_forgotten(django_db_setup: None) -> None:
    """The gateway's own authorization server counts registrations per address (the tests' is always
    127.0.0.1): tests that register the gateway with it start from none."""
    from apps.common.redis import redis_client

    client = redis_client()
    keys = list(client.scan_iter("gw:oauth-*"))
    if keys:
        client.delete(*keys)
