"""What a client can make the gateway keep for it is bounded: a key holds at most
GATEWAY_MAX_SESSIONS_PER_KEY usable sessions (counted across instances, anonymous callers against
their host's key, freed by DELETE and by expiry), an `initialize` stores at most
GATEWAY_MAX_CLIENT_METADATA_BYTES of `capabilities` and of `clientInfo`, and a call waiting for a
stateless client's input (MRTR) is continued only by its caller on the virtual host that made it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from django.conf import settings

from apps.catalog.services import virtual_host_update
from apps.common.redis import redis_client
from apps.gateway.adapters.redis_session_store import session_count
from apps.tenants.models import Tenant
from tests import factories
from tests.conftest import Host, make_host
from tests.gateway.helpers import initialize, message_of, modern, post
from tests.processes import backend_argv, free_port, gateway_argv, gateway_env, running

pytestmark = pytest.mark.slow

CAP = 3


@contextlib.contextmanager
def _gateway(name: str, **env: str) -> Iterator[str]:
    port = free_port()
    with running(gateway_argv(port), port, log_name=name, env=gateway_env(
        settings.DATABASES["default"]["NAME"], settings.REDIS_URL, GATEWAY_INSTANCE_ID=name, **env,
    )):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def capped_gateways(django_db_setup: None, django_db_blocker: object) -> Iterator[tuple[str, str]]:
    """Two instances of one deployment whose keys may each hold CAP sessions."""
    with _gateway("gw-cap-a", GATEWAY_MAX_SESSIONS_PER_KEY=str(CAP)) as first, \
            _gateway("gw-cap-b", GATEWAY_MAX_SESSIONS_PER_KEY=str(CAP)) as second:
        yield first, second


@pytest.fixture(scope="module")
def legacy_backend() -> Iterator[str]:
    """The conformance fixture (it asks for sampling mid-call), refusing the stateless era."""
    port = free_port()
    argv = [*backend_argv("tests.backends.era_server", port), "--era", "legacy", "--server", "conformance"]
    with running(argv, port, log_name="security-legacy-backend"):
        yield f"http://127.0.0.1:{port}/mcp"


def _on(host: Host, gateway_url: str) -> str:
    return f"{gateway_url}/mcp/{host.tenant}/{host.slug}"


def _opened(response: httpx.Response) -> str | None:
    """The new session's id, or None when initialize was refused with the session cap's error."""
    if "mcp-session-id" in response.headers:
        assert "result" in response.json()
        return response.headers["mcp-session-id"]
    error = response.json()["error"]
    assert error["code"] == -32005 and error["data"] == {"limit_scope": "sessions", "limit": CAP}, error
    assert f"already holds {CAP} open sessions" in error["message"]
    return None


def _tenant_sessions(slug: str) -> int:
    tenant = Tenant.objects.get(slug=slug)
    return session_count(redis_client(), tenant_id=tenant.pk, ttl_seconds=settings.GATEWAY_SESSION_TTL_SECONDS)


def test_a_key_holds_at_most_its_cap_of_sessions_across_instances(
    transactional_db: None, capped_gateways: tuple[str, str], demo_backend_url: str
) -> None:
    first, second = capped_gateways
    host = make_host(first, demo_backend_url)
    urls = [_on(host, first), _on(host, second)] * 5
    with ThreadPoolExecutor(len(urls)) as pool:  # ten at once, half on each instance
        opened = [s for s in pool.map(lambda url: _opened(initialize(url, host.key)), urls) if s]
    assert len(opened) == CAP
    assert _tenant_sessions(host.tenant) == CAP
    # Another key of the tenant has slots of its own.
    other = factories.api_key_factory(tenant=Tenant.objects.get(slug=host.tenant)).secret
    assert _opened(initialize(_on(host, second), other)) is not None
    # DELETE frees a slot at once, on any instance.
    ended = httpx.delete(_on(host, second), headers={"authorization": f"Bearer {host.key}", "mcp-session-id": opened[0]})
    assert ended.status_code == 200
    assert _opened(initialize(_on(host, first), host.key)) is not None
    assert _opened(initialize(_on(host, second), host.key)) is None


def test_an_expired_session_frees_its_slot(
    transactional_db: None, django_db_setup: None, demo_backend_url: str
) -> None:
    with _gateway("gw-cap-expiry", GATEWAY_MAX_SESSIONS_PER_KEY="1", GATEWAY_SESSION_TTL_SECONDS="2") as gateway:
        host = make_host(gateway, demo_backend_url)
        assert "mcp-session-id" in initialize(host.url, host.key).headers
        refused = initialize(host.url, host.key).json()["error"]
        assert refused["code"] == -32005 and refused["data"]["limit"] == 1
        time.sleep(2.5)  # idle past its expiry: unusable, whether or not a sweep took it yet
        assert "mcp-session-id" in initialize(host.url, host.key).headers


def test_anonymous_callers_count_against_their_hosts_key(
    transactional_db: None, capped_gateways: tuple[str, str], demo_backend_url: str
) -> None:
    first, second = capped_gateways
    tenant = factories.tenant_factory()
    issued = factories.api_key_factory(tenant=tenant, name="anonymous")
    backend = factories.backend_factory(tenant=tenant, urls=[demo_backend_url])
    vhost = factories.virtual_host_factory(tenant=tenant, mounts={"demo": backend})
    virtual_host_update(virtual_host=vhost, allow_anonymous=True, anonymous_key=issued.api_key)
    host = Host(f"{first}/mcp/{tenant.slug}/{vhost.slug}", issued.secret, tenant.slug, vhost.slug)
    time.sleep(1.0)  # the instances see the configuration change
    opened = [_opened(initialize(_on(host, url), "")) for url in (first, second, first, second)]
    assert sum(1 for s in opened if s) == CAP
    assert _opened(initialize(host.url, issued.secret)) is None  # the key itself: the same slots


def test_http_sse_sessions_count_too(
    transactional_db: None, capped_gateways: tuple[str, str], demo_backend_url: str
) -> None:
    first, _ = capped_gateways
    host = make_host(first, demo_backend_url)
    headers = {"authorization": f"Bearer {host.key}", "accept": "text/event-stream"}
    with httpx.Client(timeout=10) as client, contextlib.ExitStack() as streams:
        for _ in range(CAP):
            stream = streams.enter_context(client.stream("GET", f"{host.url}/sse", headers=headers))
            assert stream.status_code == 200
        refused = client.get(f"{host.url}/sse", headers=headers)
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == -32005 and f"{CAP} open sessions" in refused.json()["error"]["message"]


@pytest.mark.parametrize(("field", "value"), [
    ("capabilities", {"experimental": {"padding": "x" * 9000}}),
    ("clientInfo", {"name": "x" * 9000, "version": "1"}),
])
def test_an_initialize_with_oversized_client_metadata_is_refused_and_stores_nothing(
    transactional_db: None, gateway_url: str, demo_backend_url: str, field: str, value: dict[str, Any]
) -> None:
    host = make_host(gateway_url, demo_backend_url)
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}, field: value}
    response = post(host.url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}, key=host.key)
    error = response.json()["error"]
    assert error["code"] == -32602 and f'"{field}"' in error["message"] and "8192 bytes" in error["message"]
    assert error["data"] == {"field": field, "max_bytes": 8192}
    assert "mcp-session-id" not in response.headers
    assert _tenant_sessions(host.tenant) == 0
    assert "mcp-session-id" in initialize(host.url, host.key).headers  # a normal one still opens


def test_a_request_state_is_continued_only_on_the_virtual_host_that_issued_it(
    transactional_db: None, gateway_url: str, legacy_backend: str
) -> None:
    tenant = factories.tenant_factory()
    key = factories.api_key_factory(tenant=tenant).secret
    backend = factories.backend_factory(tenant=tenant, urls=[legacy_backend])
    here, there = (factories.virtual_host_factory(tenant=tenant, mounts={"demo": backend}) for _ in range(2))
    url_here, url_there = (f"{gateway_url}/mcp/{tenant.slug}/{v.slug}" for v in (here, there))
    call = {"name": "test_sampling", "arguments": {"prompt": "What is 2+2?"}}
    required = message_of(modern(url_here, "tools/call", call, key=key))["result"]
    assert required["resultType"] == "input_required"
    [(input_key, _)] = required["inputRequests"].items()
    answer = {"role": "assistant", "content": {"type": "text", "text": "sampled: four"}, "model": "m"}
    retry = {**call, "requestState": required["requestState"], "inputResponses": {input_key: answer}}

    elsewhere = message_of(modern(url_there, "tools/call", retry, key=key, request_id=2))
    assert elsewhere["error"]["code"] == -32602
    assert "not issued to this caller on this virtual host" in elsewhere["error"]["message"]
    # The call still waits for its own caller, on its own host.
    done = message_of(modern(url_here, "tools/call", retry, key=key, request_id=3))
    assert "sampled: four" in done["result"]["content"][0]["text"]
