"""docker/healthcheck.py, the image's HEALTHCHECK, against a real gateway under Daphne that serves
only its public names: the probe reaches it by loopback address all the same (the probes answer
under any Host), and fails on a dead port."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from django.conf import settings

from tests.processes import ROOT, free_port, gateway_argv, gateway_env, running

pytestmark = pytest.mark.slow

SCRIPT = ROOT / "docker" / "healthcheck.py"


@pytest.fixture(scope="module")
def public_gateway_port(django_db_setup: None) -> Iterator[int]:
    port = free_port()
    env = gateway_env(settings.DATABASES["default"]["NAME"], settings.REDIS_URL,
                      GATEWAY_INSTANCE_ID="gw-health", GATEWAY_ALLOWED_HOSTS=".example.com,mcp.internal")
    with running(gateway_argv(port), port, env=env, log_name="health-gateway"):
        yield port


def _probe(port: int | str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), str(port)], env={"PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=30)


def test_the_gateway_serves_only_its_public_names_but_the_probe_passes(public_gateway_port: int) -> None:
    assert httpx.get(f"http://127.0.0.1:{public_gateway_port}/console/login/", timeout=10).status_code == 400
    done = _probe(public_gateway_port)
    assert done.returncode == 0, done.stderr


def test_the_probe_fails_on_a_dead_port_or_bad_usage() -> None:
    dead = _probe(free_port())
    assert dead.returncode == 1 and "Connection refused" in dead.stderr
    assert _probe("not-a-port").returncode == 2
