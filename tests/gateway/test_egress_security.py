"""Egress security end to end, through a gateway under Daphne (docs/security.md):

- the SSRF guard at connect time: a backend whose address the tenant no longer allows is the
  backend-unavailable error (-32004) saying the address is not allowed, and nothing reaches it;
- the header policy: requests to backends carry no inbound credential, cookie, hop-by-hop or
  proxy header, and a Host of the gateway's own, whatever the caller sent; configured header
  names that could carry such headers are refused when saved, and dropped when sent."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from django.core.exceptions import ValidationError

from apps.catalog.credentials import egress_credential_set
from apps.catalog.models import EgressCredential
from apps.catalog.services import backend_create
from apps.catalog.specs import spec_upload
from apps.gateway.adapters.http_pool import HttpPool, Target
from apps.tenants.services import tenant_private_networks_set
from tests import factories
from tests.backends.specs import as_json, service_spec
from tests.gateway.helpers import message_of, modern

pytestmark = pytest.mark.slow

#: What a caller may send that must never reach a backend.
INBOUND = {
    "x-api-key": "caller-api-key",
    "cookie": "sessionid=caller-session",
    "connection": "keep-alive, x-smuggle",
    "keep-alive": "timeout=5",
    "upgrade": "h2c",
    "te": "trailers",
    "proxy-authorization": "Basic Y2FsbGVyOnNlY3JldA==",
    "x-smuggle": "1",
}
NEVER = {"x-api-key", "cookie", "connection", "keep-alive", "upgrade", "te", "trailer", "transfer-encoding",
         "proxy-authorization", "proxy-connection", "x-smuggle"}


def recorded(base_url: str) -> list[dict[str, Any]]:
    return httpx.get(f"{base_url}/__recorded").json()


def header_names(request: dict[str, Any]) -> list[str]:
    return [name.lower() for name, _ in request["headers"]]


def _host(gateway_url: str, backend: Any, tenant: Any) -> tuple[str, str]:
    issued = factories.api_key_factory(tenant=tenant)
    host = factories.virtual_host_factory(tenant=tenant, mounts={"svc": backend})
    return f"{gateway_url}/mcp/{tenant.slug}/{host.slug}", issued.secret


def call(url: str, key: str, tool: str, arguments: dict[str, Any], headers: dict[str, str] | None = None) -> dict:
    return message_of(modern(url, "tools/call", {"name": tool, "arguments": arguments}, key=key, headers=headers))


def test_a_backend_at_an_address_the_tenant_no_longer_allows_is_unavailable_and_never_reached(
    transactional_db: None, gateway_url: str, demo_backend_url: str, recording_service_url: str
) -> None:
    tenant = factories.tenant_factory()
    tenant_private_networks_set(tenant=tenant, allowed=True)
    backend = backend_create(tenant=tenant, name="demo", urls=[demo_backend_url])
    url, key = _host(gateway_url, backend, tenant)
    assert call(url, key, "add", {"a": 1, "b": 2})["result"]["structuredContent"] == {"result": 3}

    tenant_private_networks_set(tenant=tenant, allowed=False)  # stored URLs are judged when connecting
    # The pooled connection was checked under the old setting: the new snapshot's pool is a new one.
    error = call(url, key, "add", {"a": 1, "b": 2})["error"]
    assert error["code"] == -32004 and error["data"] == {"backend": "demo"}
    assert "the backend's address is not allowed (a loopback address" in error["message"]

    # An OpenAPI service: its base URL is judged the same way.
    rest = backend_create(tenant=tenant, name="rest", urls=[], kind="openapi", base_url="https://8.8.8.8/")
    rest.base_url = recording_service_url  # as if saved while the tenant allowed it
    rest.save(update_fields=["base_url"])
    spec_upload(backend=rest, document=as_json(service_spec(security=False)))
    rest_url, rest_key = _host(gateway_url, rest, tenant)
    httpx.post(f"{recording_service_url}/__reset")
    error = call(rest_url, rest_key, "getPet", {"petId": "7"})["error"]
    assert error["code"] == -32004 and "not allowed" in error["message"]
    assert recorded(recording_service_url) == []


def test_mcp_backends_get_no_inbound_credential_cookie_or_hop_by_hop_header(
    transactional_db: None, gateway_url: str, recording_service_url: str
) -> None:
    # The recording service is no MCP server (the calls fail), but it keeps every request as received.
    tenant = factories.tenant_factory()
    backend = backend_create(tenant=tenant, name="rec", urls=[f"{recording_service_url}/mcp"])
    egress_credential_set(backend=backend, kind="api_key_header", name="X-Backend-Key", secret="backend-secret")
    url, key = _host(gateway_url, backend, tenant)
    httpx.post(f"{recording_service_url}/__reset")
    call(url, key, "add", {"a": 1, "b": 2}, headers=INBOUND)
    requests = recorded(recording_service_url)
    assert requests
    port = Target.from_url(recording_service_url).port
    for request in requests:
        names = header_names(request)
        headers = {name.lower(): value for name, value in request["headers"]}
        assert not NEVER & set(names), names
        assert key not in str(request["headers"])  # the caller's key (sent as its bearer token)
        assert "authorization" not in names
        assert names.count("host") == 1 and headers["host"] == f"127.0.0.1:{port}"
        assert headers["x-backend-key"] == "backend-secret"


def test_openapi_services_get_no_inbound_credential_and_no_denied_header_from_arguments(
    transactional_db: None, gateway_url: str, recording_service_url: str
) -> None:
    tenant = factories.tenant_factory()
    backend = backend_create(tenant=tenant, name="rest", urls=[], kind="openapi", base_url=recording_service_url)
    spec = service_spec(security=False, extra_paths={"/framing": {"get": {
        "operationId": "framing", "responses": {"200": {"description": "ok"}},
        "parameters": [{"name": name, "in": "header", "schema": {"type": "string"}}
                       for name in ("Host", "Transfer-Encoding", "Connection", "Proxy-Authorization", "X-Fine")],
    }}})
    spec_upload(backend=backend, document=as_json(spec))
    url, key = _host(gateway_url, backend, tenant)
    httpx.post(f"{recording_service_url}/__reset")
    arguments = {"Host": "evil.test", "Transfer-Encoding": "chunked", "Connection": "close",
                 "Proxy-Authorization": "Basic eA==", "X-Fine": "yes"}
    result = call(url, key, "framing", arguments, headers=INBOUND)
    assert "result" in result and not result["result"]["isError"], result
    (request,) = recorded(recording_service_url)
    names = header_names(request)
    headers = {name.lower(): value for name, value in request["headers"]}
    assert not NEVER & set(names) and "authorization" not in names, names
    assert headers["host"] == f"127.0.0.1:{Target.from_url(recording_service_url).port}"
    assert headers["x-fine"] == "yes"


@pytest.mark.parametrize("name", ["Host", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "TE",
                                  "Trailer", "Upgrade", "Proxy-Authorization", "Proxy-Anything"])
@pytest.mark.parametrize("kind", ["mcp", "openapi"])
def test_a_credential_header_name_that_frames_or_routes_requests_is_refused(db: None, name: str, kind: str) -> None:
    tenant = factories.tenant_factory()
    if kind == "mcp":
        backend = factories.backend_factory(tenant=tenant)
    else:
        backend = factories.openapi_backend_factory(tenant=tenant)
    with pytest.raises(ValidationError) as error:
        egress_credential_set(backend=backend, kind="api_key_header", name=name, secret="s3cret")
    assert list(error.value.message_dict) == ["name"]
    assert repr(name) in error.value.message_dict["name"][0]
    assert not EgressCredential.objects.filter(backend=backend).exists()


async def test_the_client_drops_denied_headers_it_is_handed(recording_service_url: str) -> None:
    httpx.post(f"{recording_service_url}/__reset")
    pool = HttpPool(Target.from_url(recording_service_url), allow_private=True)
    denied = [("Host", "evil.test"), ("Content-Length", "999"), ("Transfer-Encoding", "chunked"),
              ("Connection", "close"), ("Keep-Alive", "timeout=1"), ("TE", "trailers"), ("Upgrade", "websocket"),
              ("Proxy-Authorization", "Basic eA=="), ("Proxy-Connection", "close"), ("Expect", "100-continue")]
    response = await pool.request("POST", "/echo", [*denied, ("X-Fine", "yes")], b"{}", timeout=5)
    assert response.status == 200
    await response.read()
    pool.close()
    (request,) = recorded(recording_service_url)
    headers = [(name.lower(), value) for name, value in request["headers"]]
    port = Target.from_url(recording_service_url).port
    assert sorted(headers) == sorted([("host", f"127.0.0.1:{port}"), ("x-fine", "yes"), ("content-length", "2")])
