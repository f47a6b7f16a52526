"""The gateway's checks of a backend through the REST API: test-connection and health against the
real demo backend (and a closed port), and the replicas the gateway instances have marked down."""

from __future__ import annotations

import time

import pytest
from django.test import Client

from apps.common.redis import redis_client
from apps.common.replica_health import REPLICA_HEALTH_KEY, replica_down_record
from apps.tenants.models import Tenant
from tests.factories import backend_factory
from tests.processes import free_port

pytestmark = pytest.mark.django_db


def _api(tenant: Tenant) -> str:
    return f"/api/v1/tenants/{tenant.slug}/backends"


def test_test_connection_and_health_against_real_backends(admin_client: Client, demo_backend_url: str) -> None:
    closed = f"http://127.0.0.1:{free_port()}/mcp"
    backend = backend_factory(urls=[demo_backend_url, closed])
    tested = admin_client.post(f"{_api(backend.tenant)}/{backend.pk}/test-connection")
    assert tested.status_code == 200
    body = tested.json()
    assert body["up"] is True and body["backend_id"] == backend.pk
    up, down = body["replicas"]
    assert (up["url"], up["up"], up["server_name"], up["protocol_version"], up["error"]) == (
        demo_backend_url, True, "demo", "2025-11-25", "")
    assert down["url"] == closed and down["up"] is False and "Connection refused" in down["error"]
    health = admin_client.get(f"{_api(backend.tenant)}/{backend.pk}/health").json()
    assert health["checked_at"] == body["checked_at"]  # the check of a moment ago, not a new one
    only_down = backend_factory(tenant=backend.tenant, urls=[closed])
    assert admin_client.get(f"{_api(backend.tenant)}/{only_down.pk}/health").json()["up"] is False


def test_health_says_which_replicas_the_gateways_have_marked_down(admin_client: Client, demo_backend_url: str) -> None:
    closed = f"http://127.0.0.1:{free_port()}/mcp"
    backend = backend_factory(urls=[demo_backend_url, closed])
    now = time.time()
    redis_client().hset(REPLICA_HEALTH_KEY, closed, replica_down_record(since=now - 30, instance="gw-a", checked=now))
    try:
        health = admin_client.get(f"{_api(backend.tenant)}/{backend.pk}/health").json()
    finally:
        redis_client().hdel(REPLICA_HEALTH_KEY, closed)
    assert health["gateways_down"] == [{"url": closed, "since": now - 30, "instance": "gw-a", "checked": now}]
    assert [r["url"] for r in health["replicas"]] == [demo_backend_url, closed]  # the probe's view, beside it
    single = backend_factory(tenant=backend.tenant, urls=[closed])
    assert admin_client.get(f"{_api(backend.tenant)}/{single.pk}/health").json()["gateways_down"] is None
