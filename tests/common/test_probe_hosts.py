"""The probes answer under the address a kubelet or Prometheus uses as `Host`; every other page
keeps refusing hosts outside ALLOWED_HOSTS."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

pytestmark = pytest.mark.django_db

ADDRESS = "10.0.4.7:8000"  # an instance's own address: in no ALLOWED_HOSTS


def test_health_and_readiness_answer_under_an_address() -> None:
    client = Client(HTTP_HOST=ADDRESS)
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code in (200, 503) and ready.json()["status"] in {"ok", "degraded", "unavailable"}
    assert ready.json()["problems"].keys() <= {"worker"}  # the database and Redis were reached


def test_other_pages_still_refuse_the_address() -> None:
    client = Client(HTTP_HOST=ADDRESS)
    assert client.get("/console/login/").status_code == 400
    assert client.get("/api/v1/schema").status_code == 400


def test_metrics_under_an_address_only_when_a_token_guards_it() -> None:
    assert Client(HTTP_HOST=ADDRESS).get("/metrics").status_code == 400
    with override_settings(GATEWAY_METRICS_TOKEN="scrape-token-0123456789"):
        client = Client(HTTP_HOST=ADDRESS)
        assert client.get("/metrics").status_code == 401
        scraped = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-token-0123456789")
        assert scraped.status_code == 200 and b"mcp_gateway_" in scraped.content


async def test_the_probes_answer_through_the_async_stack() -> None:
    from django.test import AsyncClient

    response = await AsyncClient(HTTP_HOST=ADDRESS).get("/healthz")
    assert response.status_code == 200
