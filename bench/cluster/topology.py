"""The scale-out topology on loopback: N gateway instances under Daphne (one database, one Redis),
nginx doing plain round robin in front of them, and two stateful MCP backends of two replicas each
(tests/backends/replica_server.py), configured through `config_apply`:

    /mcp/cluster/pair   mounts both backends (tools `alpha-increment`, `beta-whoami`, ...)
    /mcp/cluster/solo   mounts `alpha` alone (tools `increment`, `whoami`)

Used by `python -m bench.cluster`, `make cluster` (bench/cluster/serve.py) and tests/cluster. The
caller's process must have Django set up on the database the gateways will use: the configuration
is written from here, before the gateways start."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.cluster.nginx import MISSING, nginx_argv, nginx_binary, nginx_config
from tests.processes import ROOT, free_port, gateway_argv, stop, wait_for_port

TENANT = "cluster"
PAIR = "pair"
SOLO = "solo"
BACKENDS = ("alpha", "beta")
REPLICAS_PER_BACKEND = 2


@dataclass(frozen=True)
class Replica:
    backend: str
    name: str
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def stats(self) -> dict[str, int | str]:
        return httpx.get(f"http://127.0.0.1:{self.port}/stats", timeout=5).json()


@dataclass
class Gateway:
    name: str
    port: int
    process: subprocess.Popen[bytes]

    @property
    def alive(self) -> bool:
        return self.process.poll() is None


@dataclass
class Plan:
    """What to start. Ports left at 0 are picked free; `gateway_env` carries the settings module,
    database and Redis (each instance adds its own GATEWAY_INSTANCE_ID)."""

    gateway_env: Mapping[str, str]
    key: str
    tenant: str = TENANT  # the benchmark uses its own, so it never rewrites `make cluster`'s key or URLs
    instances: int = 3
    listen_port: int = 0
    gateway_ports: tuple[int, ...] = ()
    replica_ports: tuple[int, ...] = ()
    var_dir: Path = ROOT / "var" / "cluster"
    daphne_args: tuple[str, ...] = ()
    access_log: bool = False
    # A second nginx listener in front of the first instance alone: the benchmark alternates between
    # it and the round robin over all instances, so both see the same machine at the same time.
    single_listener: bool = False
    replicas: list[Replica] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        ports = self.replica_ports or tuple(free_port() for _ in range(len(BACKENDS) * REPLICAS_PER_BACKEND))
        names = [(backend, f"{backend}-{n}") for backend in BACKENDS for n in range(1, REPLICAS_PER_BACKEND + 1)]
        self.replicas = [Replica(backend, name, port) for (backend, name), port in zip(names, ports, strict=True)]


@dataclass
class Cluster:
    url: str  # nginx, round robin over every instance
    key: str
    tenant: str
    gateways: list[Gateway]
    replicas: list[Replica]
    single_url: str | None = None  # nginx in front of the first instance only (Plan.single_listener)

    def host_url(self, slug: str, base: str | None = None) -> str:
        return f"{base or self.url}/mcp/{self.tenant}/{slug}"

    def kill_gateway(self, index: int) -> None:
        """SIGKILL: no graceful shutdown, in-flight requests and open streams die with the process."""
        process = self.gateways[index].process
        process.send_signal(signal.SIGKILL)
        process.wait()

    def replica_stats(self) -> list[dict[str, int | str]]:
        return [replica.stats() for replica in self.replicas]


def config_document(replicas: list[Replica], key: str, tenant: str = TENANT) -> str:
    backends = "\n".join(
        f"  - {{tenant: {tenant}, name: {backend}, kind: mcp, transport: streamable-http, "
        f"urls: [{', '.join(repr(r.url) for r in replicas if r.backend == backend)}]}}"
        for backend in BACKENDS
    )
    return f"""
tenants:
  - slug: {tenant}
    name: Scale-out harness
    keys:
      - name: cluster
        secret: "{key}"
backends:
{backends}
virtual_hosts:
  - {{tenant: {tenant}, slug: {PAIR}, backends: {{{", ".join(f"{b}: {b}" for b in BACKENDS)}}}}}
  - {{tenant: {tenant}, slug: {SOLO}, backends: {{{BACKENDS[0]}: {BACKENDS[0]}}}}}
"""


def apply_config(replicas: list[Replica], key: str, tenant: str = TENANT) -> None:
    from apps.configuration.services import config_apply  # needs Django set up by the caller

    config_apply(document=config_document(replicas, key, tenant), prune=False)


class _Processes:
    """Processes started in parallel, waited for by port, stopped in reverse order."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: list[tuple[subprocess.Popen[bytes], int]] = []
        self._logs: list[object] = []

    def start(self, argv: list[str], port: int, name: str, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = open(self.log_dir / f"{name}.log", "wb")  # noqa: SIM115 - closed in stop_all
        self._logs.append(log)
        process = subprocess.Popen(argv, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=log, stderr=subprocess.STDOUT)
        self.started.append((process, port))
        return process

    def wait_all(self) -> None:
        for process, port in self.started:
            wait_for_port(port, process, timeout=120)

    def stop_all(self) -> None:
        for process, _ in reversed(self.started):
            stop(process)
        for log in self._logs:
            log.close()  # type: ignore[attr-defined]


@contextlib.contextmanager
def cluster(plan: Plan) -> Iterator[Cluster]:
    """Start the whole topology; everything is stopped when the block ends. Logs: <var_dir>/logs/."""
    binary = nginx_binary()
    if binary is None:
        raise RuntimeError(MISSING)
    (plan.var_dir / "logs").mkdir(parents=True, exist_ok=True)
    prefix = plan.var_dir / "nginx"
    prefix.mkdir(parents=True, exist_ok=True)
    (prefix / "access.log").unlink(missing_ok=True)  # this run's requests only
    apply_config(plan.replicas, plan.key, plan.tenant)
    listen_port = plan.listen_port or free_port()
    gateway_ports = plan.gateway_ports or tuple(free_port() for _ in range(plan.instances))
    processes = _Processes(plan.var_dir / "logs")
    try:
        for replica in plan.replicas:
            argv = [sys.executable, "-m", "tests.backends.replica_server", "--port", str(replica.port),
                    "--replica", replica.name]
            processes.start(argv, replica.port, f"replica-{replica.name}")
        gateways = []
        for n, port in enumerate(gateway_ports[: plan.instances], start=1):
            env = {**plan.gateway_env, "GATEWAY_INSTANCE_ID": f"gw-{n}"}
            process = processes.start([*gateway_argv(port), *plan.daphne_args], port, f"gateway-{n}", env)
            gateways.append(Gateway(f"gw-{n}", port, process))
        listeners = {listen_port: [g.port for g in gateways]}
        single_port = free_port() if plan.single_listener else None
        if single_port is not None:
            listeners[single_port] = [gateways[0].port]
        config = prefix / "nginx.conf"
        if plan.access_log:
            (prefix / "access.log").unlink(missing_ok=True)  # this run's requests only
        config.write_text(nginx_config(listeners=listeners, prefix=prefix, access_log=plan.access_log))
        processes.start(nginx_argv(binary, prefix, config), listen_port, "nginx")
        processes.wait_all()
        for replica in plan.replicas:  # the server on each port is the replica meant to be there
            if (found := replica.stats().get("replica")) != replica.name:
                raise RuntimeError(f"port {replica.port} is served by {found!r}, not replica {replica.name!r}")
        yield Cluster(f"http://127.0.0.1:{listen_port}", plan.key, plan.tenant, gateways, plan.replicas,
                      f"http://127.0.0.1:{single_port}" if single_port else None)
    finally:
        processes.stop_all()
