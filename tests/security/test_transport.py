"""The HTTP server in front of the application, through raw sockets against a real Daphne gateway:
bodies refused by size before they are read or spooled, per route (the MCP endpoint, the REST API
and console, spec uploads by a tenant's admins), and requests whose headers or body stall cut
short while complete requests, streams and long calls are not."""

from __future__ import annotations

import contextlib
import json
import select
import socket
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from apps.tenants.models import Tenant
from apps.tenants.services import admin_token_issue, membership_set, token_issuer_set
from tests import factories
from tests.conftest import Host
from tests.gateway.helpers import ACCEPT, META, MODERN
from tests.gateway.slow import slow_host
from tests.processes import backend_argv, free_port, gateway_argv, gateway_env, log_path, running

MIB = 1024 * 1024
#: The timeouts of the gateway started by `quick_gateway_url`.
QUICK = 1.5


def connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def head(method: str, path: str, headers: dict[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", *(f"{name}: {value}" for name, value in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_answer(sock: socket.socket, within: float) -> bytes:
    """Everything the server sends until it closes (its write side) or `within` seconds pass."""
    sock.settimeout(within)
    received = b""
    deadline = time.monotonic() + within
    with contextlib.suppress(TimeoutError, ConnectionResetError):
        while time.monotonic() < deadline:
            data = sock.recv(65536)
            if not data:
                return received
            received += data
    raise AssertionError(f"the server neither answered and closed within {within} s; got {received[:300]!r}")


def status_and_body(answer: bytes) -> tuple[int, str]:
    head_part, _, body = answer.partition(b"\r\n\r\n")
    return int(head_part.split(b" ", 2)[1]), body.decode()


def read_one_response(sock: socket.socket, within: float) -> tuple[int, bytes]:
    """One response (sized by Content-Length or chunked), leaving the connection open."""
    sock.settimeout(within)
    data = b""

    def more() -> None:
        nonlocal data
        chunk = sock.recv(65536)
        assert chunk, f"closed inside a response: {data[:300]!r}"
        data += chunk

    while b"\r\n\r\n" not in data:
        more()
    head_part, _, data = data.partition(b"\r\n\r\n")
    fields = dict(line.lower().split(b":", 1) for line in head_part.split(b"\r\n")[1:])
    status = int(head_part.split(b" ", 2)[1])
    if b"content-length" in fields:
        while len(data) < int(fields[b"content-length"]):
            more()
        return status, data
    body = b""
    while True:
        while b"\r\n" not in data:
            more()
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line, 16)
        while len(data) < size + 2:
            more()
        body, data = body + data[:size], data[size + 2:]
        if size == 0:
            return status, body


# --- Sizes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/mcp/acme/main", "/mcp/acme/main/messages?session_id=x"])
def test_a_declared_length_over_the_mcp_limit_is_413_before_any_of_the_body_is_sent(gateway_url: str, path: str) -> None:
    with connect(gateway_url) as sock:
        sock.sendall(head("POST", path, {"Content-Type": "application/json", "Content-Length": str(300 * MIB)}))
        status, body = status_and_body(read_answer(sock, 5))
    assert status == 413
    assert body == f"Payload Too Large: the limit is {settings.GATEWAY_MAX_BODY_BYTES} bytes"


def test_a_chunked_body_is_cut_as_it_crosses_the_limit(gateway_url: str) -> None:
    limit = settings.GATEWAY_MAX_BODY_BYTES
    chunk = b"%x\r\n%s\r\n" % (64 * 1024, b"a" * 64 * 1024)
    with connect(gateway_url) as sock:
        sock.sendall(head("POST", "/mcp/acme/main", {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}))
        sent = 0
        # Never the last chunk: the server must answer while the body is still coming.
        while sent <= limit + 4 * 64 * 1024 and not select.select([sock], [], [], 0)[0]:
            sock.sendall(chunk)
            sent += 64 * 1024
        status, body = status_and_body(read_answer(sock, 5))
    assert status == 413
    assert body == f"Payload Too Large: the limit is {limit} bytes"


@pytest.mark.parametrize("path", ["/api/v1/tenants/acme/keys", "/console/login/", "/admin/login/"])
def test_the_rest_api_and_console_have_a_smaller_limit(gateway_url: str, path: str) -> None:
    with connect(gateway_url) as sock:
        sock.sendall(head("POST", path, {"Content-Type": "application/json", "Content-Length": str(2 * MIB)}))
        status, body = status_and_body(read_answer(sock, 5))
    assert status == 413
    assert body == f"Payload Too Large: the limit is {settings.GATEWAY_API_MAX_BODY_BYTES} bytes"


@pytest.mark.parametrize("path", ["/api/v1/tenants/acme/backends/1/spec", "/console/t/acme/backends/1/spec/"])
def test_an_anonymous_spec_upload_gets_the_small_limit(gateway_url: str, path: str) -> None:
    with connect(gateway_url) as sock:
        sock.sendall(head("POST", path, {"Content-Type": "application/json", "Content-Length": str(50 * MIB)}))
        status, body = status_and_body(read_answer(sock, 5))
    assert status == 413
    assert body.startswith(f"Payload Too Large: the limit is {settings.GATEWAY_API_MAX_BODY_BYTES} bytes; "
                           f"OpenAPI documents up to {settings.GATEWAY_SPEC_MAX_BYTES} bytes are taken from an admin")


@pytest.fixture
def spec_callers(transactional_db: None) -> dict[str, Any]:
    """A tenant with an admin (token and console session), a member (token), and a bogus token."""
    tenant = factories.tenant_factory()
    users = get_user_model().objects
    admin = users.create_user(f"admin-{tenant.slug}", password="pw-123456789")
    member = users.create_user(f"member-{tenant.slug}", password="pw-123456789")
    membership_set(tenant=tenant, user=admin, role="admin")
    membership_set(tenant=tenant, user=member, role="member")
    browser = Client()
    browser.force_login(admin)
    return {
        "tenant": tenant.slug,
        "admin token": {"Authorization": f"Bearer {admin_token_issue(user=admin, name='ci').secret}"},
        "admin session": {"Cookie": f"{settings.SESSION_COOKIE_NAME}={browser.cookies[settings.SESSION_COOKIE_NAME].value}"},
        "member token": {"Authorization": f"Bearer {admin_token_issue(user=member, name='ci').secret}"},
        "unknown token": {"Authorization": "Bearer gwa_not-a-token"},
    }


@pytest.mark.parametrize("caller", ["admin token", "admin session"])
def test_a_tenant_admin_may_send_a_large_spec(gateway_url: str, spec_callers: dict[str, Any], caller: str) -> None:
    size = 3 * MIB  # over GATEWAY_API_MAX_BODY_BYTES
    path = (f"/api/v1/tenants/{spec_callers['tenant']}/backends/999999/spec" if caller == "admin token"
            else f"/console/t/{spec_callers['tenant']}/backends/999999/spec/")
    with connect(gateway_url) as sock:
        sock.sendall(head("POST", path, {"Content-Type": "application/json", "Content-Length": str(size),
                                         **spec_callers[caller]}))
        assert not select.select([sock], [], [], 1)[0], "answered before the body was sent"
        sock.sendall(b" " * size)
        status, _ = read_one_response(sock, 10)
    # The application saw the whole body: no such backend (a console POST without a CSRF token: 403).
    assert status == (404 if caller == "admin token" else 403)


@pytest.mark.parametrize("caller", ["member token", "unknown token"])
def test_others_may_not_send_a_large_spec(gateway_url: str, spec_callers: dict[str, Any], caller: str) -> None:
    path = f"/api/v1/tenants/{spec_callers['tenant']}/backends/1/spec"
    with connect(gateway_url) as sock:
        sock.sendall(head("POST", path, {"Content-Type": "application/json", "Content-Length": str(3 * MIB),
                                         **spec_callers[caller]}))
        status, body = status_and_body(read_answer(sock, 5))
    assert status == 413 and "are taken from an admin of the tenant" in body


def test_an_admins_chunked_spec_over_the_spec_limit_is_cut(gateway_url: str, spec_callers: dict[str, Any]) -> None:
    limit = settings.GATEWAY_SPEC_MAX_BYTES + 64 * 1024
    chunk = b"%x\r\n%s\r\n" % (MIB, b"a" * MIB)
    path = f"/api/v1/tenants/{spec_callers['tenant']}/backends/1/spec"
    with connect(gateway_url) as sock:
        sock.sendall(head("POST", path, {"Content-Type": "application/json", "Transfer-Encoding": "chunked",
                                         **spec_callers["admin token"]}))
        sent = 0
        while sent <= limit + 2 * MIB and not select.select([sock], [], [], 0)[0]:
            sock.sendall(chunk)
            sent += MIB
        status, body = status_and_body(read_answer(sock, 10))
    assert status == 413 and body == f"Payload Too Large: the limit is {limit} bytes"


def test_a_big_call_within_the_limit_still_works_with_and_without_a_length(demo_host: Host) -> None:
    text = "x" * (3 * MIB)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "echo", "arguments": {"text": text}, "_meta": META}}).encode()
    path = urlsplit(demo_host.url).path
    headers = {"Content-Type": "application/json", "Accept": ACCEPT, "Authorization": f"Bearer {demo_host.key}",
               "Mcp-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "echo"}
    for framing in ("length", "chunked"):
        with connect(demo_host.url) as sock:
            if framing == "length":
                sock.sendall(head("POST", path, {**headers, "Content-Length": str(len(body))}) + body)
            else:
                sock.sendall(head("POST", path, {**headers, "Transfer-Encoding": "chunked"}))
                for start in range(0, len(body), 256 * 1024):
                    piece = body[start:start + 256 * 1024]
                    sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
                sock.sendall(b"0\r\n\r\n")
            status, answer = read_one_response(sock, 30)
        assert status == 200, answer[:300]
        assert json.loads(answer)["result"]["content"][0]["text"] == text


# --- Timeouts -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def quick_gateway_url(django_db_setup: None, django_db_blocker: object) -> Iterator[str]:
    """A gateway whose header deadline and body idle timeout are QUICK seconds."""
    port = free_port()
    env = gateway_env(settings.DATABASES["default"]["NAME"], settings.REDIS_URL, GATEWAY_INSTANCE_ID="gw-quick",
                      GATEWAY_HTTP_HEADERS_TIMEOUT_SECONDS=str(QUICK), GATEWAY_HTTP_BODY_IDLE_SECONDS=str(QUICK),
                      GATEWAY_LOG_FORMAT="json", PYTHONUNBUFFERED="1")  # the log is read while it runs
    with running(gateway_argv(port), port, env=env, log_name="gateway-quick"):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def slow_backend(django_db_setup: None) -> Iterator[str]:
    port = free_port()
    with running(backend_argv("tests.backends.slow_server", port), port, log_name="slow-backend-transport"):
        yield f"http://127.0.0.1:{port}/mcp"


def test_headers_that_stop_half_way_are_cut_with_408(quick_gateway_url: str) -> None:
    with connect(quick_gateway_url) as sock:
        started = time.monotonic()
        sock.sendall(b"POST /mcp/acme/main HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
        status, body = status_and_body(read_answer(sock, 6))
    assert status == 408 and body == f"Request Timeout: the request's headers did not arrive within {QUICK:g} s"
    assert time.monotonic() - started < QUICK + 1.5


def test_headers_trickled_byte_by_byte_meet_one_deadline(quick_gateway_url: str) -> None:
    """Slow loris: each byte comes well within the idle time, the headers never end."""
    with connect(quick_gateway_url) as sock:
        started = time.monotonic()
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        with contextlib.suppress(OSError):
            while time.monotonic() - started < 6 and not select.select([sock], [], [], 0.3)[0]:
                sock.sendall(b"X")
        status, _ = status_and_body(read_answer(sock, 3))
    assert status == 408
    assert time.monotonic() - started < QUICK + 2


def test_a_body_that_stalls_is_cut_with_408(quick_gateway_url: str) -> None:
    with connect(quick_gateway_url) as sock:
        started = time.monotonic()
        sock.sendall(head("POST", "/mcp/acme/main", {"Content-Type": "application/json", "Content-Length": "100"})
                     + b'{"jsonrpc":')
        status, body = status_and_body(read_answer(sock, 6))
    assert status == 408 and body == f"Request Timeout: the request's body stalled for {QUICK:g} s"
    assert time.monotonic() - started < QUICK + 1.5


def test_an_idle_keep_alive_connection_is_not_cut_by_the_request_timeouts(quick_gateway_url: str) -> None:
    with connect(quick_gateway_url) as sock:
        for _ in range(2):
            sock.sendall(head("GET", "/healthz", {}))
            status, _ = read_one_response(sock, 5)
            assert status == 200
            time.sleep(QUICK * 2)


def test_a_call_and_a_stream_outlast_the_request_timeouts(transactional_db: None, quick_gateway_url: str,
                                                           slow_backend: str) -> None:
    host = slow_host(quick_gateway_url, slow_backend)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "sleep", "arguments": {"seconds": QUICK * 2}, "_meta": META}}).encode()
    headers = {"Content-Type": "application/json", "Accept": ACCEPT, "Authorization": f"Bearer {host.key}",
               "Mcp-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "sleep",
               "Content-Length": str(len(body))}
    with connect(quick_gateway_url) as sock:
        sock.sendall(head("POST", urlsplit(host.url).path, headers) + body)
        status, answer = read_one_response(sock, 30)
    assert status == 200 and "result" in json.loads(answer), answer
    # An HTTP+SSE event stream stays open however quiet it is.
    with connect(quick_gateway_url) as sock:
        sock.sendall(head("GET", urlsplit(host.url).path + "/sse",
                          {"Accept": "text/event-stream", "Authorization": f"Bearer {host.key}"}))
        sock.settimeout(5)
        first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200"), first[:300]
        time.sleep(QUICK * 2)
        sock.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            assert sock.recv(65536) != b"", "the stream was closed"


