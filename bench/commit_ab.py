"""What a change costs a proxied call: the gateway at two commits, side by side on one machine.

    .venv/bin/python -m bench.commit_ab --base <commit> [--calls N] [--output FILE]

Checks `--base` out into a temporary git worktree, starts its gateway and this tree's under Daphne
(same demo backend, same settings; each on a database of its own, migrated and configured by its
own code, so commits whose schemas or stored data differ compare too), and sends `tools/call` to each in alternating
rounds of 50 calls (the order flips every round), so drift on a noisy machine hits both alike.
Reports p50/p99 and each gateway's CPU per call, for a 2026-07-28 call and a 2025-11-25 session."""

from __future__ import annotations

import asyncio
import datetime
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
from django.conf import settings

from bench.proxy_latency import Caller, bench_main, cpu_seconds
from bench.stats import percentile
from tests.processes import ROOT, backend_argv, free_port, running, wait_for_port

ROUND = 50
PARAMS = {"name": "add", "arguments": {"a": 1, "b": 2}}


def _database(name: str) -> str:
    """A fresh database `name` on the server of DATABASE_URL (dropped first if left over); its URL."""
    url = settings.DATABASES["default"]
    with psycopg.connect(host=url["HOST"], port=url["PORT"], user=url["USER"], password=url["PASSWORD"] or None,
                         dbname="postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    auth = url["USER"] + (f":{url['PASSWORD']}" if url["PASSWORD"] else "")
    return f"postgresql://{auth}@{url['HOST']}:{url['PORT']}/{name}"


def _prepare(root: Path, database_url: str, demo_url: str) -> None:
    """Migrate the database and apply the benchmark's configuration with the code at `root`."""
    env = {**os.environ, "DATABASE_URL": database_url}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=root, env=env, check=True)
    apply = f"from bench.proxy_latency import apply_config; apply_config({demo_url!r}, {demo_url!r})"
    subprocess.run([sys.executable, "-c", apply], cwd=root, env=env, check=True)


def _gateway(root: Path, port: int, database_url: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "GATEWAY_INSTANCE_ID": f"ab-{port}", "GATEWAY_LOG_LEVEL": "WARNING", "GATEWAY_DEBUG": "0",
           "DATABASE_URL": database_url}
    argv = [sys.executable, "-m", "daphne", "-v", "0", "-b", "127.0.0.1", "-p", str(port), "gatewaysite.asgi:application"]
    process = subprocess.Popen(argv, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port, process)
    return process


async def _measure(urls: dict[str, str], pids: dict[str, int], era: str, calls: int) -> dict[str, tuple[float, float, float]]:
    callers = {name: Caller(url, era, "tools/call", PARAMS, True) for name, url in urls.items()}
    for caller in callers.values():
        await caller.open()
        for i in range(100):  # warm-up: connections, probes, snapshots
            await caller.call(i)
    latencies: dict[str, list[float]] = {name: [] for name in urls}
    cpu = dict.fromkeys(urls, 0.0)
    for round_number in range(max(calls // ROUND, 1)):
        order = list(urls) if round_number % 2 == 0 else list(reversed(urls))
        for name in order:
            before = cpu_seconds(pids[name])
            for i in range(ROUND):
                started = time.perf_counter()
                await callers[name].call(i)
                latencies[name].append((time.perf_counter() - started) * 1000)
            cpu[name] += cpu_seconds(pids[name]) - before
    for caller in callers.values():
        caller.pool.close()
    return {name: (percentile(lat, 50), percentile(lat, 99), cpu[name] * 1000 / len(lat)) for name, lat in latencies.items()}


def run(base: str, calls: int) -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.strip()
    this = f"{head}{' + uncommitted changes' if dirty else ''}"
    demo_port = free_port()
    demo_url = f"http://127.0.0.1:{demo_port}/mcp"
    rows: list[str] = []
    with tempfile.TemporaryDirectory(prefix="commit-ab-") as scratch:
        worktree = Path(scratch) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(worktree), base], cwd=ROOT, check=True)
        try:
            (worktree / ".venv").symlink_to(ROOT / ".venv")
            roots = {base: worktree, this: ROOT}
            databases = {base: _database("bench_ab_base"), this: _database("bench_ab_this")}
            for name, root in roots.items():
                _prepare(root, databases[name], demo_url)
            with running(backend_argv("scripts.demo_server", demo_port), demo_port, log_name="ab-demo"):
                ports = {base: free_port(), this: free_port()}
                processes = {name: _gateway(roots[name], ports[name], databases[name]) for name in roots}
                try:
                    urls = {name: f"http://127.0.0.1:{port}/mcp/bench/demo" for name, port in ports.items()}
                    pids = {name: process.pid for name, process in processes.items()}
                    for era in ("modern", "legacy"):
                        measured = asyncio.run(_measure(urls, pids, era, calls))
                        label = "2026-07-28" if era == "modern" else "2025-11-25 session"
                        for name, (p50, p99, cpu) in measured.items():
                            print(f"{label:20} {name:32} p50 {p50:.2f} ms  p99 {p99:.2f} ms  CPU {cpu:.3f} ms/call", flush=True)
                            rows.append(f"| tools/call add [{label}] | `{name}` | {p50:.2f} ms | {p99:.2f} ms | {cpu:.3f} ms |")
                finally:
                    for process in processes.values():
                        process.terminate()
                        process.wait(timeout=30)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT, check=False)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join([
        f"### Commit A/B — {now}", "",
        f"Command: `python -m bench.commit_ab --base {base} --calls {calls}` (C=1, rounds of {ROUND} alternating).", "",
        "| call | gateway at | p50 | p99 | gateway CPU/call |", "|---|---|---|---|---|", *rows,
    ]) + "\n"


def main() -> None:
    bench_main(__doc__ or "", lambda calls, base: run(base, calls), calls=4000,
               options={"--base": {"required": True, "help": "the commit to compare this tree with"}})


if __name__ == "__main__":
    main()
