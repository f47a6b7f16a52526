"""Backends with several stateful replicas: each session stays on the replica rendezvous hashing
picks, carries its routing hash, and moves to a live replica when its own dies; a replica one
gateway instance finds down is down for every instance."""

from __future__ import annotations

import contextlib
import json
import socketserver
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from apps.common.redis import redis_client
from apps.common.replica_health import REPLICA_HEALTH_KEY, replica_down_parse
from apps.gateway.pipeline.replicas import ReplicaHealth, routing_hash
from apps.gateway.pipeline.values import BackendView
from tests import factories
from tests.conftest import Host
from tests.gateway.helpers import message_of, open_session, post
from tests.processes import backend_argv, free_port, running, stop

pytestmark = pytest.mark.slow


def _tool(host: Host, session: str, name: str, request_id: int) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": name, "arguments": {}}}
    response = post(host.url, body, key=host.key, headers={"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"})
    message = message_of(response)
    assert "result" in message, message
    return json.loads(message["result"]["content"][0]["text"])


@contextlib.contextmanager
def _two_replicas() -> Iterator[tuple[list[Any], list[int], list[str], Any, Any, Any]]:
    """Two replica processes of one backend, mounted alone on a host of a new tenant: (the
    processes, their ports and URLs, an issued key, the tenant, the host)."""
    ports = [free_port(), free_port()]
    urls = [f"http://127.0.0.1:{port}/mcp" for port in ports]
    with contextlib.ExitStack() as stack:
        replicas = [
            stack.enter_context(running([*backend_argv("tests.backends.replica_server", port), "--replica", f"r{i}"],
                                        port, log_name=f"replica-r{i}"))
            for i, port in enumerate(ports)
        ]
        tenant = factories.tenant_factory()
        issued = factories.api_key_factory(tenant=tenant)
        backend = factories.backend_factory(tenant=tenant, urls=urls)
        vhost = factories.virtual_host_factory(tenant=tenant, mounts={"counter": backend})
        yield replicas, ports, urls, issued, tenant, vhost


def test_sessions_stick_to_their_replica_and_move_when_it_dies(transactional_db: None, gateway_url: str) -> None:
    with _two_replicas() as (replicas, ports, urls, issued, tenant, vhost):
        host = Host(f"{gateway_url}/mcp/{tenant.slug}/{vhost.slug}", issued.secret, tenant.slug, vhost.slug)
        expected = ReplicaHealth(upstream=None, check_seconds=None)  # type: ignore[arg-type]
        view = BackendView(id=0, name="b", transport="streamable-http", urls=tuple(urls), timeout=5, allow_private=True)
        sessions = [open_session(host.url, host.key) for _ in range(8)]
        placed: dict[str, str] = {}
        for session in sessions:
            for n in range(1, 4):
                answer = _tool(host, session, "increment", n)
                assert answer["count"] == n  # the same backend session every time
                assert placed.setdefault(session, answer["replica"]) == answer["replica"]
            assert placed[session] == f"r{urls.index(expected.pick(view, session))}"  # rendezvous on the session
            assert _tool(host, session, "whoami", 9)["routing_hash"] == routing_hash(session)
        for port in ports:
            assert httpx.get(f"http://127.0.0.1:{port}/stats").json()["not_found"] == 0

        dying = placed[sessions[0]]
        stop(replicas[int(dying[1])])
        for session in sessions:
            answer = _tool(host, session, "increment", 10)
            assert answer["replica"] != dying
            # A moved session has a new backend session (its state stayed on the dead replica).
            assert answer["count"] == (1 if placed[session] == dying else 4)


class _HangUp(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


@contextlib.contextmanager
def _hanging_up(port: int) -> Iterator[None]:
    """A replica that is there but serves nothing: each connection is accepted and closed at once
    (no HTTP answer). A gateway that sends it a request fails that request."""
    server = _HangUp(("127.0.0.1", port), socketserver.BaseRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


def _session_on(host: Host, view: BackendView, replica: str) -> str:
    """A new session of `host` whose replica (rendezvous over all of them) is `replica`."""
    picker = ReplicaHealth(upstream=None, check_seconds=None)  # type: ignore[arg-type]
    while True:
        session = open_session(host.url, host.key)
        if picker.pick(view, session) == replica:
            return session


def test_a_replica_one_instance_finds_down_is_down_for_every_instance(
    transactional_db: None, gateway_url: str, second_gateway_url: str
) -> None:
    with _two_replicas() as (replicas, ports, urls, issued, tenant, vhost):
        view = BackendView(id=0, name="b", transport="streamable-http", urls=tuple(urls), timeout=5, allow_private=True)
        path = f"/mcp/{tenant.slug}/{vhost.slug}"
        on_a = Host(f"{gateway_url}{path}", issued.secret, tenant.slug, vhost.slug)
        on_b = Host(f"{second_gateway_url}{path}", issued.secret, tenant.slug, vhost.slug)
        # Instance B serves (and so listens to the others), but not this backend yet.
        assert httpx.get(on_b.url, headers={"authorization": f"Bearer {issued.secret}"}).status_code == 405

        session = _session_on(on_a, view, urls[0])
        assert _tool(on_a, session, "increment", 1) == {"replica": "r0", "count": 1}
        stop(replicas[0])
        # A's next call finds r0 gone (connection refused) and moves the session.
        assert _tool(on_a, session, "increment", 2) == {"replica": "r1", "count": 1}
        deadline = time.monotonic() + 5
        while (record := redis_client().hget(REPLICA_HEALTH_KEY, urls[0])) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        entry = replica_down_parse(urls[0], record or b"")
        assert entry is not None and entry.instance == "gw-test"  # kept for the console and new instances

        # r0 comes back broken: whoever sends it a request fails. B was told: it never does.
        with _hanging_up(ports[0]):
            time.sleep(0.2)  # the news reaches B well within this
            for n in range(4):
                moved = _session_on(on_b, view, urls[0])
                assert _tool(on_b, moved, "increment", 1) == {"replica": "r1", "count": 1}, n
