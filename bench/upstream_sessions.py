"""Long-lived upstream sessions against connect-initialize-call-teardown (docs/sessions.md), in one run
against the same backend, so the ratio holds on a noisy machine.

    .venv/bin/python -m bench.upstream_sessions [--calls N] [--output BENCHMARKS.md]

Every path sends `tools/call add` to the demo MCP server (official SDK under uvicorn) with the
gateway's own HTTP/1.1 client (`HttpPool`), so only the connection and session pattern differs:

- `session`: what the gateway does upstream — one pooled keep-alive connection and one backend
  session (initialize + notifications/initialized once), then every call in that session;
- `new-tcp`: the same long-lived session, but a new TCP connection for every call (separates the
  cost of connecting from the cost of the MCP handshake);
- `naive`: per call, a new TCP connection, initialize, notifications/initialized, the call, DELETE of
  the session, close;
- `gateway`: end to end through the gateway under Daphne, a 2025-11-25 session client (the gateway
  keeps one backend session per downstream session).

The paths alternate in short rounds (`measure` of bench.proxy_latency). Client CPU per call is this
process's CPU time while a call of that path is in flight; backend CPU per call is read from /proc."""

from __future__ import annotations

import asyncio
import copy
import datetime
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gatewaysite.settings.dev")
django.setup()

from apps.configuration.services import config_apply  # noqa: E402
from apps.gateway.adapters.http_pool import HttpPool  # noqa: E402
from bench.proxy_latency import KEY, Caller, bench_main, calibrate, cpu_seconds, measure, percentile  # noqa: E402
from tests.processes import backend_argv, free_port, gateway_argv, running  # noqa: E402

#: `measure` warms every path up with this many sequential calls before the measured rounds.
WARMUP = 50
ADD = {"name": "add", "arguments": {"a": 1, "b": 2}}
LABELS = {
    "session": "(a) long-lived connection + session",
    "new-tcp": "(a′) long-lived session, new TCP per call",
    "naive": "(b) connect-initialize-call-DELETE-close",
    "gateway": "(c) through the gateway (session client)",
}


class Metered(Caller):
    """A Caller that counts its client CPU: this process's CPU time while one of its calls is in
    flight, from the first call after `measure`'s warm-up."""

    def __init__(self, url: str, *, auth: bool = False) -> None:
        super().__init__(url, "legacy", "tools/call", ADD, auth)
        self.cpu_s = 0.0
        self.counted = 0
        self._in_flight = 0
        self._busy_since = 0.0
        self._started = 0

    async def call(self, request_id: int) -> None:
        self._started += 1
        counting = self._started > WARMUP
        if counting:
            if self._in_flight == 0:
                self._busy_since = time.process_time()
            self._in_flight += 1
        try:
            await self.once(request_id)
        finally:
            if counting:
                self.counted += 1
                self._in_flight -= 1
                if self._in_flight == 0:
                    self.cpu_s += time.process_time() - self._busy_since

    async def once(self, request_id: int) -> None:
        await Caller.call(self, request_id)

    @property
    def cpu_ms_per_call(self) -> float:
        return self.cpu_s * 1000 / max(self.counted, 1)


class NewConnection(Metered):
    """The session is opened once; every call goes over a new TCP connection, closed after it."""

    async def once(self, request_id: int) -> None:
        one = copy.copy(self)  # shares the session headers, not the pool: safe at any concurrency
        one.pool = HttpPool(self.target, max_idle=1, allow_private=True)
        try:
            await Caller.call(one, request_id)
        finally:
            one.pool.close()


class Naive(Metered):
    """Nothing is kept between calls: connect, handshake, call, DELETE the session, close."""

    async def open(self) -> None:
        pass

    async def once(self, request_id: int) -> None:
        one = copy.copy(self)
        one.pool = HttpPool(self.target, max_idle=1, allow_private=True)  # the four requests share one connection
        try:
            await Caller.open(one)
            await Caller.call(one, request_id)
            response = await one.pool.request("DELETE", self.target.path, [*one.auth, *one.session], timeout=30)
            await response.read()
            if response.status != 200:
                raise RuntimeError(f"DELETE of the session failed: HTTP {response.status}")
        finally:
            one.pool.close()


@dataclass(frozen=True)
class Row:
    path: str
    concurrency: int
    calls: int
    p50_ms: float
    p99_ms: float
    per_second: float
    client_cpu_ms: float
    backend_cpu_ms: float


def apply_config(demo_url: str) -> None:
    config_apply(document=f"""
tenants:
  - slug: bench
    name: Benchmark
    keys:
      - name: bench
        secret: "{KEY}"
backends:
  - {{tenant: bench, name: demo, kind: mcp, transport: streamable-http, urls: ["{demo_url}"]}}
virtual_hosts:
  - {{tenant: bench, slug: demo, backends: {{demo: demo}}}}
""", prune=False)


