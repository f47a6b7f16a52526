"""Proxy overhead benchmark: the same MCP calls sent straight to a backend and through the gateway,
in one run, so the ratio holds on a noisy machine.

    make bench            (or: .venv/bin/python -m bench.proxy_latency [--calls N] [--output FILE])

Measures `tools/call` latency (p50, p99) and throughput at concurrency 1 and 16 in both protocol
eras (stateless 2026-07-28, and a legacy 2025-11-25 session), the gateway's CPU time per call, and
`tools/list` of a backend with 1,000 tools. The load generator is a keep-alive HTTP/1.1 client in
this process; the gateway runs under Daphne exactly as `make run` serves it."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gatewaysite.settings.dev")
django.setup()

from apps.configuration.services import config_apply  # noqa: E402
from apps.gateway.adapters.http_pool import HttpPool, Target  # noqa: E402
from bench.stats import percentile  # noqa: E402
from tests.processes import backend_argv, free_port, gateway_argv, running  # noqa: E402

KEY = "bench-key-0123456789abcdef"
ACCEPT = ("accept", "application/json, text/event-stream")
JSON = ("content-type", "application/json")
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


@dataclass(frozen=True)
class Result:
    name: str
    path: str
    concurrency: int
    calls: int
    p50_ms: float
    p99_ms: float
    per_second: float
    gateway_cpu_ms: float | None


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Caller:
    """Sends one kind of MCP request over keep-alive connections."""

    def __init__(
        self, url: str, era: str, method: str, params: dict[str, object], auth: bool, key: str = KEY
    ) -> None:
        self.target = Target.from_url(url)
        self.pool = HttpPool(self.target, max_idle=64, allow_private=True)
        self.era = era
        self.method = method
        self.params = params
        self.auth = [("authorization", f"Bearer {key}")] if auth else []
        self.session: list[tuple[str, str]] = []

    async def open(self) -> None:
        if self.era != "legacy":
            return
        body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}
        response = await self.pool.request("POST", self.target.path, [JSON, ACCEPT, *self.auth], json.dumps(body).encode(), timeout=30)
        await response.read()
        self.session = [("mcp-session-id", response.headers["mcp-session-id"]), ("mcp-protocol-version", "2025-11-25")]
        ack = await self.pool.request("POST", self.target.path, [JSON, ACCEPT, *self.auth, *self.session],
                                      b'{"jsonrpc":"2.0","method":"notifications/initialized"}', timeout=30)
        await ack.read()

    async def call(self, request_id: int) -> None:
        params = dict(self.params)
        headers = [JSON, ACCEPT, *self.auth, *self.session]
        if self.era == "modern":
            params["_meta"] = META
            headers += [("mcp-protocol-version", "2026-07-28"), ("mcp-method", self.method)]
            if "name" in params:
                headers.append(("mcp-name", str(params["name"])))
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": self.method, "params": params}).encode()
        response = await self.pool.request("POST", self.target.path, headers, body, timeout=60)
        data = await response.read()
        if response.status != 200 or b'"error"' in data[:200]:
            raise RuntimeError(f"{self.method} failed: HTTP {response.status} {data[:300]!r}")


async def measure(callers: dict[str, Caller], concurrency: int, calls: int, cpu_pid: int,
                  rounds: int, *, rotate: bool = False) -> dict[str, tuple[list[float], float, float]]:
    """Alternate between the paths in `rounds` rounds, so drift on a noisy machine hits both alike
    (with `rotate`, each round starts with the next path, so no path always follows the same one).
    Returns per path: latencies (ms), busy seconds, and the gateway's CPU ms per call."""
    for caller in callers.values():
        await caller.open()
        for i in range(50):  # warm-up: connections, probes, snapshots
            await caller.call(i)
    measured = {path: ([], 0.0, 0.0) for path in callers}
    per_round = max(calls // rounds, 1)
    order = list(callers.items())
    for number in range(rounds):
        shift = number % len(order) if rotate else 0
        for path, caller in order[shift:] + order[:shift]:
            latencies, elapsed, cpu = measured[path]
            counter = iter(range(per_round))

            async def worker(caller: Caller = caller, latencies: list[float] = latencies, counter=counter) -> None:  # type: ignore[no-untyped-def]
                for request_id in counter:
                    started = time.perf_counter()
                    await caller.call(request_id)
                    latencies.append((time.perf_counter() - started) * 1000)

            cpu_before = cpu_seconds(cpu_pid)
            started = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            measured[path] = (latencies, elapsed + time.perf_counter() - started,
                              cpu + (cpu_seconds(cpu_pid) - cpu_before))
    for caller in callers.values():
        caller.pool.close()
    return {path: (lat, busy, cpu * 1000 / len(lat)) for path, (lat, busy, cpu) in measured.items()}


def summarise(label: str, concurrency: int, measured: dict[str, tuple[list[float], float, float]]) -> list[Result]:
    """One Result per path of a `measure` run, each printed as it is made."""
    results = []
    for path, (latencies, busy, cpu) in measured.items():
        result = Result(label, path, concurrency, len(latencies), percentile(latencies, 50), percentile(latencies, 99),
                        len(latencies) / busy, cpu if path == "gateway" else None)
        results.append(result)
        print(f"{label:48} {path:8} C={concurrency:<3} p50={result.p50_ms:7.2f} ms  p99={result.p99_ms:7.2f} ms  "
              f"{result.per_second:8.0f}/s" + (f"  gateway CPU {cpu:.2f} ms/call" if path == "gateway" else ""),
              flush=True)
    return results


def apply_config(demo_url: str, many_url: str) -> None:
    config_apply(document=f"""
tenants:
  - slug: bench
    name: Benchmark
    keys:
      - name: bench
        secret: "{KEY}"
backends:
  - {{tenant: bench, name: demo, kind: mcp, transport: streamable-http, urls: ["{demo_url}"]}}
  - {{tenant: bench, name: many, kind: mcp, transport: streamable-http, urls: ["{many_url}"]}}
virtual_hosts:
  - {{tenant: bench, slug: demo, backends: {{demo: demo}}}}
  - {{tenant: bench, slug: many, backends: {{many: many}}}}
""", prune=False)


def calibrate() -> float:
    """CPU seconds of a fixed pure-Python loop: how fast this machine is right now."""
    started = time.process_time()
    total = 0
    for i in range(5_000_000):
        total += i
    return time.process_time() - started


async def floor_cpu(port: int, pid: int, calls: int) -> float:
    caller = Caller(f"http://127.0.0.1:{port}/", "modern", "tools/call", {"name": "add"}, auth=False)
    for i in range(100):
        await caller.call(i)
    before = cpu_seconds(pid)
    for i in range(calls):
        await caller.call(i)
    caller.pool.close()
    return (cpu_seconds(pid) - before) * 1000 / calls


def run(calls: int) -> tuple[list[Result], dict[str, float]]:
    demo_port, many_port, gateway_port = free_port(), free_port(), free_port()
    demo_url = f"http://127.0.0.1:{demo_port}/mcp"
    many_url = f"http://127.0.0.1:{many_port}/mcp"
    apply_config(demo_url, many_url)
    env = {"GATEWAY_INSTANCE_ID": "bench", "GATEWAY_LOG_LEVEL": "WARNING", "GATEWAY_DEBUG": "0"}
    results: list[Result] = []
    machine = {"calibration_before_s": calibrate()}
    floor_port = free_port()
    with running([sys.executable, "-m", "daphne", "-v", "0", "-b", "127.0.0.1", "-p", str(floor_port),
                  "bench.floor_app:application"], floor_port, log_name="bench-floor") as floor:
        machine["daphne_floor_cpu_ms"] = asyncio.run(floor_cpu(floor_port, floor.pid, calls))
    with running(backend_argv("scripts.demo_server", demo_port), demo_port, log_name="bench-demo"), \
         running([*backend_argv("bench.many_tools_server", many_port)], many_port, log_name="bench-many"), \
         running([*gateway_argv(gateway_port), "-v", "0"], gateway_port, env=env, log_name="bench-gateway") as gateway:
        via = f"http://127.0.0.1:{gateway_port}/mcp/bench"
        plans = [
            ("tools/call add", "modern", "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}, demo_url, f"{via}/demo", 1, calls),
            ("tools/call add", "modern", "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}, demo_url, f"{via}/demo", 16, calls * 2),
            ("tools/call add", "legacy", "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}, demo_url, f"{via}/demo", 1, calls),
            ("tools/call add", "legacy", "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}, demo_url, f"{via}/demo", 16, calls * 2),
            ("tools/list (1,000 tools)", "modern", "tools/list", {}, many_url, f"{via}/many", 1, max(calls // 10, 50)),
        ]
        for name, era, method, params, direct_url, gateway_url, concurrency, count in plans:
            callers = {"direct": Caller(direct_url, era, method, params, False),
                       "gateway": Caller(gateway_url, era, method, params, True)}
            # Many short rounds at C=1 so both paths see the same machine; fewer, longer ones at C=16.
            rounds = max(count // 20, 1) if concurrency == 1 else 5
            measured = asyncio.run(measure(callers, concurrency, count, gateway.pid, rounds))
            label = f"{name} [{'2026-07-28' if era == 'modern' else '2025-11-25 session'}]"
            results.extend(summarise(label, concurrency, measured))
    machine["calibration_after_s"] = calibrate()
    return results, machine


def markdown(results: list[Result], machine: dict[str, float], calls: int) -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"### Proxy overhead — {now}",
        "",
        f"Command: `make bench` (`python -m bench.proxy_latency --calls {calls}`). Machine: {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, Linux {platform.release()}. Backend: the demo "
        "MCP server (official SDK, uvicorn). Load generator: keep-alive HTTP/1.1 in one process on the same machine.",
        f"Machine speed: a fixed 5M-iteration Python loop took {machine['calibration_before_s']:.3f} s before and "
        f"{machine['calibration_after_s']:.3f} s after the run. Daphne alone (a trivial ASGI app, `bench/floor_app.py`) "
        f"cost {machine['daphne_floor_cpu_ms']:.2f} ms of CPU per request in this run.",
        "",
        *table(results),
    ]
    return "\n".join(lines) + "\n"


def table(results: list[Result]) -> list[str]:
    """Direct and gateway results, paired in the order measured, as markdown table lines."""
    lines = [
        "| call | C | direct p50 | gateway p50 | added p50 | direct p99 | gateway p99 | direct /s | gateway /s | gateway CPU/call |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for direct, via in zip(results[::2], results[1::2], strict=True):
        lines.append(
            f"| {direct.name} | {direct.concurrency} | {direct.p50_ms:.2f} ms | {via.p50_ms:.2f} ms | "
            f"**{via.p50_ms - direct.p50_ms:+.2f} ms** ({via.p50_ms / direct.p50_ms:.2f}×) | {direct.p99_ms:.2f} ms | "
            f"{via.p99_ms:.2f} ms | {direct.per_second:.0f} | {via.per_second:.0f} | {via.gateway_cpu_ms:.2f} ms |"
        )
    return lines


def bench_main(
    description: str, run: Callable[..., str], *, calls: int = 2000, options: dict[str, dict[str, Any]] | None = None
) -> None:
    """The command line of a benchmark: `--calls N`, and `--output FILE` to append the markdown `run`
    returns; `options` adds more (`{"--base": {"required": True}}`), passed to `run` by name."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=calls)
    parser.add_argument("--output", type=Path, help="append the markdown table to this file")
    for flag, settings in (options or {}).items():
        parser.add_argument(flag, **settings)
    args = parser.parse_args()
    extra = {flag.lstrip("-").replace("-", "_"): getattr(args, flag.lstrip("-").replace("-", "_")) for flag in options or {}}
    report = run(args.calls, **extra)
    print()
    print(report)
    if args.output:
        with args.output.open("a", encoding="utf-8") as out:
            out.write("\n" + report)


def main() -> None:
    bench_main(__doc__ or "", lambda calls: markdown(*run(calls), calls))


if __name__ == "__main__":
    main()
