"""OpenAPI tool call overhead: the same REST request sent straight to the service and made by the
gateway from a `tools/call`, in one run, so the ratio holds on a noisy machine.

    .venv/bin/python -m bench.openapi_call [--calls N] [--output FILE]

The service is `tests/backends/recording_service.py` (uvicorn). The direct path is what an agent with
its own HTTP client would send: `GET /pets/<id>?tags=a&tags=b` with an API key header. Through the
gateway the agent sends a stateless (2026-07-28) `tools/call getPet`; the gateway validates the
arguments, builds the same request (credential from the backend's encrypted secret), sends it on a
pooled connection and shapes the JSON answer into a tool result."""

from __future__ import annotations

import asyncio
import datetime
import os
import platform
import tempfile
from pathlib import Path

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gatewaysite.settings.dev")
django.setup()

from apps.catalog.specs import spec_version_compile  # noqa: E402
from apps.configuration.services import config_apply  # noqa: E402
from apps.gateway.adapters.http_pool import HttpPool, Target  # noqa: E402
from bench.proxy_latency import Caller, Result, bench_main, calibrate, measure, summarise, table  # noqa: E402
from tests.backends.specs import as_json, service_spec  # noqa: E402
from tests.processes import backend_argv, free_port, gateway_argv, running  # noqa: E402

KEY = "bench-rest-key-0123456789abcdef"
ARGUMENTS = {"petId": "pet-42", "tags": ["a", "b"], "X-Request-Tag": "bench"}


class DirectRest:
    """The request the tool call becomes, sent by a keep-alive client of our own."""

    def __init__(self, url: str) -> None:
        self.target = Target.from_url(url)
        self.pool = HttpPool(self.target, max_idle=64, allow_private=True)

    async def open(self) -> None:
        return None

    async def call(self, request_id: int) -> None:
        headers = [("X-Request-Tag", "bench"), ("X-API-Key", "service-key"), ("accept", "application/json")]
        response = await self.pool.request("GET", "/pets/pet-42?tags=a&tags=b", headers, timeout=30)
        data = await response.read()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status} {data[:200]!r}")


def configure(service_url: str, folder: Path) -> None:
    (folder / "service.json").write_bytes(as_json(service_spec(title="bench")))
    document = f"""
tenants:
  - slug: bench-rest
    name: Benchmark REST
    keys:
      - name: bench
        secret: "{KEY}"
backends:
  - tenant: bench-rest
    name: svc
    kind: openapi
    spec: service.json
    base_url: "{service_url}"
    credential: {{secret: service-key}}
virtual_hosts:
  - {{tenant: bench-rest, slug: rest, backends: {{svc: svc}}}}
"""
    report = config_apply(document=document, prune=False, base_dir=folder)
    for version_id in report.spec_versions:  # no Celery worker here: compile in this process
        spec_version_compile(spec_version_id=version_id)


def run(calls: int) -> tuple[list[Result], tuple[float, float]]:
    service_port, gateway_port = free_port(), free_port()
    service_url = f"http://127.0.0.1:{service_port}"
    with tempfile.TemporaryDirectory() as folder:
        configure(service_url, Path(folder))
    env = {"GATEWAY_INSTANCE_ID": "bench", "GATEWAY_LOG_LEVEL": "WARNING", "GATEWAY_DEBUG": "0"}
    results: list[Result] = []
    before = calibrate()
    with running(backend_argv("tests.backends.recording_service", service_port), service_port, log_name="bench-rest"), \
         running([*gateway_argv(gateway_port), "-v", "0"], gateway_port, env=env, log_name="bench-gateway") as gateway:
        for concurrency, count in ((1, calls), (16, calls * 2)):
            callers = {
                "direct": DirectRest(f"{service_url}/"),
                "gateway": Caller(f"http://127.0.0.1:{gateway_port}/mcp/bench-rest/rest", "modern", "tools/call",
                                  {"name": "getPet", "arguments": ARGUMENTS}, True, key=KEY),
            }
            rounds = max(count // 20, 1) if concurrency == 1 else 5
            measured = asyncio.run(measure(callers, concurrency, count, gateway.pid, rounds))  # type: ignore[arg-type]
            results.extend(summarise("tools/call getPet [2026-07-28]", concurrency, measured))
    return results, (before, calibrate())


def markdown(results: list[Result], speed: tuple[float, float], calls: int) -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"### OpenAPI tool call overhead — {now}",
        "",
        f"Command: `python -m bench.openapi_call --calls {calls}`. Machine: {platform.machine()}, {os.cpu_count()} "
        f"cores, Python {platform.python_version()}. Direct: `GET /pets/<id>?tags=a&tags=b` on a keep-alive "
        "connection; gateway: stateless `tools/call getPet` (argument validation, request building, credential, "
        f"result shaping). Machine speed (5M-iteration loop): {speed[0]:.3f} s before, {speed[1]:.3f} s after.",
        "",
        *table(results),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    bench_main(__doc__ or "", lambda calls: markdown(*run(calls), calls))
