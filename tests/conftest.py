"""Shared fixtures: the real Redis test database, and real processes — MCP backends built with the
official SDK and the gateway under Daphne — on loopback ports."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
from django.conf import settings
from django.test import Client as DjangoClient
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from apps.common.redis import redis_client
from apps.tenants.services import membership_set
from tests import factories
from tests.processes import backend_argv, free_port, gateway_argv, gateway_env, running

pytest_plugins = ["tests.browser"]


@pytest.fixture(scope="session")
def clean_redis() -> None:
    """The Redis test database, emptied once per run: an earlier run's counters and sessions name the
    same tenant and key ids. Opt-in, so that a test that needs no service touches no Redis
    (`scripts/test.sh` runs the kernel's and the pure core's tests first with no service reachable);
    every test that uses the database gets it through `django_db_setup`."""
    redis_client().flushdb()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, clean_redis: None) -> None:
    """pytest-django's test database, and a clean Redis beside it."""


@pytest.fixture
def acme(client: DjangoClient, django_user_model: Any) -> Any:
    """Tenant `acme`, with `client` signed in as one of its members (mia)."""
    user = django_user_model.objects.create_user(username="mia", password="pw")
    tenant = factories.tenant_factory(slug="acme")
    membership_set(tenant=tenant, user=user, role="member")
    client.force_login(user)
    return tenant


@pytest.fixture
def indexing_on(settings) -> None:  # noqa: ANN001 - pytest-django fixture
    """Tools are indexed for tool_search as their catalogs change (the test settings turn it off)."""
    settings.GATEWAY_TOOL_INDEX = True


@pytest.fixture(scope="session")
def demo_backend_url() -> Iterator[str]:
    port = free_port()
    with running(backend_argv("scripts.demo_server", port), port, log_name="demo-backend"):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="session")
def sse_backend_url() -> Iterator[str]:
    """The conformance fixture server over HTTP+SSE (2024-11-05): its event-stream URL."""
    port = free_port()
    argv = [*backend_argv("tests.backends.conformance_server", port), "--transport", "sse"]
    with running(argv, port, log_name="sse-backend"):
        yield f"http://127.0.0.1:{port}/sse"


@pytest.fixture(scope="session")
def recording_service_url() -> Iterator[str]:
    """The REST service that records every request (tests/backends/recording_service.py); tests
    that read what it recorded POST `/__reset` first."""
    port = free_port()
    with running(backend_argv("tests.backends.recording_service", port), port, log_name="recording-service"):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="session")
def gateway_url(django_db_setup: None, django_db_blocker: object) -> Iterator[str]:
    """A gateway under Daphne, on the test database and the test Redis database."""
    port = free_port()
    env = gateway_env(settings.DATABASES["default"]["NAME"], settings.REDIS_URL, GATEWAY_INSTANCE_ID="gw-test")
    with running(gateway_argv(port), port, env=env, log_name="gateway"):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="session")
def second_gateway_url(django_db_setup: None, django_db_blocker: object) -> Iterator[str]:
    """Another instance of the same deployment (same database and Redis), for requests of one
    session that land on different instances."""
    port = free_port()
    env = gateway_env(settings.DATABASES["default"]["NAME"], settings.REDIS_URL, GATEWAY_INSTANCE_ID="gw-test-b")
    with running(gateway_argv(port), port, env=env, log_name="gateway-b"):
        yield f"http://127.0.0.1:{port}"


@dataclass(frozen=True)
class Host:
    """A tenant with one key and a virtual host fronting one backend, reachable at `url`."""

    url: str
    key: str
    tenant: str
    slug: str


def make_host(gateway_url: str, backend_url: str) -> Host:
    tenant = factories.tenant_factory()
    issued = factories.api_key_factory(tenant=tenant)
    backend = factories.backend_factory(tenant=tenant, urls=[backend_url])
    host = factories.virtual_host_factory(tenant=tenant, mounts={"demo": backend})
    return Host(f"{gateway_url}/mcp/{tenant.slug}/{host.slug}", issued.secret, tenant.slug, host.slug)


def make_composed_host(gateway_url: str, backends: dict[str, str]) -> Host:
    """A tenant with one key and a virtual host mounting an MCP backend at each URL under its map key."""
    tenant = factories.tenant_factory()
    issued = factories.api_key_factory(tenant=tenant)
    mounts = {key: factories.backend_factory(tenant=tenant, name=key, urls=[url]) for key, url in backends.items()}
    host = factories.virtual_host_factory(tenant=tenant, mounts=mounts)
    return Host(f"{gateway_url}/mcp/{tenant.slug}/{host.slug}", issued.secret, tenant.slug, host.slug)


@pytest.fixture
def demo_host(transactional_db: None, gateway_url: str, demo_backend_url: str) -> Host:
    return make_host(gateway_url, demo_backend_url)


@contextlib.asynccontextmanager
async def mcp_client(url: str, key: str | None, mode: str = "auto", **options: object) -> AsyncIterator[Client]:
    """The official SDK client over Streamable HTTP, sending `key` as a bearer token."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, **options) as client:
            yield client


@pytest.fixture(scope="session")
def webhook_service_url() -> Iterator[str]:
    """The outside service of webhook interceptors (tests/backends/webhook_service.py); tests that
    read what it recorded POST `/__reset` first."""
    port = free_port()
    with running(backend_argv("tests.backends.webhook_service", port), port, log_name="webhook-service"):
        yield f"http://127.0.0.1:{port}"