# --- What a request may not put into response headers and logs ------------------------------------


def unauthenticated_post(url: str, host: str) -> tuple[int, bytes]:
    """An MCP POST without a credential under `host`: the status and the response's head."""
    with connect(url) as sock:
        body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
        sock.sendall(head("POST", urlsplit(url).path, {"Content-Type": "application/json", "Accept": ACCEPT,
                                                      "Content-Length": str(len(body)), "Connection": "close"})
                     .replace(b"Host: 127.0.0.1\r\n", f"Host: {host}\r\n".encode()) + body)
        answer = read_answer(sock, 10)
    return int(answer.split(b" ", 2)[1]), answer.partition(b"\r\n\r\n")[0]


def test_a_host_header_with_a_name_for_a_port_is_refused_and_never_echoed(demo_host: Host) -> None:
    tenant = Tenant.objects.get(slug=demo_host.tenant)
    key = ec.generate_private_key(ec.SECP256R1()).public_key()
    pem = key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    token_issuer_set(tenant=tenant, issuer="https://issuer.example", audience="mcp", public_key=pem)
    metadata = f"/.well-known/oauth-protected-resource/mcp/{demo_host.tenant}/{demo_host.slug}"
    deadline = time.monotonic() + 10  # the gateway picks up the new issuer within a moment
    while True:
        status, response_head = unauthenticated_post(demo_host.url, "127.0.0.1:4321")
        if b"resource_metadata" in response_head or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert status == 401
    assert f'resource_metadata="http://127.0.0.1:4321{metadata}"'.encode() in response_head
    for host in ("127.0.0.1:evil.example", "127.0.0.1:80@evil.example", 'evil".example'):
        status, response_head = unauthenticated_post(demo_host.url, host)
        assert status == 400, (host, response_head)
        assert b"evil" not in response_head


def test_credentials_in_query_strings_are_not_logged(transactional_db: None, quick_gateway_url: str) -> None:
    secret = "mgw_query-secret-0123456789"
    with connect(quick_gateway_url) as sock:
        for target in (f"/mcp/acme/main?api_key={secret}&page=2", f"/console/no-such-page?access_token={secret}"):
            sock.sendall(head("GET", target, {}))
            read_one_response(sock, 10)
    logged = log_path("gateway-quick", int(quick_gateway_url.rsplit(":", 1)[1]))
    deadline = time.monotonic() + 5
    while "/console/no-such-page" not in logged.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    text = logged.read_text()
    assert "/mcp/acme/main?api_key=[redacted]&page=2" in text  # Daphne's access log
    assert "no-such-page?access_token=[redacted]'>" in text  # the `request` of Django's JSON log record
    assert secret not in text
