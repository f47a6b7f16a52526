"""The fuzzed target: a gateway of its own under Daphne, fronting the demo MCP backend and an
OpenAPI backend, with the recording proxy in front (tests/fuzz/recording_proxy.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from apps.catalog.models import Backend
from apps.catalog.services import backend_create, virtual_host_create
from apps.catalog.specs import spec_upload
from tests import factories
from tests.backends.specs import as_json, service_spec
from tests.gateway.helpers import message_of, modern
from tests.processes import ROOT, free_port, gateway_argv, gateway_env, log_path, running

RESULTS = ROOT / "var" / "fuzz-results"
#: Every backend of the fuzzed host answers within this or the gateway answers for it.
BACKEND_TIMEOUT = 3.0


@dataclass(frozen=True)
class Target:
    url: str
    key: str
    gateway: subprocess.Popen[bytes]
    gateway_log: Path
    exchanges: Path
    proxy: subprocess.Popen[bytes]
    validated: dict[str, dict[str, Any]]


@pytest.fixture
def target(transactional_db: None, demo_backend_url: str, recording_service_url: str) -> Iterator[Target]:
    """A gateway of its own (so that its log and its death are this test's alone), with a tenant, an
    API key and one host mounting the MCP backend and the OpenAPI backend, tool_search listed; and
    the recording proxy in front of it.

    The MCP backend is the demo server, not the conformance fixture: mcp-fuzzer does not answer a
    server's requests (elicitation, sampling) arriving in a response stream, so every call of those
    fixture tools would only wait out its timeout. The demo's `countdown` and the REST service's
    /slow run as long as the fuzzer asks (2**31 s): the backend timeout turns that into the
    gateway's timeout error."""
    shutil.rmtree(RESULTS, ignore_errors=True)  # a stale report must never be judged
    RESULTS.mkdir(parents=True)
    tenant = factories.tenant_factory(slug="fuzz")
    issued = factories.api_key_factory(tenant=tenant, name="mcp-fuzzer")
    mcp = backend_create(tenant=tenant, name="demo", urls=[demo_backend_url], timeout_seconds=BACKEND_TIMEOUT)
    api = backend_create(tenant=tenant, name="svc", urls=[], kind=Backend.Kind.OPENAPI, base_url=recording_service_url,
                         timeout_seconds=BACKEND_TIMEOUT)
    spec = service_spec()
    # /huge/{size} makes the REST service build a string of `size` bytes: fuzzed with 2**31 it would
    # take the machine's memory, a fault of that fixture and not of the gateway.
    del spec["paths"]["/huge/{size}"]
    spec_upload(backend=api, document=as_json(spec), filename="service.json")
    virtual_host_create(tenant=tenant, slug="main", mounts={"demo": mcp, "svc": api}, tool_search="listed")

    port, proxy_port = free_port(), free_port()
    env = gateway_env(settings.DATABASES["default"]["NAME"], settings.REDIS_URL, GATEWAY_INSTANCE_ID="gw-fuzz")
    exchanges = RESULTS / "exchanges.jsonl"
    proxy = [sys.executable, "-m", "tests.fuzz.recording_proxy", "--port", str(proxy_port),
             "--upstream", f"http://127.0.0.1:{port}", "--record", str(exchanges)]
    with running(gateway_argv(port), port, env=env, log_name="fuzz-gateway") as gateway, \
            running(proxy, proxy_port, log_name="fuzz-proxy") as recorder:
        # The first tool_search of a process loads the embedding model (~10 s, more on a busy
        # machine): done before the fuzzer starts, so that its timeout measures the gateway.
        warm = modern(f"http://127.0.0.1:{port}/mcp/fuzz/main", "tools/call",
                      {"name": "tool_search", "arguments": {"query": "fetch a pet"}}, key=issued.secret)
        assert "result" in message_of(warm), warm.text
        listed = message_of(modern(f"http://127.0.0.1:{port}/mcp/fuzz/main", "tools/list", key=issued.secret))
        # The arguments of these the gateway checks itself; the demo backend's are its own business.
        validated = {tool["name"]: tool["inputSchema"] for tool in listed["result"]["tools"]
                     if tool["name"] == "tool_search" or tool["name"].startswith("svc-")}
        yield Target(f"http://127.0.0.1:{proxy_port}/mcp/fuzz/main", issued.secret, gateway,
                     log_path("fuzz-gateway", port), exchanges, recorder, validated)


