"""What tracing costs a proxied call: the same `tools/call` sent straight to the demo backend and
through the gateway, with tracing off, on with every trace sampled, and on at a 1 % ratio.

    .venv/bin/python -m bench.tracing_cost [--calls N] [--output FILE]

With tracing on, the gateway exports its spans by OTLP/HTTP to a sink in this process that reads
and counts them (a collector's work is not the gateway's cost). Each configuration is a fresh
gateway under Daphne; within one, direct and gateway rounds alternate (bench/proxy_latency.py)."""

from __future__ import annotations

import asyncio
import datetime
import os
import platform
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from bench.proxy_latency import Caller, Result, apply_config, bench_main, measure, summarise
from tests.processes import backend_argv, free_port, gateway_argv, running

MODES = {
    "off": {"GATEWAY_TRACING": "0"},
    "on, every trace": {"GATEWAY_TRACING": "1", "OTEL_TRACES_SAMPLER": "parentbased_always_on"},
    "on, 1 % of traces": {"GATEWAY_TRACING": "1", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
                          "OTEL_TRACES_SAMPLER_ARG": "0.01"},
}


class _Sink(BaseHTTPRequestHandler):
    received = 0

    def do_POST(self) -> None:  # noqa: N802 - the http.server name
        length = int(self.headers.get("content-length", "0"))
        _Sink.received += len(self.rfile.read(length))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def otlp_sink() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def run(calls: int) -> str:
    demo_port, many_port = free_port(), free_port()
    demo_url = f"http://127.0.0.1:{demo_port}/mcp"
    apply_config(demo_url, f"http://127.0.0.1:{many_port}/mcp")
    params = {"name": "add", "arguments": {"a": 1, "b": 2}}
    rows: list[tuple[str, Result, Result]] = []
    with running(backend_argv("scripts.demo_server", demo_port), demo_port, log_name="bench-demo"), otlp_sink() as sink:
        for mode, env in MODES.items():
            port = free_port()
            env = {"GATEWAY_INSTANCE_ID": "bench", "GATEWAY_LOG_LEVEL": "WARNING", "GATEWAY_DEBUG": "0",
                   "OTEL_EXPORTER_OTLP_ENDPOINT": sink, "OTEL_BSP_SCHEDULE_DELAY": "1000", **env}
            with running([*gateway_argv(port), "-v", "0"], port, env=env, log_name="bench-tracing") as gateway:
                for era in ("modern", "legacy"):
                    callers = {"direct": Caller(demo_url, era, "tools/call", params, False),
                               "gateway": Caller(f"http://127.0.0.1:{port}/mcp/bench/demo", era, "tools/call", params, True)}
                    measured = asyncio.run(measure(callers, 1, calls, gateway.pid, max(calls // 20, 1)))
                    label = f"tracing {mode} [{'2026-07-28' if era == 'modern' else '2025-11-25 session'}]"
                    direct, via = summarise(label, 1, measured)
                    rows.append((label, direct, via))
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"### Tracing cost — {now}",
        "",
        f"Command: `python -m bench.tracing_cost --calls {calls}`. Machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}. The sink received {_Sink.received / 1024:.0f} KiB of spans in all.",
        "",
        "| gateway | direct p50 | gateway p50 | added p50 | gateway p99 | gateway CPU/call |",
        "|---|---|---|---|---|---|",
    ]
    for label, direct, via in rows:
        lines.append(f"| {label} | {direct.p50_ms:.2f} ms | {via.p50_ms:.2f} ms | **{via.p50_ms - direct.p50_ms:+.2f} ms** "
                     f"({via.p50_ms / direct.p50_ms:.2f}×) | {via.p99_ms:.2f} ms | {via.gateway_cpu_ms:.2f} ms |")
    return "\n".join(lines) + "\n"


def main() -> None:
    bench_main(__doc__ or "", run)


if __name__ == "__main__":
    main()
