"""The scaled-down run that checks the capacity model of docs/scale.md: three gateway instances on a
Redis Cluster (three masters, a replica each) behind nginx round robin, official-SDK clients
(Streamable HTTP sessions and stateless 2026-07-28) making mixed calls, every call under a rate
limit (the limiter's script runs on each). Measured over the run, per proxied request:

- the gateways' CPU (user + system of the three Daphne processes, from /proc);
- Redis commands, by command (`INFO commandstats`, summed over the masters);
- PostgreSQL rows written (audit rows of the bench's tenant);
- and the run's requests per second (the SDK clients share the machine: a floor, not a ceiling).

    .venv/bin/python -m bench.capacity [--clients 6] [--seconds 30] [--output BENCHMARKS.md]"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import time
from collections import Counter
from pathlib import Path

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gatewaysite.settings.dev")
django.setup()

import redis  # noqa: E402
from django.conf import settings  # noqa: E402

from apps.audit.models import AuditRecord  # noqa: E402
from apps.policies.services import rate_limit_set  # noqa: E402
from apps.tenants.models import Tenant  # noqa: E402
from bench.cluster.clients import STATELESS, STREAMABLE_SESSION, Load, run_load  # noqa: E402
from bench.cluster.topology import PAIR, SOLO, Plan, apply_config, cluster  # noqa: E402
from tests.redis_servers import redis_cluster  # noqa: E402

KEY = "capacity-bench-key-0123456789abcdef"
TENANT = "capacity-bench"
KINDS = [STREAMABLE_SESSION, STATELESS]
#: Commands the gateway sends only from inside its scripts (the limiter's bucket GET/SET and clock),
#: or that Redis itself sends (replication, the cluster bus): not round trips of the gateway's.
_INSIDE_SCRIPTS = {"time", "get", "set", "replconf", "cluster", "client", "info", "ping", "command"}


def commands(ports: list[int]) -> Counter[str]:
    """Calls per command so far, summed over the masters."""
    total: Counter[str] = Counter()
    for port in ports:
        for name, stats in redis.Redis(port=port).info("commandstats").items():
            total[name.removeprefix("cmdstat_")] += int(stats["calls"])
    return total


def cpu_seconds(pids: list[int]) -> float:
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def run(clients: int, seconds: float) -> dict[str, object]:
    with redis_cluster() as nodes:
        env = {"DJANGO_SETTINGS_MODULE": os.environ["DJANGO_SETTINGS_MODULE"], "GATEWAY_LOG_LEVEL": "WARNING",
               "GATEWAY_DEBUG": "0", "REDIS_URL": nodes.url, "GATEWAY_CHANNEL_LAYER_URLS": settings.REDIS_URL,
               "CELERY_BROKER_URL": settings.REDIS_URL}
        plan = Plan(gateway_env=env, key=KEY, tenant=TENANT, instances=3, daphne_args=("-v", "0"),
                    var_dir=Path(settings.BASE_DIR) / "var" / "capacity")
        apply_config(plan.replicas, KEY, TENANT)
        tenant = Tenant.objects.get(slug=TENANT)
        rate_limit_set(tenant=tenant, scope="key", name="cluster", limit=1_000_000, window_seconds=60)
        with cluster(plan) as running:
            hosts = [(running.host_url(PAIR), ["alpha-", "beta-"]), (running.host_url(SOLO), [""])]
            asyncio.run(run_load(hosts, KEY, clients_per_kind=2, calls=10, kinds=KINDS))  # warm-up
            time.sleep(1.0)
            pids = [gateway.process.pid for gateway in running.gateways]
            rows_before = AuditRecord.objects.filter(tenant_id=tenant.pk).count()
            commands_before, cpu_before = commands(nodes.masters), cpu_seconds(pids)
            load = Load()
            started = time.monotonic()
            asyncio.run(run_load(hosts, KEY, clients_per_kind=clients, kinds=KINDS, seconds=seconds, load=load))
            elapsed = time.monotonic() - started
            cpu = cpu_seconds(pids) - cpu_before
            time.sleep(1.0)  # the audit writers flush every 0.25 s
            used = commands(nodes.masters) - commands_before
            rows = AuditRecord.objects.filter(tenant_id=tenant.pk).count() - rows_before
            memory = [int(redis.Redis(port=port).info("memory")["used_memory"]) for port in nodes.masters]
    requests = [r for r in load.records if r.method.startswith("tools/") and r.error is None]
    calls = [r for r in requests if r.method.startswith("tools/call")]
    return {"requests": len(requests), "calls": len(calls), "errors": len(load.errors()), "seconds": elapsed,
            "cpu": cpu, "commands": used, "rows": rows, "memory": memory}


def report(result: dict[str, object], clients: int, seconds: float) -> str:
    requests = int(result["requests"])  # type: ignore[call-overload]
    used: Counter[str] = result["commands"]  # type: ignore[assignment]
    per = {name: count / requests for name, count in used.most_common() if count / requests >= 0.01}
    lines = [
        f"| 3 instances, Redis Cluster (3 masters + replicas), {clients} clients of each kind, {seconds:.0f} s | |",
        "|---|---:|",
        f"| requests (tools/call + tools/list), errors | {requests:,} ({result['calls']:,} calls), {result['errors']} |",
        f"| requests / s (clients on the same 2 cores) | {requests / float(result['seconds']):,.0f} |",  # type: ignore[arg-type]
        f"| gateway CPU per request, three instances together (ms) | {float(result['cpu']) * 1000 / requests:.2f} |",  # type: ignore[arg-type]
        f"| Redis commands per request, all masters (a script's own commands counted too) | "
        f"{sum(used.values()) / requests:.2f} |",
        f"| … by command | {', '.join(f'{name} {count:.2f}' for name, count in per.items())} |",
        f"| Redis round trips per request, about (scripts, and commands no script runs) | "
        f"{sum(c for n, c in used.items() if n not in _INSIDE_SCRIPTS) / requests:.2f} |",
        f"| audit rows per tools/call | {int(result['rows']) / max(int(result['calls']), 1):.2f} |",  # type: ignore[call-overload]
        f"| Redis memory per master after the run (MB) | {', '.join(f'{m / 2**20:.1f}' for m in result['memory'])} |",  # type: ignore[attr-defined]
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    table = report(run(args.clients, args.seconds), args.clients, args.seconds)
    print(table)
    if args.output:
        with args.output.open("a") as out:
            out.write(f"\n<!-- bench.capacity {datetime.date.today()} {platform.machine()} {os.cpu_count()} cores -->\n"
                      f"{table}\n")


if __name__ == "__main__":
    main()
