"""docker/nginx.conf run by Debian's nginx on loopback, in front of two real gateway instances under
Daphne (the compose service names swapped for their ports, nothing else changed): the config is
valid, plain round robin spreads MCP calls over both instances, SSE streams pass unbuffered (an
HTTP+SSE session works with its stream on one instance and its POSTs on either), and static files,
the body cap and the hidden /metrics behave as the compose deployment needs."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import pytest

from bench.cluster.nginx import MISSING, nginx_argv, nginx_binary
from tests.conftest import Host, make_host, mcp_client
from tests.deploy.helpers import NGINX_CONF, local_nginx_conf
from tests.gateway.helpers import initialize, post
from tests.gateway.test_http_sse import sse_session
from tests.processes import ROOT, free_port, log_path, running

pytestmark = pytest.mark.slow

STATIC = ROOT / "static"


def _binary() -> str:
    binary = nginx_binary()
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    return binary


@dataclass(frozen=True)
class Balancer:
    url: str
    log: Path  # nginx's stdout: the access log of docker/nginx.conf
    gateway_ports: tuple[int, ...]

    def served(self) -> Counter[int]:
        """Requests per gateway port, from the access log's `-> $upstream_addr`."""
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return Counter(int(line.split(" -> ")[1].split()[0].rsplit(":", 1)[1]) for line in lines if " -> 127.0.0.1:" in line)


def _prefix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    prefix = tmp_path_factory.mktemp("deploy-nginx")
    prefix.chmod(0o755)
    return prefix


def test_nginx_accepts_the_compose_config(tmp_path_factory: pytest.TempPathFactory) -> None:
    binary = _binary()
    prefix = _prefix(tmp_path_factory)
    config = prefix / "nginx.conf"
    config.write_text(local_nginx_conf(NGINX_CONF.read_text(), gateway_ports=(free_port(), free_port()),
                                       listen=free_port(), prefix=prefix, static=STATIC))
    done = subprocess.run([*nginx_argv(binary, prefix, config), "-t"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "syntax is ok" in done.stderr and "test is successful" in done.stderr


@pytest.fixture(scope="module")
def balancer(tmp_path_factory: pytest.TempPathFactory, gateway_url: str, second_gateway_url: str) -> Iterator[Balancer]:
    binary = _binary()
    prefix = _prefix(tmp_path_factory)
    ports = (int(gateway_url.rsplit(":", 1)[1]), int(second_gateway_url.rsplit(":", 1)[1]))
    listen = free_port()
    config = prefix / "nginx.conf"
    config.write_text(local_nginx_conf(NGINX_CONF.read_text(), gateway_ports=ports, listen=listen, prefix=prefix, static=STATIC))
    # The container's command line: the config leaves `daemon` to it.
    with running([*nginx_argv(binary, prefix, config), "-g", "daemon off;"], listen, log_name="deploy-nginx"):
        yield Balancer(f"http://127.0.0.1:{listen}", log_path("deploy-nginx", listen), ports)


@pytest.fixture
def host(transactional_db: None, balancer: Balancer, demo_backend_url: str) -> Host:
    return make_host(balancer.url, demo_backend_url)


def test_round_robin_spreads_sessions_and_calls_over_both_instances(balancer: Balancer, host: Host) -> None:
    # A session id names the instance that minted it: four initializes, two on each.
    minted = Counter(initialize(host.url, host.key).headers["mcp-session-id"].split(".")[0] for _ in range(4))
    assert minted == Counter({"gw-test": 2, "gw-test-b": 2})
    before = balancer.served()

    async def calls() -> list[str]:
        async with mcp_client(host.url, host.key) as client:
            return [(await client.call_tool("add", {"a": i, "b": 1})).content[0].text for i in range(6)]

    assert anyio.run(calls) == [f"{i + 1.0}" for i in range(6)]
    spread = balancer.served() - before
    assert set(spread) == set(balancer.gateway_ports)
    assert min(spread.values()) >= 3  # six calls and the handshake, alternating


async def test_an_http_sse_session_streams_through_nginx(balancer: Balancer, host: Host) -> None:
    """The event stream stays on one instance while nginx alternates the POSTs: every answer is
    relayed to the stream's instance and must reach the client as it is written — a buffering
    proxy would hold the `endpoint` event and the session would never start."""
    before = balancer.served()
    with anyio.fail_after(60):
        async with sse_session(host) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            results = [(await client.call_tool("add", {"a": i, "b": 2})).content[0].text for i in range(4)]
    assert "add" in tools
    assert results == [f"{i + 2.0}" for i in range(4)]
    assert set(balancer.served() - before) == set(balancer.gateway_ports)


def test_bodies_past_the_gateways_cap_stop_at_nginx(balancer: Balancer, host: Host) -> None:
    limit = 4 * 1024 * 1024  # client_max_body_size of the MCP endpoint (test_compose ties it to the setting)
    refused = post(host.url, b"x" * (limit + 1), key=host.key)
    assert refused.status_code == 413
    assert "nginx" in refused.text  # refused before any gateway read it
    # At the cap nginx passes the body on and the gateway answers it (not JSON: a parse error).
    at_limit = post(host.url, b"x" * limit, key=host.key)
    assert at_limit.json()["error"]["code"] == -32700


def test_static_files_health_and_metrics(balancer: Balancer) -> None:
    sample = next(path for path in sorted(STATIC.rglob("*.css")))
    served = httpx.get(f"{balancer.url}/static/{sample.relative_to(STATIC)}", timeout=10)
    assert served.status_code == 200 and served.content == sample.read_bytes()
    assert served.headers["content-type"].startswith("text/css")
    assert httpx.get(f"{balancer.url}/nginx-health", timeout=10).text == "ok\n"
    # Each replica's metrics are scraped from the replica itself, never through round robin.
    assert httpx.get(f"{balancer.url}/metrics", timeout=10).status_code == 404
    assert httpx.get(f"{balancer.url}/healthz", timeout=10).json() == {"status": "ok"}
