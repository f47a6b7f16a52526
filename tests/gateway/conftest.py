"""Fixtures of the gateway's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.processes import backend_argv, free_port, running


@pytest.fixture(scope="session")
def slow_backend_url() -> Iterator[str]:
    """The MCP backend whose tools are slow, big or silent (tests/backends/slow_server.py)."""
    port = free_port()
    with running(backend_argv("tests.backends.slow_server", port), port, log_name="slow-backend"):
        yield f"http://127.0.0.1:{port}/mcp"
