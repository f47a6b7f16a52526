"""The harness refuses to run a topology in which one server answers for another: a test would
take one replica's answers for another's (a port handed out twice, or taken by someone else)."""

from __future__ import annotations

import os

import pytest
from django.conf import settings

from bench.cluster.nginx import MISSING, nginx_binary
from bench.cluster.topology import Plan, cluster
from tests.processes import ROOT, free_port, gateway_env

pytestmark = pytest.mark.slow


def test_free_ports_are_never_handed_out_twice() -> None:
    ports = [free_port() for _ in range(2000)]
    assert len(set(ports)) == len(ports)


def test_a_replica_port_served_by_another_replica_is_refused(transactional_db: None) -> None:
    if nginx_binary() is None:
        if os.environ.get("CI") == "true":
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    shared = free_port()
    env = gateway_env(settings.DATABASES["default"]["NAME"], settings.REDIS_URL)
    # beta-1 is given alpha-1's port: one of the two cannot bind, and waiting for its port finds the other.
    plan = Plan(gateway_env=env, key="topology-test-key-0123456789abcdef", instances=1,
                replica_ports=(shared, free_port(), shared, free_port()), var_dir=ROOT / "var" / "test-logs" / "topology")
    with pytest.raises(RuntimeError, match=rf"port {shared} is served by '(alpha|beta)-1'|exited"):
        with cluster(plan):
            pytest.fail("the topology started with two replicas on one port")
