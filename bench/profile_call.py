"""Where a proxied call's CPU goes: runs the benchmark's stack, samples the gateway with py-spy
while one client calls `tools/call` sequentially, and prints the gateway's CPU per call split by
the part of the code it was spent in.

    .venv/bin/python -m bench.profile_call [--era modern|legacy] [--target mcp|openapi] [--calls N] [--raw FILE]

`--target openapi` calls the `getPet` tool of an OpenAPI backend (bench/openapi_call.py's setup)
instead of the demo MCP server's `add`; `--target guarded` calls `add` through the whole policy path
(bench/policy_path.py's guarded host: access policy with CEL, rate limits and budgets, tool costs,
per-caller egress credential, hashed audit arguments); `--target limited` through its host with
rate limits only (the Redis round trip, nothing else), for comparison; `--target interceptors` calls
`echo` of 1,000 bytes through bench/interceptors.py's host with every built-in on its results (and
`--target plain-echo` the same call through its host with none)."""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import openapi_call
from bench.proxy_latency import KEY, Caller, apply_config, cpu_seconds
from tests.processes import backend_argv, free_port, gateway_argv, running

# First matching marker wins: (label, substring of a frame in the stack).
CATEGORIES = [
    ("audit writer (thread)", "audit_records_write"),
    ("openapi: argument validation", "validate_arguments"),
    ("openapi: request building", "build_request"),
    ("openapi: result shaping", "shape_result"),
    ("openapi: output schema check", "check_structured"),
    ("configuration snapshot", "SnapshotDirectory"),
    ("rate limits and budgets (Redis)", "RedisRateLimiter"),
    ("interceptors", "interception.py"),
    ("access policy", "policy.py"),
    ("host lists (policy views)", "HostLists"),
    ("audit arguments", "arguments_kept"),
    ("egress credential", "egress"),
    ("sessions (Redis)", "RedisSessionStore"),
    ("upstream HTTP client", "HttpPool"),
    ("upstream SSE parsing", "UpstreamReply.events"),
    ("pipeline: forwarder", "Forwarder."),
    ("pipeline: gateway", "Gateway.handle"),
    ("consumer: response to Daphne", "McpConsumer._send"),
    ("consumer: request", "McpConsumer"),
    ("channels routing", "URLRouter"),
    ("daphne/twisted: HTTP in and out", "twisted"),
    ("asyncio event loop", "asyncio"),
]


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds per thread of a process, from /proc."""
    times: dict[int, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        times[int(task.name)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return times


def categorise(raw: Path) -> collections.Counter[str]:
    counts: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        leaf = frames[-1]
        if "select (selectors" in leaf or "concurrent/futures/thread.py" in leaf or "threading.py" in leaf:
            continue  # waiting, not working
        label = next((name for name, marker in CATEGORIES if marker in stack), "other")
        counts[label] += int(count)
    return counts


async def drive(caller: Caller, calls: int) -> float:
    await caller.open()
    for i in range(100):
        await caller.call(i)
    started = time.perf_counter()
    for i in range(calls):
        await caller.call(i)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--era", choices=["modern", "legacy"], default="modern")
    parser.add_argument("--target", choices=["mcp", "openapi", "guarded", "limited", "interceptors", "plain-echo"], default="mcp")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--raw", type=Path, help="keep py-spy's raw samples here (for flame graphs)")
    args = parser.parse_args()
    demo_port, many_port, gateway_port = free_port(), free_port(), free_port()
    if args.target == "openapi":
        backend = backend_argv("tests.backends.recording_service", demo_port)
        with tempfile.TemporaryDirectory() as folder:
            openapi_call.configure(f"http://127.0.0.1:{demo_port}", Path(folder))
        path, key = "bench-rest/rest", openapi_call.KEY
        params: dict[str, object] = {"name": "getPet", "arguments": openapi_call.ARGUMENTS}
    elif args.target in ("guarded", "limited"):
        from bench import policy_path

        backend = backend_argv("scripts.demo_server", demo_port)
        policy_path.configure(f"http://127.0.0.1:{demo_port}/mcp")
        path, key = {"guarded": ("bench-policy/guarded", policy_path.KEY),
                     "limited": ("bench-limits/limited", policy_path.LIMITS_KEY)}[args.target]
        params = {"name": "add", "arguments": {"a": 1, "b": 2}}
    elif args.target in ("interceptors", "plain-echo"):
        from bench import interceptors

        backend = backend_argv("scripts.demo_server", demo_port)
        interceptors.configure(f"http://127.0.0.1:{demo_port}/mcp", f"http://127.0.0.1:{many_port}")
        path = "bench-icpt/results" if args.target == "interceptors" else "bench-icpt/none"
        key, params = interceptors.KEY, {"name": "echo", "arguments": {"text": interceptors.text_of(1000)}}
    else:
        backend = backend_argv("scripts.demo_server", demo_port)
        apply_config(f"http://127.0.0.1:{demo_port}/mcp", f"http://127.0.0.1:{many_port}/mcp")
        path, key, params = "bench/demo", KEY, {"name": "add", "arguments": {"a": 1, "b": 2}}
    env = {"GATEWAY_INSTANCE_ID": "profile", "GATEWAY_LOG_LEVEL": "WARNING", "GATEWAY_DEBUG": "0"}
    with running(backend, demo_port, log_name="profile-backend"), \
         running([*gateway_argv(gateway_port), "-v", "0"], gateway_port, env=env, log_name="profile-gateway") as gateway:
        caller = Caller(f"http://127.0.0.1:{gateway_port}/mcp/{path}", args.era, "tools/call", params, auth=True,
                        key=key)
        with tempfile.TemporaryDirectory() as scratch:
            raw = Path(scratch) / "profile.txt"
            spy = subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record", "-p", str(gateway.pid), "-r", "1000", "-f", "raw", "-o", str(raw)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)
            cpu_before, threads_before = cpu_seconds(gateway.pid), thread_cpu(gateway.pid)
            elapsed = asyncio.run(drive(caller, args.calls))
            cpu_ms = (cpu_seconds(gateway.pid) - cpu_before) * 1000 / args.calls
            threads_after = thread_cpu(gateway.pid)
            main_ms = (threads_after[gateway.pid] - threads_before.get(gateway.pid, 0.0)) * 1000 / args.calls
            spy.send_signal(signal.SIGINT)  # py-spy writes its output on Ctrl-C
            spy.wait(30)
            counts = categorise(raw)
            if args.raw:
                args.raw.write_text(raw.read_text())
    total = sum(counts.values()) or 1
    print(f"{args.era}: {args.calls} sequential tools/call, {elapsed / args.calls * 1000:.2f} ms per call (wall, "
          f"under the profiler), gateway CPU {cpu_ms:.2f} ms per call (/proc): {main_ms:.2f} ms on the event loop "
          f"thread, {cpu_ms - main_ms:.2f} ms on worker threads (audit writes, snapshot loads)")
    print("Sampled split (py-spy; samples of threads blocked in C, e.g. on the database, count as busy):")
    for label, count in counts.most_common():
        print(f"  {label:34} {count * 100 / total:5.1f}%  ≈ {cpu_ms * count / total:5.3f} ms")


if __name__ == "__main__":
    main()
