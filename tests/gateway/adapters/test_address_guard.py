"""The SSRF guard at connect time: the gateway's pooled client and the httpx clients (token
endpoints, JWKS, probes) resolve each new connection's host, check every address and connect to a
checked one, so neither DNS rebinding nor a redirect gets a request to a refused address.

Every test runs with a net under it: a connection attempt to anything but loopback fails the test
before a packet leaves (this machine may reach nothing else)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpcore
import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from apps.common.guarded_http import address_refusal, guarded_async_client, guarded_client
from apps.gateway.adapters.egress_credentials import OAuthClient, OAuthTokens
from apps.gateway.adapters.http_pool import AddressNotAllowed, HttpPool, Target
from apps.gateway.pipeline.ports import CredentialUnavailable
from apps.kernel.identity import InvalidToken, TokenIssuerView
from apps.tenants.token_verifier import JwtVerifier

METADATA_URL = "http://169.254.169.254/latest/meta-data/"


def _loopback_only(host: str) -> None:
    if not ipaddress.ip_address(host).is_loopback:
        raise AssertionError(f"the guard let a connection to {host} through")


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    open_connection = asyncio.open_connection
    anyio_connect = httpcore.AnyIOBackend.connect_tcp
    sync_connect = httpcore.SyncBackend.connect_tcp

    async def guarded_open(host: str, port: int, **kwargs: Any) -> Any:
        _loopback_only(host)
        return await open_connection(host, port, **kwargs)

    async def guarded_anyio(self: Any, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        _loopback_only(host)
        return await anyio_connect(self, host, port, *args, **kwargs)

    def guarded_sync(self: Any, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        _loopback_only(host)
        return sync_connect(self, host, port, *args, **kwargs)

    monkeypatch.setattr(asyncio, "open_connection", guarded_open)
    monkeypatch.setattr(httpcore.AnyIOBackend, "connect_tcp", guarded_anyio)
    monkeypatch.setattr(httpcore.SyncBackend, "connect_tcp", guarded_sync)


def recorded(base_url: str) -> list[dict[str, Any]]:
    return httpx.get(f"{base_url}/__recorded").json()


@pytest.fixture
def service(recording_service_url: str) -> str:
    httpx.post(f"{recording_service_url}/__reset")
    return recording_service_url


async def test_a_private_address_is_refused_unless_the_tenant_allows_it(service: str) -> None:
    refused = HttpPool(Target.from_url(service), allow_private=False)
    with pytest.raises(AddressNotAllowed) as error:
        await refused.request("GET", "/ping", [], timeout=5)
    assert str(error.value) == ("cannot connect: the backend's address is not allowed (a loopback address and this "
                                "tenant does not allow private networks)")
    assert recorded(service) == []
    allowed = HttpPool(Target.from_url(service), allow_private=True)
    response = await allowed.request("GET", "/ping", [], timeout=5)
    assert response.status == 200
    await response.read()
    allowed.close()
    assert [r["path"] for r in recorded(service)] == ["/ping"]


async def test_a_metadata_address_is_refused_even_where_private_networks_are_allowed() -> None:
    pool = HttpPool(Target.from_url(METADATA_URL), allow_private=True)
    with pytest.raises(AddressNotAllowed, match=r"not allowed \(a cloud metadata address\)"):
        await pool.request("GET", "/latest/meta-data/", [], timeout=5)


async def test_dns_rebinding_is_refused_at_the_next_connection_and_pooled_calls_resolve_nothing(
    service: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = Target.from_url(service).port
    answers = {"rebind.test": "127.0.0.1"}
    lookups: list[str] = []

    async def getaddrinfo(host: str, port: int, **kwargs: object) -> list[tuple]:
        # What a DNS server re-pointing its name would answer (there is none to run here).
        lookups.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers[host], port))]

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", getaddrinfo)
    pool = HttpPool(Target.from_url(f"http://rebind.test:{port}/"), allow_private=True)
    for _ in range(3):
        response = await pool.request("GET", "/ping", [], timeout=5)
        await response.read()
    assert lookups == ["rebind.test"]  # one connection, reused: pooled calls cost no lookup
    answers["rebind.test"] = "169.254.169.254"
    pool.close()  # the connection is gone: the next one resolves the name again
    with pytest.raises(AddressNotAllowed, match="cloud metadata address"):
        await pool.request("GET", "/ping", [], timeout=5)
    assert lookups == ["rebind.test", "rebind.test"]
    assert len(recorded(service)) == 3
    # The Host header still names the host, though the connection went to the checked address.
    assert dict(recorded(service)[0]["headers"])["host"] == f"rebind.test:{port}"


async def test_the_httpx_clients_refuse_what_the_tenant_does_not_allow(service: str) -> None:
    async with guarded_async_client(allow_private=False, timeout=5) as client:
        with pytest.raises(httpx.ConnectError) as error:
            await client.get(f"{service}/token")
    refusal = address_refusal(error.value)
    assert refusal is not None and "127.0.0.1 is a loopback address" in str(refusal)
    with guarded_client(allow_private=False, timeout=5) as client, pytest.raises(httpx.ConnectError) as error:
        client.get(f"{service}/token")
    assert address_refusal(error.value) is not None
    assert recorded(service) == []
    async with guarded_async_client(allow_private=True, timeout=5) as client:
        assert (await client.get(f"{service}/token")).status_code == 200
    with guarded_client(allow_private=True, timeout=5) as client:
        assert client.get(f"{service}/token").status_code == 200


class _Redirect(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(302)
        self.send_header("Location", METADATA_URL)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def redirecting_url() -> Iterator[str]:
    """A real HTTP server that redirects every request to the metadata service."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Redirect)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    server.shutdown()
    server.server_close()


async def test_a_redirect_cannot_lead_past_the_guard(redirecting_url: str) -> None:
    async with guarded_async_client(allow_private=True, timeout=5) as client:
        # The gateway's clients follow no redirect...
        response = await client.get(redirecting_url)
        assert response.status_code == 302
        # ...and one that did would meet the guard at the next hop.
        with pytest.raises(httpx.ConnectError) as error:
            await client.get(redirecting_url, follow_redirects=True)
    refusal = address_refusal(error.value)
    assert refusal is not None and refusal.always and "cloud metadata" in str(refusal)


async def test_a_jwks_url_the_tenant_does_not_allow_is_not_fetched(service: str) -> None:
    issuer = TokenIssuerView("https://login.test/", "aud", f"{service}/jwks.json", "", ("ES256",), "team", "sub",
                             allow_private=False)
    signed = jwt.encode({"iss": issuer.issuer, "aud": "aud", "sub": "s", "exp": 2**31 - 1},
                        ec.generate_private_key(ec.SECP256R1()), algorithm="ES256", headers={"kid": "k1"})
    with pytest.raises(InvalidToken, match=r"its address is not allowed \(a loopback address"):
        await JwtVerifier().verify(signed, [issuer])
    assert recorded(service) == []


async def test_a_token_endpoint_the_tenant_does_not_allow_is_not_asked(service: str) -> None:
    oauth = OAuthClient(f"{service}/token", "gw", "s3cret", allow_private=False)
    with pytest.raises(CredentialUnavailable, match=r"the token endpoint's address is not allowed \(a loopback"):
        await OAuthTokens(None).token(oauth)
    assert recorded(service) == []
