"""`tools/list` of a virtual host with 10 backends × 100 tools, cold and cached, against the list
of one of those backends alone, in one run (docs/virtual-hosts.md, "Lists").

    .venv/bin/python -m bench.vhost_list [--calls N] [--output FILE]

Paths, all stateless (2026-07-28) `tools/list` requests, alternated in rounds:
- direct: one backend (100 tools), no gateway;
- 1 backend: a virtual host mounting that backend alone (the gateway passes the list through);
- 10 backends, cached: the merged list of 1,000 tools, one page, as every call after the first sees it;
- 10 backends, cold: the same, on a gateway whose list cache lifetime is 0, so every call fans out
  to the 10 backends and merges their lists again.
The backends are `bench/many_tools_server.py` (official SDK, uvicorn), one process each."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import platform
import sys

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gatewaysite.settings.dev")
django.setup()

from apps.configuration.services import config_apply  # noqa: E402
from bench.proxy_latency import Caller, Result, bench_main, calibrate, measure, percentile  # noqa: E402
from tests.processes import backend_argv, free_port, gateway_argv, running  # noqa: E402

KEY = "bench-vhost-key-0123456789abcdef"
BACKENDS = 10
TOOLS = 100


def apply_config(urls: list[str]) -> None:
    backends = "\n".join(
        f'  - {{tenant: bench-vh, name: b{n}, kind: mcp, transport: streamable-http, urls: ["{url}"]}}'
        for n, url in enumerate(urls)
    )
    mounts = ", ".join(f"b{n}: b{n}" for n in range(len(urls)))
    config_apply(document=f"""
tenants:
  - slug: bench-vh
    name: Virtual host benchmark
    keys:
      - name: bench
        secret: "{KEY}"
backends:
{backends}
virtual_hosts:
  - {{tenant: bench-vh, slug: one, backends: {{b0: b0}}}}
  - {{tenant: bench-vh, slug: ten, backends: {{{mounts}}}}}
""", prune=False)


def result_of(label: str, latencies: list[float], busy: float, cpu: float | None) -> Result:
    result = Result(label, label, 1, len(latencies), percentile(latencies, 50), percentile(latencies, 99),
                    len(latencies) / busy, cpu)
    print(f"{label:32} p50={result.p50_ms:7.2f} ms  p99={result.p99_ms:7.2f} ms  {result.per_second:7.0f}/s"
          + (f"  gateway CPU {cpu:.2f} ms/call" if cpu is not None else ""), flush=True)
    return result


def run(calls: int) -> str:
    ports = [free_port() for _ in range(BACKENDS)]
    urls = [f"http://127.0.0.1:{port}/mcp" for port in ports]
    apply_config(urls)
    cached_port, cold_port = free_port(), free_port()
    env = {"GATEWAY_INSTANCE_ID": "bench", "GATEWAY_LOG_LEVEL": "WARNING", "GATEWAY_DEBUG": "0"}
    calibration_before = calibrate()
    with contextlib.ExitStack() as stack:
        for n, port in enumerate(ports):
            stack.enter_context(running([*backend_argv("bench.many_tools_server", port), "--tools", str(TOOLS)], port,
                                        log_name=f"bench-vh-b{n}"))
        cached = stack.enter_context(running([*gateway_argv(cached_port), "-v", "0"], cached_port, env=env,
                                             log_name="bench-vh-cached"))
        cold = stack.enter_context(running([*gateway_argv(cold_port), "-v", "0"], cold_port,
                                           env={**env, "GATEWAY_LIST_CACHE_SECONDS": "0"}, log_name="bench-vh-cold"))

        def caller(url: str, auth: bool) -> Caller:
            return Caller(url, "modern", "tools/list", {}, auth, key=KEY)

        rounds = max(calls // 20, 1)
        warm = asyncio.run(measure({
            "direct": caller(urls[0], False),
            "1 backend": caller(f"http://127.0.0.1:{cached_port}/mcp/bench-vh/one", True),
            "10 backends, cached": caller(f"http://127.0.0.1:{cached_port}/mcp/bench-vh/ten", True),
        }, 1, calls, cached.pid, rounds))
        cold_calls = max(calls // 5, 50)
        fanned = asyncio.run(measure({
            "direct (cold run)": caller(urls[0], False),
            "10 backends, cold": caller(f"http://127.0.0.1:{cold_port}/mcp/bench-vh/ten", True),
        }, 1, cold_calls, cold.pid, max(cold_calls // 10, 1)))
    results = [result_of(path, latencies, busy, None if path.startswith("direct") else cpu)
               for measured in (warm, fanned) for path, (latencies, busy, cpu) in measured.items()]
    return markdown(results, calls, calibration_before, calibrate())


def markdown(results: list[Result], calls: int, before: float, after: float) -> str:
    by_path = {result.path: result for result in results}
    single = by_path["1 backend"]
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"### Multi-backend `tools/list` — {now}",
        "",
        f"Command: `python -m bench.vhost_list --calls {calls}`. Machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, Linux {platform.release()}. {BACKENDS} backends × {TOOLS} tools "
        f"(`bench/many_tools_server.py`), stateless `tools/list`, C=1, one page of {BACKENDS * TOOLS} tools. "
        f"Machine speed: a fixed 5M-iteration Python loop took {before:.3f} s before and {after:.3f} s after.",
        "",
        "| path | tools | p50 | p99 | /s | gateway CPU/call | p50 vs 1-backend list |",
        "|---|---|---|---|---|---|---|",
    ]
    for result in results:
        tools = TOOLS if result.path.startswith(("direct", "1 backend")) else BACKENDS * TOOLS
        cpu = f"{result.gateway_cpu_ms:.2f} ms" if result.gateway_cpu_ms is not None else "—"
        delta = "" if result.path.startswith("direct") else f"{result.p50_ms - single.p50_ms:+.2f} ms"
        lines.append(f"| {result.path} | {tools} | {result.p50_ms:.2f} ms | {result.p99_ms:.2f} ms | "
                     f"{result.per_second:.0f} | {cpu} | {delta} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    bench_main(__doc__ or "", run)


if __name__ == "__main__":
    sys.exit(main())
