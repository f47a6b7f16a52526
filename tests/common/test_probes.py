"""Liveness and readiness, as a load balancer sees them: the database, Redis, and the heartbeat a
real Celery worker writes when beat schedules it; dependencies that refuse or never answer."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.conf import settings

from apps.common.health import WORKER_HEARTBEAT_KEY
from apps.common.redis import redis_client
from tests.processes import ROOT, free_port, gateway_argv, gateway_env, log_path, running, stop

pytestmark = pytest.mark.slow


def ready(url: str) -> tuple[int, dict[str, Any]]:
    response = httpx.get(f"{url}/readyz", timeout=10)
    return response.status_code, response.json()


def wait_for_readiness(url: str, want: int, timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        status, body = ready(url)
        if status == want or time.monotonic() > deadline:
            assert status == want, body
            return body
        time.sleep(0.2)


def test_health_and_readiness(gateway_url: str) -> None:
    redis_client().delete(WORKER_HEARTBEAT_KEY)
    assert httpx.get(f"{gateway_url}/healthz").json() == {"status": "ok"}
    status, body = ready(gateway_url)
    # No worker runs beside this gateway: visible, but (GATEWAY_READYZ_WORKER=warn) not a reason to
    # take it out of the load balancer.
    assert status == 200 and body["status"] == "degraded" and body["problems"] == {}
    assert body["warnings"]["worker"].startswith("no heartbeat recorded")


def test_the_admin_is_served(gateway_url: str) -> None:
    response = httpx.get(f"{gateway_url}/admin/login/")
    assert response.status_code == 200 and "Django" in response.text


@pytest.fixture
def strict_gateway_url(django_db_setup: None, django_db_blocker: object) -> Iterator[str]:
    """A gateway that is not ready without a worker heartbeat of the last 3 seconds."""
    port = free_port()
    env = gateway_env(settings.DATABASES["default"]["NAME"], settings.REDIS_URL, GATEWAY_READYZ_WORKER="fail",
                      GATEWAY_WORKER_HEARTBEAT_MAX_AGE_SECONDS="3")
    with running(gateway_argv(port), port, env=env, log_name="gateway-strict"):
        yield f"http://127.0.0.1:{port}"


def start_worker() -> subprocess.Popen[bytes]:
    """`celery worker` with beat embedded (-B), on the test database and Redis, beating every second."""
    log = open(ROOT / "var" / "test-logs" / f"worker-{time.time_ns()}.log", "wb")  # noqa: SIM115 - the child owns it
    schedule = ROOT / "var" / "test-logs" / f"beat-schedule-{time.time_ns()}"
    env = gateway_env(settings.DATABASES["default"]["NAME"], settings.REDIS_URL,
                      DJANGO_SETTINGS_MODULE="tests.common.worker_settings", GATEWAY_WORKER_HEARTBEAT_SECONDS="1")
    argv = [sys.executable, "-m", "celery", "-A", "gatewaysite", "worker", "-B", "--pool", "solo", "-Q", "celery,indexing",
            "--schedule", str(schedule), "--without-gossip", "--without-mingle", "--loglevel", "INFO"]
    return subprocess.Popen(argv, cwd=ROOT, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT)


def test_readiness_follows_a_real_worker_heartbeat(strict_gateway_url: str) -> None:
    redis_client().delete(WORKER_HEARTBEAT_KEY)
    status, body = ready(strict_gateway_url)
    assert status == 503 and body["problems"]["worker"].startswith("no heartbeat recorded")
    worker = start_worker()
    try:
        body = wait_for_readiness(strict_gateway_url, 200)
        assert body == {"status": "ok", "problems": {}, "warnings": {}}
        metrics = httpx.get(f"{strict_gateway_url}/metrics").text
        age = next(line for line in metrics.splitlines() if line.startswith("mcp_gateway_worker_heartbeat_age_seconds "))
        assert float(age.split()[1]) < 3
    finally:
        assert stop(worker) == 0  # a clean warm shutdown
    body = wait_for_readiness(strict_gateway_url, 503, timeout=20)
    assert body["status"] == "unavailable" and set(body["problems"]) == {"worker"}
    assert body["problems"]["worker"].startswith("last heartbeat") and "(limit 3 s)" in body["problems"]["worker"]


def unready_gateway(database_port: int, redis_port: int) -> Any:
    env = gateway_env("gateway", f"redis://127.0.0.1:{redis_port}/0")
    env["DATABASE_URL"] = f"postgresql://postgres@127.0.0.1:{database_port}/gateway"
    port = free_port()
    return running(gateway_argv(port), port, env=env, log_name="gateway-unready"), f"http://127.0.0.1:{port}"


def test_refused_database_and_redis_are_named() -> None:
    nothing = free_port()  # nothing listens there
    process, url = unready_gateway(nothing, nothing)
    with process:
        status, body = ready(url)
        assert httpx.get(f"{url}/healthz").status_code == 200  # alive, only not ready
    assert status == 503 and body["status"] == "unavailable"
    # The reasons name the kind of failure, not the hosts and ports of the errors (in the log).
    assert body["problems"]["database"] == "OperationalError (the error is in the server log)"
    assert body["problems"]["redis"] == "ConnectionError (the error is in the server log)"
    assert "55432" not in json.dumps(body) and str(nothing) not in json.dumps(body)
    logged = log_path("gateway-unready", int(url.rsplit(":", 1)[1])).read_text()
    assert "readiness: the database check failed: OperationalError: " in logged and str(nothing) in logged
    assert body["warnings"] == {"worker": "unknown: the heartbeat is kept in Redis, which cannot be read"}


def test_dependencies_that_never_answer_fail_the_probe_at_its_deadline() -> None:
    with socket.socket() as silent:  # accepts connections (the kernel does) and never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        port = silent.getsockname()[1]
        process, url = unready_gateway(port, port)
        with process:
            first = ready(url)
            second = ready(url)  # the first database check still hangs: not started twice
    for status, body in (first, second):
        assert status == 503 and body["problems"]["redis"] == "no answer within 1 s", body
    assert first[1]["problems"]["database"] == "no answer within 1 s"
    assert second[1]["problems"]["database"] == "no answer: the previous check has not finished"
