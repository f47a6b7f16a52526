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
