"""mcp-fuzzer against the MCP endpoint (issue 9 §3): a real gateway under Daphne fronting the demo
MCP backend (Streamable HTTP), an OpenAPI backend on the recording REST service and the host's own
tool_search, fuzzed with a fixed seed in tools mode (realistic and aggressive arguments) and
protocol mode (realistic and aggressive messages).

The fuzzer talks to the gateway through a recording proxy; `tests/fuzz/judge.py` fails the run on
any crash, 5xx, JSON-RPC -32603, leaked traceback or exception text, or a gateway that died or
logged a traceback. Reports land in var/fuzz-results/ (docs/conformance.md, "Fuzzing")."""

from __future__ import annotations

import json
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
from tests.fuzz.judge import exchange_problems, log_problems, read_exchanges, read_summary, report_problems
from tests.gateway.helpers import message_of, modern
from tests.processes import ROOT, free_port, gateway_argv, gateway_env, log_path, running, stop

pytestmark = pytest.mark.slow

RESULTS = ROOT / "var" / "fuzz-results"
SEED = "20260728"
# Bounds: each call and message waits at most REQUEST_TIMEOUT; a whole fuzzer run at most
# RUN_TIMEOUT (the three together take about 50 s here). A backend answers within
# BACKEND_TIMEOUT or the gateway answers for it, so a request still unanswered when the fuzzer gives
# up is a hang of the gateway's.
BACKEND_TIMEOUT = 3.0
REQUEST_TIMEOUT = "10"
RUN_TIMEOUT = 150.0
COMMON = ("--protocol", "streamablehttp", "--seed", SEED, "--timeout", REQUEST_TIMEOUT, "--no-corpus",
          "--max-concurrency", "2", "--output-types", "fuzzing_results", "error_report", "--log-level", "WARNING")


@dataclass(frozen=True)
class FuzzRun:
    label: str
    mode: str
    options: tuple[str, ...]


RUNS = (
    # Every tool: arguments built from its schema, then hostile ones (wrong types, oversized and
    # attack strings). The safety filter would defuse the hostile ones; the fixture tools have no
    # file, process or network side effects, so it is off.
    FuzzRun("tools", "tools", ("--mode", "tools", "--phase", "both", "--runs", "3", "--no-safety", "--fail-if-no-tools")),
    # Every MCP message type, well formed (after the fuzzer's spec checks) and then malformed.
    FuzzRun("protocol-realistic", "protocol", ("--mode", "protocol", "--protocol-phase", "realistic",
                                                "--runs-per-type", "3")),
    FuzzRun("protocol-aggressive", "protocol", ("--mode", "protocol", "--protocol-phase", "aggressive",
                                                 "--runs-per-type", "3", "--no-spec-guard")),
)


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


def fuzz(target: Target, run: FuzzRun, sandbox: Path) -> Path:
    """One bounded mcp-fuzzer run; its reports go to var/fuzz-results/<label>/, its files (the auth
    config with the key, its filesystem sandbox) to `sandbox`."""
    output = RESULTS / run.label
    auth = sandbox / "auth.json"
    auth.write_text(json.dumps({"providers": {"gateway": {"type": "api_key", "api_key": target.key}},
                                "default_provider": "gateway"}))
    argv = [sys.executable, "-m", "mcp_fuzzer", *COMMON, "--endpoint", target.url, "--auth-config", str(auth),
            "--output-dir", str(output), "--fs-root", str(sandbox / run.label), *run.options]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, timeout=RUN_TIMEOUT, check=False)
    (output / "stdout.txt").write_bytes(done.stdout)
    (output / "stderr.txt").write_bytes(done.stderr)
    assert done.returncode == 0, (
        f"mcp-fuzzer {run.label} exited {done.returncode}:\n{done.stderr.decode(errors='replace')[-3000:]}")
    return output


def test_fuzzing_the_mcp_endpoint_finds_nothing(target: Target, tmp_path: Path) -> None:
    problems: list[str] = []
    for run in RUNS:
        output = fuzz(target, run, tmp_path)
        problems += report_problems(output, mode=run.mode, label=run.label, validated=target.validated)
        summary = read_summary(output, mode=run.mode)
        if run.mode == "tools":  # the fuzzer reached the gateway's own tool, an MCP one and an OpenAPI one
            fuzzed = set(summary["tools"]["by_name"])
            missing = {"tool_search", "demo-echo", "svc-getPet"} - fuzzed
            assert not missing, f"the fuzzer did not reach {missing}; it fuzzed {sorted(fuzzed)}"
        else:
            assert summary["protocols"]["total_runs"] > 0, f"{run.label}: no protocol message was fuzzed"
    stop(target.proxy)  # it records an exchange once it is over: all are written when it has stopped
    problems += exchange_problems(read_exchanges(target.exchanges))
    if target.gateway.poll() is not None:
        problems.append(f"the gateway exited with code {target.gateway.returncode} during the fuzzing")
    problems += log_problems(target.gateway_log.read_text(encoding="utf-8", errors="replace"))
    assert not problems, f"{len(problems)} fuzzing finding(s) (reports in {RESULTS}):\n" + "\n".join(problems)
