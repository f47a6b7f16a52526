"""The policy path's cost (docs/policies.md): the same stateless `tools/call` through a virtual host with
no policy and through one with the full path — a JWT access token verified, an access policy with a
CEL condition over the arguments, tool costs, rate limits and budgets (key and team) checked and
charged atomically in one Redis round trip, a per-caller egress credential, hashed audit arguments —
interleaved in one run.

    .venv/bin/python -m bench.policy_path [--calls N] [--output FILE]

Paths (all to the demo MCP server's `add`, C=1): direct (no gateway); `plain` with an API key of a
tenant without any policy, limit, budget or argument hashing; `rate limits only` with a key of a
tenant whose only policy is a key and a team rate limit (the one Redis round trip, alone); `guarded`
with an API key of a tenant with all of them; `guarded + JWT` with an ES256 access token instead.

Then, in this process, the limiter alone: one admission with the key's and the team's rate limits,
and one with their budgets too, interleaved — what budgets add to the round trip."""

from __future__ import annotations

import asyncio
import datetime
import os
import platform
import sys
import time

import django
import redis.asyncio

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gatewaysite.settings.dev")
django.setup()

import jwt  # noqa: E402
from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402

from apps.catalog.credentials import IdentitySecret, egress_credential_set  # noqa: E402
from apps.catalog.models import (
    Backend,  # noqa: E402
    VirtualHost,  # noqa: E402
)
from apps.configuration.services import config_apply  # noqa: E402
from apps.gateway.adapters.redis_rate_limiter import RedisRateLimiter  # noqa: E402
from apps.kernel.costs import ToolCostSpec  # noqa: E402
from apps.kernel.identity import Budget, Limit  # noqa: E402
from apps.kernel.policy import RuleSpec  # noqa: E402
from apps.policies.services import access_policy_set, budget_set, rate_limit_set, tool_costs_set  # noqa: E402
from apps.tenants.models import Tenant  # noqa: E402
from apps.tenants.services import token_issuer_set  # noqa: E402
from bench.proxy_latency import Caller, bench_main, calibrate, measure, percentile  # noqa: E402
from tests.processes import backend_argv, free_port, gateway_argv, running  # noqa: E402

KEY = "bench-policy-key-0123456789abcdef"
PLAIN_KEY = "bench-plain-key-0123456789abcdef"
LIMITS_KEY = "bench-limits-key-0123456789abcdef"
ISSUER = "https://login.bench.test/"
AUDIENCE = "https://gateway.bench.test/"
SIGNING_KEY = ec.generate_private_key(ec.SECP256R1())


def configure(demo_url: str) -> str:
    config_apply(document=f"""
tenants:
  - slug: bench-plain
    name: Policy benchmark, no policy
    keys:
      - {{name: agent, secret: "{PLAIN_KEY}"}}
  - slug: bench-limits
    name: Policy benchmark, rate limits only
    teams: [platform]
    keys:
      - {{name: agent, team: platform, secret: "{LIMITS_KEY}"}}
  - slug: bench-policy
    name: Policy benchmark
    teams: [platform]
    keys:
      - {{name: agent, team: platform, secret: "{KEY}"}}
backends:
  - {{tenant: bench-plain, name: demo, kind: mcp, transport: streamable-http, urls: ["{demo_url}"]}}
  - {{tenant: bench-limits, name: demo, kind: mcp, transport: streamable-http, urls: ["{demo_url}"]}}
  - {{tenant: bench-policy, name: demo, kind: mcp, transport: streamable-http, urls: ["{demo_url}"]}}
virtual_hosts:
  - {{tenant: bench-plain, slug: plain, backends: {{demo: demo}}}}
  - {{tenant: bench-limits, slug: limited, backends: {{demo: demo}}}}
  - {{tenant: bench-policy, slug: guarded, backends: {{demo: demo}}}}
rate_limits:
  - {{tenant: bench-limits, scope: key, name: agent, limit: 1000000, window_seconds: 60}}
  - {{tenant: bench-limits, scope: team, name: platform, limit: 1000000, window_seconds: 60}}
""", prune=False)
    tenant = Tenant.objects.get(slug="bench-policy")
    Tenant.objects.filter(pk=tenant.pk).update(audit_arguments="hash")
    access_policy_set(virtual_host=VirtualHost.objects.get(tenant=tenant, slug="guarded"), default="deny", rules=[
        RuleSpec("small-sums", "team", "platform", "allow", ["add"], "arguments.a < 1000000 && arguments.b >= 0"),
        RuleSpec("no-echo", "tenant", "bench-policy", "deny", ["echo"]),
    ])
    rate_limit_set(tenant=tenant, scope="key", name="agent", limit=1_000_000, window_seconds=60)
    rate_limit_set(tenant=tenant, scope="team", name="platform", limit=1_000_000, window_seconds=60)
    # Caps far above what runs spend (counters add up over a day's runs), and a cost table whose
    # matching entry is not the first.
    budget_set(tenant=tenant, scope="key", name="agent", daily=1_000_000_000, monthly=2_000_000_000)
    budget_set(tenant=tenant, scope="team", name="platform", daily=1_000_000_000, monthly=None)
    tool_costs_set(virtual_host=VirtualHost.objects.get(tenant=tenant, slug="guarded"), costs=[
        ToolCostSpec(["echo", "utc_*"], 0), ToolCostSpec(["add", "sub*"], 2),
    ])
    # Each caller's own egress credential (the demo server accepts any): a key entry and a team entry.
    egress_credential_set(backend=Backend.objects.get(tenant=tenant, name="demo"), source="per_identity", identities=[
        IdentitySecret("key", "agent", "bench-agent-upstream-token"),
        IdentitySecret("team", "platform", "bench-team-upstream-token"),
    ])
    pem = SIGNING_KEY.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    token_issuer_set(tenant=tenant, issuer=ISSUER, audience=AUDIENCE, public_key=pem.decode(), algorithms=["ES256"])
    now = int(time.time())
    return jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "sub": "bench", "team": "platform", "iat": now,
                       "exp": now + 86400}, SIGNING_KEY, algorithm="ES256", headers={"kid": "k"})


