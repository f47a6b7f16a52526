"""Backends that are down, come up later, or answer in only one era."""

from __future__ import annotations

import time

import pytest

from tests.conftest import make_host, mcp_client
from tests.gateway.helpers import message_of, modern
from tests.processes import backend_argv, free_port, running

pytestmark = pytest.mark.slow


def test_a_backend_that_is_down_fails_fast_and_is_found_when_it_comes_up(transactional_db: None, gateway_url: str) -> None:
    port = free_port()
    host = make_host(gateway_url, f"http://127.0.0.1:{port}/mcp")
    for _ in range(3):
        started = time.perf_counter()
        response = modern(host.url, "tools/list", key=host.key)
        assert message_of(response)["error"]["code"] == -32004
        assert time.perf_counter() - started < 1.0
    with running(backend_argv("scripts.demo_server", port), port, log_name="late-backend"):
        deadline = time.monotonic() + 5
        while True:
            message = message_of(modern(host.url, "tools/list", key=host.key))
            if "result" in message or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert [tool["name"] for tool in message["result"]["tools"]][:2] == ["add", "echo"]


async def test_initialize_still_answers_while_the_backend_is_down(transactional_db: None, gateway_url: str) -> None:
    from channels.db import database_sync_to_async

    host = await database_sync_to_async(make_host)(gateway_url, f"http://127.0.0.1:{free_port()}/mcp")
    async with mcp_client(host.url, host.key, "legacy") as client:
        with pytest.raises(Exception, match="unavailable"):
            await client.list_tools()
