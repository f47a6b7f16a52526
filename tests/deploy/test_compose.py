"""docker/compose.yml as `docker compose config` resolves it (no Docker engine needed): the topology
of docs/deploy.md ("Containers") — PostgreSQL with pgvector, Redis, a migration job the rest waits for, two gateway
replicas behind nginx, a Celery worker and one beat — with every secret required from the
environment, and an environment the production settings accept."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.deploy.helpers import (
    NGINX_CONF,
    REQUIRED,
    compose,
    compose_config,
    nginx_upstream_servers,
    require_compose,
    size_in_bytes,
)
from tests.processes import ROOT

APP_SERVICES = {"migrate", "gateway-1", "gateway-2", "worker", "indexer", "beat"}


@pytest.fixture(scope="module")
def docker() -> str:
    return require_compose()


@pytest.fixture(scope="module")
def services(docker: str) -> dict[str, dict]:
    return compose_config(docker, REQUIRED)["services"]


def _gateways(services: dict[str, dict]) -> set[str]:
    """The services that run the image's default command, the gateway (Daphne on :8000)."""
    return {name for name, s in services.items() if name in APP_SERVICES and not s.get("command")}


@pytest.mark.parametrize("missing", sorted(REQUIRED))
def test_config_refuses_to_resolve_without_each_secret(docker: str, missing: str) -> None:
    variables = {name: value for name, value in REQUIRED.items() if name != missing}
    done = compose(docker, variables, "config", "--quiet")
    assert done.returncode != 0
    assert f"required variable {missing} is missing a value: set {missing} to" in done.stderr


def test_an_empty_secret_is_refused_too(docker: str) -> None:
    done = compose(docker, {**REQUIRED, "GATEWAY_SECRET_KEY": ""}, "config", "--quiet")
    assert done.returncode != 0
    assert "GATEWAY_SECRET_KEY" in done.stderr


def test_the_services_of_a_deployment(services: dict[str, dict]) -> None:
    assert set(services) == {"postgres", "redis", "migrate", "gateway-1", "gateway-2", "nginx", "worker", "indexer",
                             "beat"}
    assert _gateways(services) == {"gateway-1", "gateway-2"}
    # Nothing but the load balancer is reachable from outside the compose network.
    assert {name for name, s in services.items() if s.get("ports")} == {"nginx"}


def test_postgres_has_pgvector_a_volume_and_a_healthcheck(services: dict[str, dict]) -> None:
    postgres = services["postgres"]
    assert postgres["image"].startswith("pgvector/pgvector:pg")
    assert "pg_isready" in postgres["healthcheck"]["test"]
    assert [v["target"] for v in postgres["volumes"] if v["type"] == "volume"] == ["/var/lib/postgresql/data"]
    assert postgres["environment"]["POSTGRES_PASSWORD"] == REQUIRED["POSTGRES_PASSWORD"]


def test_redis_persists_and_never_evicts(services: dict[str, dict]) -> None:
    redis = services["redis"]
    command = redis["command"]
    option = {command[i]: command[i + 1] for i in range(1, len(command) - 1) if command[i].startswith("--")}
    assert option["--appendonly"] == "yes"
    assert option["--appendfsync"] == "everysec"
    # Evicting would drop live sessions or queued tasks without a word.
    assert option["--maxmemory-policy"] == "noeviction"
    assert option["--requirepass"] == REQUIRED["REDIS_PASSWORD"]
    assert redis["healthcheck"]["test"][-1] == "ping"
    assert [v["target"] for v in redis["volumes"]] == ["/data"]


