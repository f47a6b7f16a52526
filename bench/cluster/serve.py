"""`make cluster` (scripts/cluster.sh): the scale-out topology by hand, until Ctrl-C — three gateway
instances on the development database and Redis, nginx round robin on 127.0.0.1:8100, the two
stateful backends (two replicas each) and a seeded tenant whose key is kept in var/cluster-key.

    .venv/bin/python -m bench.cluster.serve [--port 8100] [--instances 3]

Ports: nginx on --port, the instances on the next ones (8101-8103), the replicas from port+11."""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import sys
import time
from types import FrameType

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gatewaysite.settings.dev")
django.setup()

from bench.cluster.topology import PAIR, SOLO, Plan, cluster  # noqa: E402
from tests.processes import ROOT  # noqa: E402

KEY_FILE = ROOT / "var" / "cluster-key"


def cluster_key() -> str:
    """The tenant's key, the same on every run so a client configured once keeps working."""
    if not KEY_FILE.exists():
        KEY_FILE.parent.mkdir(parents=True, exist_ok=True)
        KEY_FILE.write_text(secrets.token_urlsafe(24))
        KEY_FILE.chmod(0o600)
    return KEY_FILE.read_text().strip()


def _stop(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # leaves the `with cluster(...)` block, which stops every process


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=int(os.environ.get("CLUSTER_PORT", "8100")))
    parser.add_argument("--instances", type=int, default=3)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _stop)
    plan = Plan(
        gateway_env={"DJANGO_SETTINGS_MODULE": os.environ["DJANGO_SETTINGS_MODULE"], "PYTHONUNBUFFERED": "1"},
        key=cluster_key(),
        instances=args.instances,
        listen_port=args.port,
        gateway_ports=tuple(args.port + 1 + n for n in range(args.instances)),
        replica_ports=tuple(args.port + 11 + n for n in range(4)),
        access_log=True,  # which instance served what: var/cluster/nginx/access.log
    )
    try:
        with cluster(plan) as running:
            replicas = ", ".join(f"{r.name} :{r.port}" for r in running.replicas)
            print(f"""
  MCP gateway cluster is running: {args.instances} instances behind nginx (round robin, no stickiness).

  MCP endpoints  {running.host_url(PAIR)}   (backends alpha and beta: alpha-increment, beta-whoami, ...)
                 {running.host_url(SOLO)}   (backend alpha alone: increment, whoami)
                 HTTP+SSE clients: <endpoint>/sse
  API key        {running.key}
                 (send it as "Authorization: Bearer <key>")
  Instances      {", ".join(f"{g.name} :{g.port} (pid {g.process.pid})" for g in running.gateways)}
  Replicas       {replicas}   (GET http://127.0.0.1:<port>/stats)
  Logs           var/cluster/logs/, var/cluster/nginx/

  Try it: kill one instance (kill -9 <pid of its daphne>) and keep calling.
  Ctrl-C stops everything.
""", flush=True)
            # Serve while any instance lives: killing instances by hand is the point of the exercise.
            while any(gateway.alive for gateway in running.gateways):
                time.sleep(0.5)
            print("every gateway instance stopped; stopping the rest (logs in var/cluster/logs/)", file=sys.stderr)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
