"""Scale-out benchmark: the same load of official-SDK clients through nginx in front of one gateway
instance and in front of three, in one run.

    .venv/bin/python -m bench.cluster [--clients 4] [--calls 60] [--rounds 4] [--output BENCHMARKS.md]

One topology serves both: three instances, four backend replicas, and nginx with two listeners —
round robin over all three, and the first instance alone. Rounds alternate between the two (fresh
clients every round), so drift on a noisy machine hits both alike; the idle instances of the
one-instance rounds only poll Redis. Each round runs `--clients` clients of every kind in
bench.cluster.clients.KINDS at once (plus HTTP+SSE when the gateway serves it), each making
`--calls` mixed calls (increment on each backend, tools/list, whoami). Reported: tools/call p50/p99
per kind, errors (wrong counters and wrong replicas included) and the replicas' 404s."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import logging
import os
import platform
import re
import time
from pathlib import Path

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gatewaysite.settings.dev")
django.setup()

from bench.cluster.clients import (  # noqa: E402
    HTTP_SSE,
    KINDS,
    STREAMABLE_SESSION,
    ClientKind,
    Load,
    run_load,
    sse_served,
)
from bench.cluster.topology import PAIR, SOLO, Cluster, Plan, cluster  # noqa: E402
from bench.stats import percentile  # noqa: E402

KEY = "bench-cluster-key-0123456789abcdef"


def hosts(running: Cluster, base: str) -> list[tuple[str, list[str]]]:
    return [(running.host_url(PAIR, base), ["alpha-", "beta-"]), (running.host_url(SOLO, base), [""])]


def run(clients: int, calls: int, rounds: int, sse: bool) -> tuple[dict[str, Load], list[ClientKind], int, float]:
    env = {"DJANGO_SETTINGS_MODULE": os.environ["DJANGO_SETTINGS_MODULE"], "GATEWAY_LOG_LEVEL": "WARNING",
           "GATEWAY_DEBUG": "0"}
    plan = Plan(gateway_env=env, key=KEY, tenant="cluster-bench", instances=3, daphne_args=("-v", "0"),
                single_listener=True, access_log=True)
    with cluster(plan) as running:
        assert running.single_url is not None
        bases = {"1 instance": running.single_url, "3 instances": running.url}
        kinds = [*KINDS, *([HTTP_SSE] if sse and sse_served(running.host_url(PAIR), KEY) else [])]
        for base in bases.values():  # warm-up: backend probes, pooled connections, snapshots
            asyncio.run(run_load(hosts(running, base), KEY, clients_per_kind=2, calls=12, kinds=kinds))
        loads = {label: Load() for label in bases}
        cpu = time.process_time()
        for n in range(rounds):
            for label, base in bases.items():
                asyncio.run(run_load(hosts(running, base), KEY, clients_per_kind=clients, calls=calls, kinds=kinds,
                                     load=loads[label]))
                print(f"round {n + 1}/{rounds} {label}: {len(loads[label].records)} records, "
                      f"{len(loads[label].errors())} errors", flush=True)
        cpu = time.process_time() - cpu
        not_found = sum(int(stats["not_found"]) for stats in running.replica_stats())
        relays = relayed(plan.var_dir / "nginx" / "access.log", running)
    requests = sum(1 for load in loads.values() for r in load.records if r.method.startswith("tools/"))
    return loads, kinds, not_found, cpu * 1000 / max(requests, 1), relays


def relayed(access_log: Path, running: Cluster) -> tuple[int, int, int]:
    """From nginx's log of the round-robin listener: (requests, HTTP+SSE POSTs, POSTs whose answer had
    to travel to another instance). Only those need a relay: any instance answers a Streamable HTTP
    or stateless request itself. An HTTP+SSE stream stays on the instance whose id its session id
    starts with (gw-<n>): nothing is killed here."""
    listen = running.url.rsplit(":", 1)[1].split("/")[0]
    holder_port = {f"gw-{n}": str(gateway.port) for n, gateway in enumerate(running.gateways, start=1)}
    requests = posts = moved = 0
    for line in access_log.read_text().splitlines():
        if not line.startswith(f"{listen} "):
            continue
        requests += 1
        match = re.search(r'"POST \S*/messages\?session_id=(gw-\d+)\.', line)
        if match:
            posts += 1
            upstream_port = line.split(" -> ")[-1].split(" ")[0].rsplit(":", 1)[-1]
            moved += upstream_port != holder_port.get(match.group(1))
    return requests, posts, moved


def markdown(loads: dict[str, Load], kinds: list[ClientKind], not_found: int, client_cpu_ms: float,
             relays: tuple[int, int, int], args: argparse.Namespace) -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"### Scale-out, 1 and 3 instances behind nginx — {now}",
        "",
        f"Command: `python -m bench.cluster --clients {args.clients} --calls {args.calls} --rounds {args.rounds}"
        f"{'' if args.sse else ' --no-sse'}`. "
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"Linux {platform.release()}, load average {os.getloadavg()[0]:.1f} at the end. Everything on this machine: "
        f"nginx (1 worker), 3 Daphne instances, 4 backend replicas, the clients ({len(kinds)} kinds × "
        f"{args.clients} clients at once, {args.calls} calls each, fresh clients every round). The SDK clients are the heaviest part: "
        f"{client_cpu_ms:.1f} ms of the load generator's CPU per request.",
        f"Replica 404s (a request routed to the wrong replica): **{not_found}**.",
        "",
        "| kind | instances | tools/call | errors | p50 | p99 |",
        "|---|---|---|---|---|---|",
    ]
    for kind in [k.name for k in kinds] + ["all"]:
        for label, load in loads.items():
            latencies = load.latencies(kind=None if kind == "all" else kind)
            errors = [r for r in load.errors() if kind in {"all", r.kind}]
            lines.append(f"| {kind} | {label} | {len(latencies)} | {len(errors)} | "
                         f"{percentile(latencies, 50):.1f} ms | {percentile(latencies, 99):.1f} ms |")
    lines.append("")
    for kind in (STREAMABLE_SESSION.name, None):  # the stateful mode first, then every kind
        one, three = (load.latencies(kind=kind) for load in loads.values())
        lines.append(f"{kind or 'All kinds'}: p99 with 3 instances / p99 with 1 = "
                     f"**{percentile(three, 99) / percentile(one, 99):.2f}×** "
                     f"(p50: {percentile(three, 50) / percentile(one, 50):.2f}×).")
    errors = {f"{r.kind}: {r.method}: {(r.error or '')[:120]}" for load in loads.values() for r in load.errors()}
    if errors:
        lines += ["", "Distinct errors:", "", *(f"- `{error}`" for error in sorted(errors)[:10])]
    requests, posts, moved = relays
    lines += ["", f"Requests through the 3-instance listener that needed a relay between instances: **{moved} of "
              f"{requests} ({100 * moved / max(requests, 1):.1f} %)** — the HTTP+SSE POSTs that landed on another "
              f"instance than their stream ({moved} of {posts} such POSTs); Streamable HTTP and stateless requests "
              "need none (nginx access log, `bench.cluster.__main__.relayed`)."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=4, help="clients of each kind at once")
    parser.add_argument("--calls", type=int, default=60, help="calls per client per round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--output", type=Path, help="append the markdown section to this file")
    parser.add_argument("--no-sse", dest="sse", action="store_false", help="leave out HTTP+SSE clients even if served")
    args = parser.parse_args()
    for noisy in ("httpx", "httpx2", "mcp"):  # a line per request would drown the progress lines
        logging.getLogger(noisy).setLevel(logging.WARNING)
    report = markdown(*run(args.clients, args.calls, args.rounds, args.sse), args)
    print()
    print(report)
    if args.output:
        with args.output.open("a", encoding="utf-8") as out:
            out.write("\n" + report)


if __name__ == "__main__":
    main()
