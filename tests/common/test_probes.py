"""Liveness and readiness, as a load balancer sees them."""

import httpx
import pytest

pytestmark = pytest.mark.slow


def test_health_and_readiness(gateway_url: str) -> None:
    assert httpx.get(f"{gateway_url}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{gateway_url}/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ok", "problems": {}}


def test_the_admin_is_served(gateway_url: str) -> None:
    response = httpx.get(f"{gateway_url}/admin/login/")
    assert response.status_code == 200 and "Django" in response.text