def run(calls: int) -> str:
    demo_port, gateway_port = free_port(), free_port()
    demo_url = f"http://127.0.0.1:{demo_port}/mcp"
    token = configure(demo_url)
    env = {"GATEWAY_INSTANCE_ID": "bench", "GATEWAY_LOG_LEVEL": "WARNING", "GATEWAY_DEBUG": "0"}
    before = calibrate()
    params = {"name": "add", "arguments": {"a": 1, "b": 2}}
    with running(backend_argv("scripts.demo_server", demo_port), demo_port, log_name="bench-policy-demo"), \
         running([*gateway_argv(gateway_port), "-v", "0"], gateway_port, env=env, log_name="bench-policy-gw") as gw:
        via = f"http://127.0.0.1:{gateway_port}/mcp/bench-policy"
        callers = {
            "direct": Caller(demo_url, "modern", "tools/call", params, False),
            "plain (no policy)": Caller(f"http://127.0.0.1:{gateway_port}/mcp/bench-plain/plain", "modern",
                                        "tools/call", params, True, key=PLAIN_KEY),
            "rate limits only (API key)": Caller(f"http://127.0.0.1:{gateway_port}/mcp/bench-limits/limited",
                                                 "modern", "tools/call", params, True, key=LIMITS_KEY),
            "guarded (API key)": Caller(f"{via}/guarded", "modern", "tools/call", params, True, key=KEY),
            "guarded (JWT ES256)": Caller(f"{via}/guarded", "modern", "tools/call", params, True, key=token),
        }
        measured = asyncio.run(measure(callers, 1, calls, gw.pid, max(calls // 20, 1)))
    after = calibrate()
    plain = percentile(measured["plain (no policy)"][0], 50)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"### Policy path — {now}",
        "",
        f"Command: `python -m bench.policy_path --calls {calls}`. Machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}. Stateless `tools/call add`, C=1, interleaved in rounds of 20. "
        f"Calibration loop: {before:.3f} s before, {after:.3f} s after.",
        "",
        "| path | p50 | p99 | gateway CPU/call | p50 vs no policy |",
        "|---|---|---|---|---|",
    ]
    for path, (latencies, _, cpu) in measured.items():
        p50 = percentile(latencies, 50)
        cpu_text = "—" if path == "direct" else f"{cpu:.2f} ms"
        delta = "" if path == "direct" else f"{p50 - plain:+.2f} ms"
        lines.append(f"| {path} | {p50:.2f} ms | {percentile(latencies, 99):.2f} ms | {cpu_text} | {delta} |")
        print(lines[-1], flush=True)
    admissions = asyncio.run(admission_cost(calls * 2))
    lines += ["", "| one admission (in process) | p50 | CPU |", "|---|---|---|"]
    for path, (p50, cpu) in admissions.items():
        lines.append(f"| {path} | {p50 * 1000:.0f} µs | {cpu * 1000:.0f} µs |")
        print(lines[-1], flush=True)
    return "\n".join(lines) + "\n"


async def admission_cost(calls: int) -> dict[str, tuple[float, float]]:
    """p50 latency and mean CPU (ms) of one `RedisRateLimiter.admit`: the key's and the team's rate
    limits, then the same with their budgets (the same round trip), alternating in rounds."""
    from django.conf import settings

    client = redis.asyncio.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    limiter = RedisRateLimiter(client)
    tenant = -int(time.time())  # buckets of their own, far from any real tenant's
    limits = [Limit(tenant, "key", "agent", 10**9, 60), Limit(tenant, "team", "platform", 10**9, 60)]
    budgets = [Budget(tenant, "key", "agent", 10**9, 2 * 10**9), Budget(tenant, "team", "platform", 10**9, None)]
    paths = {"rate limits (key + team)": (limits, (), 1), "rate limits + budgets (key + team)": (limits, budgets, 2)}
    found: dict[str, tuple[list[float], float]] = {path: ([], 0.0) for path in paths}
    for _ in range(20):
        for path, arguments in paths.items():
            latencies, cpu = found[path]
            cpu_before = time.process_time()
            for _ in range(calls // 20):
                started = time.perf_counter()
                await limiter.admit(*arguments)
                latencies.append((time.perf_counter() - started) * 1000)
            found[path] = (latencies, cpu + time.process_time() - cpu_before)
    await client.aclose()
    return {path: (percentile(lat, 50), cpu * 1000 / len(lat)) for path, (lat, cpu) in found.items()}


def main() -> None:
    bench_main(__doc__ or "", run)


if __name__ == "__main__":
    sys.exit(main())
