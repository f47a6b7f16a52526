"""Which body limit a request line gets (the HTTP server's guard, before any body is read)."""

from __future__ import annotations

import pytest

from apps.gateway.transports.http_guard import RouteLimit, TransportLimits, route_limit

LIMITS = TransportLimits(mcp_bytes=400, api_bytes=100, spec_bytes=5000, headers_seconds=1, body_idle_seconds=1)
UPLOAD = 5000 + 64 * 1024


@pytest.mark.parametrize(("method", "target", "expected"), [
    (b"POST", b"/mcp/acme/main", RouteLimit(400)),
    (b"POST", b"/mcp/acme/main/messages?session_id=x", RouteLimit(400)),
    (b"POST", b"/%6Dcp/acme/main", RouteLimit(400)),  # Daphne routes the decoded path
    (b"POST", b"/api/v1/tenants/acme/keys", RouteLimit(100)),
    (b"POST", b"/api/v1/tenants/acme/backends/7/spec", RouteLimit(100, "acme", UPLOAD)),
    (b"POST", b"/api/v1/tenants/acme/backends/7/spec/", RouteLimit(100, "acme", UPLOAD)),  # the API takes a trailing slash
    (b"POST", b"/api/v1/tenants/acme/backends/7/spec?filename=x.yaml", RouteLimit(100, "acme", UPLOAD)),
    (b"POST", b"/console/t/acme/backends/7/spec/", RouteLimit(100, "acme", UPLOAD)),
    (b"PUT", b"/api/v1/tenants/acme/backends/7/spec", RouteLimit(100)),
    (b"POST", b"/api/v1/tenants/acme/backends/7/spec/extra", RouteLimit(100)),
    (b"POST", b"http://evil/api/v1/tenants/acme/backends/7/spec", RouteLimit(100)),
    (b"POST", b"/admin/login/", RouteLimit(100)),
])
def test_route_limits(method: bytes, target: bytes, expected: RouteLimit) -> None:
    assert route_limit(LIMITS, method, target) == expected


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="api_bytes must be positive, got 0"):
        TransportLimits(mcp_bytes=1, api_bytes=0, spec_bytes=1, headers_seconds=1, body_idle_seconds=1)


def test_a_held_upload_reads_nothing_more_and_its_check_has_a_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """While a spec upload's credential is checked the connection reads nothing, even when Twisted
    would resume it (the client drained an earlier response); a check that never answers is
    refused after the header deadline."""
    from twisted.internet import defer
    from twisted.internet.task import Clock
    from twisted.internet.testing import StringTransport

    from apps.gateway.transports import http_guard

    checks: list[defer.Deferred[bool]] = []
    monkeypatch.setattr(http_guard, "deferToThread", lambda *args: checks.append(defer.Deferred()) or checks[-1])
    channel = http_guard.GuardedChannel(LIMITS, lambda *args: True)
    clock = Clock()
    channel.callLater = clock.callLater  # type: ignore[method-assign]
    transport = StringTransport()
    channel.makeConnection(transport)
    channel.dataReceived(b"POST /api/v1/tenants/acme/backends/1/spec HTTP/1.1\r\nHost: x\r\n"
                         b"Authorization: Bearer gwa_x\r\nContent-Length: 3000\r\n\r\n" + b"z" * 100)
    assert len(checks) == 1 and transport.producerState == "paused"
    channel.resumeProducing()
    assert transport.producerState == "paused"
    clock.advance(LIMITS.headers_seconds + 0.1)
    assert transport.value().startswith(b"HTTP/1.1 413 ")
