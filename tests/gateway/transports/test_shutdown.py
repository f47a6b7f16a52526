"""Graceful shutdown of a real gateway process (Daphne) on SIGTERM: calls in flight finish, new
connections are refused, open streams end cleanly, audit rows are written, and the process exits
0 — at the latest when the grace period is over, cutting what still runs."""

from __future__ import annotations

import signal
import socket
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from django.conf import settings

from tests.audit.helpers import audit_rows
from tests.gateway.helpers import ACCEPT, open_session
from tests.gateway.slow import call, slow_host, text_of
from tests.processes import free_port, gateway_argv, gateway_env, running

pytestmark = pytest.mark.slow


def _gateway(grace: float) -> Any:
    port = free_port()
    env = gateway_env(settings.DATABASES["default"]["NAME"], settings.REDIS_URL, GATEWAY_INSTANCE_ID=f"gw-drain-{port}",
                      GATEWAY_SHUTDOWN_GRACE_SECONDS=str(grace))
    return port, running(gateway_argv(port), port, env=env, log_name="gateway-drain")


def _refused(port: float, within: float = 2.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        except ConnectionRefusedError:
            return True
        time.sleep(0.02)
    return False


def _read_stream(url: str, key: str, session: str) -> tuple[str, float]:
    """Hold the session's GET stream until it ends; how it ended (`clean`, or the error) and when."""
    headers = {"authorization": f"Bearer {key}", "accept": "text/event-stream", "mcp-session-id": session,
               "mcp-protocol-version": "2025-11-25"}
    try:
        with httpx.stream("GET", url, headers=headers, timeout=30) as response:
            assert response.status_code == 200, response.read()
            for _ in response.iter_bytes():
                pass
    except httpx.HTTPError as exc:
        return repr(exc), time.monotonic()
    return "clean", time.monotonic()


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(4) as executor:
        yield executor


def test_sigterm_lets_calls_finish_ends_streams_and_exits_0(
    transactional_db: None, slow_backend_url: str, pool: ThreadPoolExecutor
) -> None:
    port, gateway = _gateway(grace=10.0)
    with gateway as process:
        host = slow_host(f"http://127.0.0.1:{port}", slow_backend_url)
        session = open_session(host.url, host.key)
        stream: Future[tuple[str, float]] = pool.submit(_read_stream, host.url, host.key, session)
        with httpx.Client(timeout=10) as kept_alive:
            assert kept_alive.get(f"http://127.0.0.1:{port}/readyz").status_code == 200
            slow_call = pool.submit(call, host, "sleep", {"seconds": 2})
            time.sleep(0.7)  # the call is at the backend
            signalled = time.monotonic()
            process.send_signal(signal.SIGTERM)
            assert _refused(port), "the gateway still takes new connections"
            # An existing connection still gets answers, saying the instance is not ready and to go away.
            ready = kept_alive.get(f"http://127.0.0.1:{port}/readyz")
            assert ready.status_code == 503 and ready.json()["problems"]["shutdown"] == "draining before exit"
            assert ready.headers["connection"] == "close"
        assert text_of(slow_call.result(timeout=10)) == "slept 2 s"
        ended, ended_at = stream.result(timeout=10)
        assert ended == "clean"
        assert process.wait(timeout=10) == 0
        assert time.monotonic() - signalled < 10.0
        assert ended_at - signalled < 10.0
    rows = audit_rows(host.tenant, 1, method="tools/call")
    assert [(row.exposed_name, row.outcome) for row in rows] == [("sleep", "ok")]


def test_calls_longer_than_the_grace_period_are_cut_at_the_deadline(
    transactional_db: None, slow_backend_url: str, pool: ThreadPoolExecutor
) -> None:
    port, gateway = _gateway(grace=1.0)
    with gateway as process:
        host = slow_host(f"http://127.0.0.1:{port}", slow_backend_url)
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "sleep", "arguments": {"seconds": 20}}}
        session = open_session(host.url, host.key)
        headers = {"authorization": f"Bearer {host.key}", "accept": ACCEPT, "content-type": "application/json",
                   "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        slow_call = pool.submit(httpx.post, host.url, json=body, headers=headers, timeout=30)
        time.sleep(0.7)
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        response = slow_call.result(timeout=10)
        assert response.status_code == 503
        assert "shut down before the request was answered" in response.text
        assert process.wait(timeout=10) == 0
        assert time.monotonic() - signalled < 5.0
    rows = audit_rows(host.tenant, 1, method="tools/call")
    assert [(row.exposed_name, row.outcome) for row in rows] == [("sleep", "cancelled")]
