"""API keys open virtual hosts of their own tenant only; anonymous access is explicit."""

from __future__ import annotations

import httpx
import pytest

from apps.catalog.models import VirtualHost
from apps.catalog.services import virtual_host_update
from apps.tenants.models import ApiKey
from apps.tenants.services import api_key_revoke
from tests import factories
from tests.conftest import Host, make_host, mcp_client
from tests.gateway.helpers import initialize, open_session, post

pytestmark = pytest.mark.slow


def test_missing_key_is_401_with_challenge(demo_host: Host) -> None:
    response = initialize(demo_host.url, "")
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_invalid_key_is_401(demo_host: Host) -> None:
    response = initialize(demo_host.url, "mgw_not-a-real-key-at-all")
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


def test_x_api_key_header_works(demo_host: Host) -> None:
    response = httpx.post(demo_host.url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}},
        headers={"x-api-key": demo_host.key, "accept": "application/json, text/event-stream"})
    assert response.status_code == 200


def test_key_of_another_tenant_is_refused(demo_host: Host, gateway_url: str, demo_backend_url: str) -> None:
    other = make_host(gateway_url, demo_backend_url)
    assert initialize(other.url, demo_host.key).status_code == 401
    assert initialize(demo_host.url, other.key).status_code == 401
    assert initialize(other.url, other.key).status_code == 200


def test_unknown_virtual_host_is_404_for_a_valid_key_and_401_without(demo_host: Host) -> None:
    url = demo_host.url.rsplit("/", 1)[0] + "/nope"
    assert initialize(url, demo_host.key).status_code == 404
    assert initialize(url, "").status_code == 401
    unknown_tenant = demo_host.url.replace(f"/mcp/{demo_host.tenant}/", "/mcp/no-such-tenant/")
    assert initialize(unknown_tenant, demo_host.key).status_code == 401


def test_session_is_bound_to_the_key_that_opened_it(demo_host: Host) -> None:
    session = open_session(demo_host.url, demo_host.key)
    tenant = ApiKey.objects.get(prefix=demo_host.key[:12]).tenant
    second = factories.api_key_factory(tenant=tenant)
    response = post(demo_host.url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, key=second.secret,
                    headers={"mcp-session-id": session})
    assert response.status_code == 404


def test_revoked_key_stops_working(demo_host: Host) -> None:
    assert initialize(demo_host.url, demo_host.key).status_code == 200
    api_key_revoke(api_key=ApiKey.objects.get(prefix=demo_host.key[:12]))
    assert initialize(demo_host.url, demo_host.key).status_code == 401


async def test_anonymous_mode_is_off_by_default_and_acts_as_its_key(demo_host: Host) -> None:
    from channels.db import database_sync_to_async

    assert initialize(demo_host.url, "").status_code == 401

    @database_sync_to_async  # closes the worker thread's connection afterwards
    def enable() -> None:
        vhost = VirtualHost.objects.get(slug=demo_host.slug, tenant__slug=demo_host.tenant)
        virtual_host_update(virtual_host=vhost, allow_anonymous=True,
                            anonymous_key=ApiKey.objects.get(prefix=demo_host.key[:12]))

    await enable()
    async with mcp_client(demo_host.url, None, "legacy") as client:
        assert (await client.call_tool("add", {"a": 1, "b": 1})).content[0].text == "2.0"


def test_an_expired_key_is_refused(demo_host: Host) -> None:
    import datetime

    from apps.tenants.services import api_key_update

    key = ApiKey.objects.get(prefix=demo_host.key[:12])
    api_key_update(api_key=key, team=None, expires_at=datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1))
    assert initialize(demo_host.url, demo_host.key).status_code == 200
    api_key_update(api_key=key, team=None, expires_at=datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=1))
    assert initialize(demo_host.url, demo_host.key).status_code == 401