def test_every_role_runs_the_one_image_after_migrations(services: dict[str, dict]) -> None:
    images = {(services[name]["image"], services[name]["build"]["target"]) for name in APP_SERVICES}
    assert len(images) == 1
    assert services["migrate"]["command"] == ["python", "manage.py", "migrate", "--noinput"]
    assert services["migrate"]["restart"] == "no"
    for name in APP_SERVICES - {"migrate"}:
        depends = services[name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully", name
        assert depends["postgres"]["condition"] == "service_healthy", name
        assert depends["redis"]["condition"] == "service_healthy", name


def test_worker_and_a_single_beat(services: dict[str, dict]) -> None:
    worker, beat = services["worker"]["command"], services["beat"]["command"]
    assert worker[:4] == ["celery", "-A", "gatewaysite", "worker"]
    assert beat[:4] == ["celery", "-A", "gatewaysite", "beat"]
    assert "celery" in " ".join(services["worker"]["healthcheck"]["test"])
    # Spec compiles and index builds on separate queues, each consumed by a worker of its own.
    indexer = services["indexer"]["command"]
    assert indexer[:4] == ["celery", "-A", "gatewaysite", "worker"]
    assert worker[worker.index("-Q") + 1] == "celery" and indexer[indexer.index("-Q") + 1] == "indexing"
    # Two beats would queue every periodic job twice.
    assert services["beat"].get("deploy", {}).get("replicas", 1) == 1
    assert sum(1 for s in services.values() if "beat" in (s.get("command") or [])) == 1


def test_each_gateway_is_its_own_instance_with_the_shared_secrets(services: dict[str, dict]) -> None:
    gateways = sorted(_gateways(services))
    instance_ids = {services[name]["environment"]["GATEWAY_INSTANCE_ID"] for name in gateways}
    assert len(instance_ids) == len(gateways)
    for name in APP_SERVICES:
        env = services[name]["environment"]
        assert env["GATEWAY_SECRET_KEY"] == REQUIRED["GATEWAY_SECRET_KEY"], name
        assert REQUIRED["POSTGRES_PASSWORD"] in env["DATABASE_URL"], name
        assert REQUIRED["REDIS_PASSWORD"] in env["REDIS_URL"], name
        assert env["GATEWAY_ALLOWED_HOSTS"] == REQUIRED["GATEWAY_ALLOWED_HOSTS"], name


def test_nginx_balances_over_exactly_the_gateway_services(services: dict[str, dict]) -> None:
    upstream = nginx_upstream_servers(NGINX_CONF.read_text())
    assert sorted(upstream) == sorted(f"{name}:8000" for name in _gateways(services))
    nginx = services["nginx"]
    assert nginx["build"]["target"] == "nginx"
    assert {name for name, d in nginx["depends_on"].items() if d["condition"] == "service_healthy"} == _gateways(services)
    assert nginx["ports"][0]["target"] == 8080


def test_the_demo_backend_only_under_its_profile(docker: str) -> None:
    services = compose_config(docker, REQUIRED, "demo")["services"]
    assert services["demo-backend"]["command"][:2] == ["python", "scripts/demo_server.py"]
    assert "depends_on" not in services["demo-backend"]


def test_the_production_settings_accept_the_gateway_environment(services: dict[str, dict]) -> None:
    """What a gateway container starts with passes the production settings' own checks and
    `check --deploy` at error level; nginx's body cap equals the gateway's; the stop grace period
    outlasts the gateway's drain."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "gatewaysite.settings.prod",  # the image's ENV
        **services["gateway-1"]["environment"],
    }
    check = subprocess.run([sys.executable, "manage.py", "check", "--deploy"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stderr
    script = ("import django, json; django.setup(); from django.conf import settings as s; "
              "print(json.dumps({'body': s.GATEWAY_MAX_BODY_BYTES, 'spec': s.GATEWAY_SPEC_MAX_BYTES, "
              "'hosts': s.ALLOWED_HOSTS, 'grace': s.GATEWAY_SHUTDOWN_GRACE_SECONDS}))")
    read = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert read.returncode == 0, read.stderr
    values = json.loads(read.stdout)
    assert values["hosts"] == ["mcp.example.com", "localhost"]
    # Docker's SIGKILL must not cut the gateway's own drain short.
    for name in _gateways(services):
        assert _seconds(services[name]["stop_grace_period"]) > values["grace"], name
    conf = NGINX_CONF.read_text()
    server_level = conf.split("location ", 1)[0]
    assert size_in_bytes(_directive(server_level, "client_max_body_size")) == values["body"]
    for prefix in ("/api/", "/console/"):
        block = conf.split(f"location {prefix} {{", 1)[1].split("}", 1)[0]
        assert size_in_bytes(_directive(block, "client_max_body_size")) >= values["spec"], prefix


def _directive(text: str, name: str) -> str:
    values = [line.split()[1].rstrip(";") for line in text.splitlines() if line.strip().startswith(name + " ")]
    assert len(values) == 1, f"{name}: {values}"
    return values[0]


def _seconds(duration: str) -> float:
    """A compose duration (`30s`, `1m30s`) in seconds."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(h|ms|m|s)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, duration
    return sum(float(n) * {"h": 3600, "m": 60, "s": 1, "ms": 0.001}[u] for n, u in parts)
