"""Rate limits and budgets are enforced again the moment a restarted Redis answers: the limiter's
kept connections, all broken by the restart, must not each open a window of unchecked calls (an
exhausted budget bypassed for a minute and more after Redis was back)."""

from __future__ import annotations

import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings

from apps.audit.models import AuditRecord
from apps.policies.services import budget_set, rate_limit_set
from tests import factories
from tests.audit.helpers import audit_rows
from tests.gateway.adapters.test_redis_rate_limiter import redis_server
from tests.gateway.helpers import message_of, modern
from tests.processes import free_port, gateway_argv, gateway_env, running, stop, wait_for_port

pytestmark = pytest.mark.slow

CONCURRENCY = 24


def _redis(port: int, directory: Path) -> subprocess.Popen[bytes]:
    """A private redis-server whose data survives a restart (saved on demand, loaded at start)."""
    argv = [redis_server(), "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
            "--dir", str(directory), "--dbfilename", "dump.rdb"]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port, process)
    return process


def _answers(port: int) -> bool:
    try:
        return bool(redis.Redis(port=port, socket_connect_timeout=0.2, socket_timeout=0.2).ping())
    except redis.RedisError:
        return False


def _world(gateway_url: str, demo_backend_url: str) -> dict[str, Any]:
    tenant = factories.tenant_factory()
    keys = {name: factories.api_key_factory(tenant=tenant, name=name).secret for name in ("busy", "spender", "limited")}
    backend = factories.backend_factory(tenant=tenant, urls=[demo_backend_url])
    host = factories.virtual_host_factory(tenant=tenant, mounts={"demo": backend})
    rate_limit_set(tenant=tenant, scope="key", name="busy", limit=1_000_000, window_seconds=3600)  # checked, never hit
    budget_set(tenant=tenant, scope="key", name="spender", daily=2, monthly=None)
    rate_limit_set(tenant=tenant, scope="key", name="limited", limit=2, window_seconds=3600)
    return {"url": f"{gateway_url}/mcp/{tenant.slug}/{host.slug}", "tenant": tenant.slug, "keys": keys}


def _call(world: dict[str, Any], key: str, i: int = 1) -> dict[str, Any]:
    params = {"name": "add", "arguments": {"a": i, "b": 1}}
    return message_of(modern(world["url"], "tools/call", params, key=world["keys"][key], request_id=i))


def _round(world: dict[str, Any], pool: ThreadPoolExecutor) -> list[tuple[str, dict[str, Any]]]:
    """CONCURRENCY calls at once, so the limiter holds (or needs) as many connections."""
    keys = ["spender", "limited"] + ["busy"] * (CONCURRENCY - 2)
    return list(zip(keys, pool.map(lambda item: _call(world, item[1], item[0]), enumerate(keys)), strict=True))


def test_limits_and_budgets_hold_again_as_soon_as_a_restarted_redis_answers(
    transactional_db: None, demo_backend_url: str, tmp_path: Path
) -> None:
    redis_port, port = free_port(), free_port()
    redis_process = _redis(redis_port, tmp_path)
    try:
        env = gateway_env(settings.DATABASES["default"]["NAME"], f"redis://127.0.0.1:{redis_port}/0",
                          GATEWAY_INSTANCE_ID="gw-redis-restart")
        with running(gateway_argv(port), port, env=env, log_name="gateway-redis-restart"), \
                ThreadPoolExecutor(CONCURRENCY) as pool:
            world = _world(f"http://127.0.0.1:{port}", demo_backend_url)
            for _ in range(3):  # the limiter now keeps many connections, all about to break
                _round(world, pool)
            for key in ("spender", "limited"):
                refused = _call(world, key)
                assert refused["error"]["code"] == -32005, refused  # spent, and known to be spent

            redis.Redis(port=redis_port).save()  # what was spent survives the restart
            stop(redis_process)
            time.sleep(2)
            assert "result" in _call(world, "busy")  # Redis down: admitted, unchecked (fail open)
            redis_process = _redis(redis_port, tmp_path)
            while not _answers(redis_port):
                time.sleep(0.01)
            # The limiter notices within a fraction of a second; from then on no call goes unchecked.
            time.sleep(0.3)
            since = datetime.now(UTC)
            answers: list[tuple[str, dict[str, Any]]] = []
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                answers += _round(world, pool)
        for key, answer in answers:
            if key == "busy":
                assert "result" in answer, answer
            else:  # still spent after the restart: never admitted unchecked
                assert answer.get("error", {}).get("code") == -32005, (key, answer)
        audit_rows(world["tenant"], 3 * CONCURRENCY + 3 + len(answers), timeout=10, method="tools/call")
        after = AuditRecord.objects.filter(tenant_slug=world["tenant"], method="tools/call", created_at__gte=since)
        states = sorted({row.limit_state for row in after})
        assert after.count() >= len(answers) and states == ["limited", "ok"], states
    finally:
        if redis_process.poll() is None:
            stop(redis_process)
