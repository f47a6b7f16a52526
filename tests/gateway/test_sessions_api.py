"""The gateway's REST API: the tenant's open MCP sessions, paged, with each tenant's isolation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis.asyncio
from django.conf import settings
from django.test import Client

from apps.common.redis import redis_client
from apps.gateway.adapters.redis_session_store import RedisSessionStore
from apps.gateway.pipeline.values import SessionState
from tests.factories import tenant_factory

pytestmark = pytest.mark.django_db


def test_the_sessions(client: Client, acme: Any) -> None:
    for key in redis_client().scan_iter("gw:session*"):
        redis_client().delete(key)

    async def open_sessions() -> None:
        client = redis.asyncio.Redis.from_url(settings.REDIS_URL)
        store = RedisSessionStore(client, secret=settings.SECRET_KEY, instance="gw-9", ttl_seconds=3600)
        for _ in range(3):
            await store.save(SessionState(id=store.new_id(), tenant_id=acme.pk, vhost="main", key_id=0,
                                          protocol_version="2025-11-25", client_capabilities={}, client_info={}),
                             create=True)
        await client.aclose()

    asyncio.run(open_sessions())
    body = client.get("/api/v1/tenants/acme/sessions?limit=2").json()
    assert body["count"] == 3 and len(body["results"]) == 2 and body["next"]
    assert body["results"][0]["instance"] == "gw-9" and body["results"][0]["virtual_host"] == "main"
    assert len(client.get(body["next"]).json()["results"]) == 1


def test_another_tenant_is_not_found_and_anonymous_callers_are_refused(client: Client, acme: Any) -> None:
    tenant_factory(slug="other")
    assert client.get("/api/v1/tenants/other/sessions").status_code == 404
    assert Client().get("/api/v1/tenants/acme/sessions").status_code == 401
