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