def run(calls: int) -> tuple[list[Row], dict[str, float]]:
    demo_port, gateway_port = free_port(), free_port()
    demo_url = f"http://127.0.0.1:{demo_port}/mcp"
    apply_config(demo_url)
    env = {"GATEWAY_INSTANCE_ID": "bench", "GATEWAY_LOG_LEVEL": "WARNING", "GATEWAY_DEBUG": "0"}
    machine = {"calibration_before_s": calibrate()}
    rows: list[Row] = []
    with running(backend_argv("scripts.demo_server", demo_port), demo_port, log_name="bench-demo") as backend, \
         running([*gateway_argv(gateway_port), "-v", "0"], gateway_port, env=env, log_name="bench-gateway") as gateway:
        for concurrency, count in ((1, calls), (16, calls)):
            callers: dict[str, Metered] = {
                "session": Metered(demo_url),
                "new-tcp": NewConnection(demo_url),
                "naive": Naive(demo_url),
                "gateway": Metered(f"http://127.0.0.1:{gateway_port}/mcp/bench/demo", auth=True),
            }
            rounds = max(count // 20, 1) if concurrency == 1 else 10
            gateway_before = cpu_seconds(gateway.pid)
            plain: dict[str, Caller] = dict(callers)
            measured = asyncio.run(measure(plain, concurrency, count, backend.pid, rounds))
            gateway_calls = len(measured["gateway"][0]) + WARMUP
            machine[f"gateway_cpu_ms_c{concurrency}"] = (cpu_seconds(gateway.pid) - gateway_before) * 1000 / gateway_calls
            for path, (latencies, busy, backend_cpu) in measured.items():
                row = Row(path, concurrency, len(latencies), percentile(latencies, 50), percentile(latencies, 99),
                          len(latencies) / busy, callers[path].cpu_ms_per_call, backend_cpu)
                rows.append(row)
                print(f"{LABELS[path]:44} C={concurrency:<3} p50={row.p50_ms:7.2f} ms  p99={row.p99_ms:7.2f} ms  "
                      f"{row.per_second:6.0f}/s  client CPU {row.client_cpu_ms:.2f} ms  "
                      f"backend CPU {row.backend_cpu_ms:.2f} ms", flush=True)
    machine["calibration_after_s"] = calibrate()
    return rows, machine


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def lower(better: float, worse: float) -> str:
    change = 1 - better / worse
    return f"{change:.0%} lower" if change >= 0 else f"{-change:.0%} higher"


def reduction(rows: list[Row], concurrency: int, better: str, worse: str) -> str:
    by_path = {row.path: row for row in rows if row.concurrency == concurrency}
    a, b = by_path[better], by_path[worse]
    return (f"C={concurrency}, {LABELS[better].split()[0]} vs {LABELS[worse].split()[0]}: "
            f"p50 **{lower(a.p50_ms, b.p50_ms)}** ({a.p50_ms:.2f} vs {b.p50_ms:.2f} ms), "
            f"p99 **{lower(a.p99_ms, b.p99_ms)}** ({a.p99_ms:.2f} vs {b.p99_ms:.2f} ms), "
            f"client CPU {lower(a.client_cpu_ms, b.client_cpu_ms)}, backend CPU {lower(a.backend_cpu_ms, b.backend_cpu_ms)}.")


def markdown(rows: list[Row], machine: dict[str, float], calls: int) -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"## Upstream: long-lived sessions vs connect-initialize-call-teardown — {now}",
        "",
        f"Command: `.venv/bin/python -m bench.upstream_sessions --calls {calls}` (`bench/upstream_sessions.py`). "
        f"Machine: {platform.machine()}, nproc {os.cpu_count()}, {cpu_model()}, Python {platform.python_version()}, "
        f"Linux {platform.release()}. Backend: the demo MCP server (official SDK, uvicorn), one process for all paths. "
        "Client: the gateway's `HttpPool` in this process for every path, so only the pattern differs; paths "
        "alternate in rounds of 20 calls (C=1) or 10 rounds (C=16). Latency is per `tools/call`, including for "
        "(b) its connect, `initialize`, `notifications/initialized` and `DELETE`. Backend CPU is the demo server's "
        "(from /proc) per call; for (c) it includes the gateway's health checks, if any ran.",
        f"Machine speed: a fixed 5M-iteration Python loop took {machine['calibration_before_s']:.3f} s before and "
        f"{machine['calibration_after_s']:.3f} s after the run. Gateway CPU per (c) call (the "
        f"gateway's CPU over the whole C=1 or C=16 run, warm-up included, over its calls; it idles between its "
        f"rounds): {machine['gateway_cpu_ms_c1']:.2f} ms at C=1, {machine['gateway_cpu_ms_c16']:.2f} ms at C=16.",
        "",
        "| path | C | calls | p50 | p99 | calls/s | client CPU/call | backend CPU/call |",
        "|---|---|---|---|---|---|---|---|",
        *(f"| {LABELS[r.path]} | {r.concurrency} | {r.calls} | {r.p50_ms:.2f} ms | {r.p99_ms:.2f} ms | "
          f"{r.per_second:.0f} | {r.client_cpu_ms:.2f} ms | {r.backend_cpu_ms:.2f} ms |" for r in rows),
        "",
        "Relative reduction (1 − a/b, as the reference paper reports its 52–57 %):",
        "",
        *(f"- {reduction(rows, c, better, 'naive')}" for c in (1, 16) for better in ("session", "gateway")),
        *(f"- {reduction(rows, c, 'session', 'new-tcp')}" for c in (1, 16)),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    bench_main(__doc__ or "", lambda calls: markdown(*run(calls), calls))


if __name__ == "__main__":
    main()
